"""Deterministic kill points for the crash-consistency tests. With PHONEBENCH_KILL_AT=POINT@N in
the environment, the process kills itself with SIGKILL (as `kill -9` or a power cut would) the
Nth time it reaches POINT: a kill at an exact place in the record's life (between tests, inside a
verdict, inside the store's transaction) without betting on timing. Unset, a point costs one
environment lookup.

Points: `write:EVENT` (before results.json is written for a recorder event: start, dut,
instrument, test, finish), `written:EVENT` (results.json written, the store not yet),
`stored:EVENT` (both written), `store-commit` (inside the store's transaction, before its
commit), `verdict` (a verdict being computed), `raw` (a test's raw data just written).
"""
from __future__ import annotations

import os
import signal
from collections import Counter

ENV = "PHONEBENCH_KILL_AT"
_reached: Counter[str] = Counter()


def kill_point(point: str) -> None:
    spec = os.environ.get(ENV)
    if not spec:
        return
    target, _, nth = spec.rpartition("@")
    if target != point:
        return
    _reached[point] += 1
    if str(_reached[point]) == nth:
        os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))
