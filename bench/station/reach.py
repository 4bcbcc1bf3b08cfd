"""Can this station's phones be reached at all? Asked once, before any test.

A phone that does not answer is an error of each of its tests while the others go on; but when no
selected phone can be reached (no adb server and no adb to start one, a server that refuses, every
phone down) every test would fail with the same line. The run stops before its tests instead, with
one line naming the cause and the fix (exit PHONES_UNREACHABLE, docs/faults.md), and its record
says it never reached them.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from phonebench.core.errors import BenchError
from phonebench.core.station import StationConfig

log = logging.getLogger(__name__)


@dataclass
class Reach:
    """What the look found: which adb server (when a phone uses one), and each phone's error."""

    adb: str | None = None  # one line: the running server, or the binary that starts one
    reached: list[str] = field(default_factory=list)
    unreachable: dict[str, BenchError] = field(default_factory=dict)

    @property
    def none_reached(self) -> bool:
        return bool(self.unreachable) and not self.reached

    def stop_line(self) -> str:
        """One line (and the fix) for a station none of whose phones answered."""
        causes = {name: str(exc).split("\n  hint:")[0].strip() for name, exc in self.unreachable.items()}
        hints = sorted({exc.hint for exc in self.unreachable.values() if exc.hint})
        distinct = set(causes.values())
        cause = distinct.pop() if len(distinct) == 1 else "; ".join(f"{n}: {c}" for n, c in causes.items())
        fix = f"; fix: {hints[0]}" if len(hints) == 1 else ""
        return f"no phone of this run can be reached ({', '.join(causes)}): {cause}{fix}"


def adb_line(station: StationConfig, names: Iterable[str]) -> str | None:
    """Which adb server the bench uses for these phones, None when none goes through a server."""
    if not any(station.dut(n).transport == "server" for n in names):
        return None
    from phonebench.drivers.adb_server import default_server

    return default_server().describe()


def reach_phones(station: StationConfig, names: Iterable[str], connect_timeout_s: float = 10.0) -> Reach:
    """Connect to each named phone once and close it again. A phone another bench holds counts as
    reached (it answers; the run waits for it later)."""
    from phonebench.drivers.locks import PhoneBusy
    from .owner import StationOwner

    names = list(names)
    reach = Reach(adb=adb_line(station, names))
    with StationOwner(station) as owner:
        for name in names:
            try:
                with owner.connected(name, connect_timeout_s=connect_timeout_s):
                    reach.reached.append(name)
            except PhoneBusy:
                reach.reached.append(name)
            except BenchError as exc:  # unreachable, a refused server, a bad address: this phone's cause
                reach.unreachable[name] = exc
    for name, error in reach.unreachable.items():
        log.info("phone %s unreachable: %s", name, str(error).splitlines()[0])
    return reach
