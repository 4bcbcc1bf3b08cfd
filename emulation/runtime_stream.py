"""The events of one `llmrt generate`, written out the moment each happens.

The real runtime line-buffers its stdout, so a host reading the ADB stream sees each token when
it is produced. Here every event goes to the shell's sink as it is appended (when the caller
streams; ShellContext.emit), while the world's clock stands at the time it happened. The daemon's
write returns once the host acknowledged the packet, so the world cannot run ahead of a host
that stamps arrivals before acknowledging them.

The `t` fields are what the runtime *says*: a lying persona (phonebench.emulation.runtime_personas) reports
token times compressed towards each other or shifted earlier than the tokens came out.
"""
from __future__ import annotations

import json
from typing import Any

from .runtime_personas import RuntimePersona
from .shell import ShellContext

SHIFT_CAP = 0.5  # a shifted first token is never reported before half its real latency


class EventStream:
    def __init__(self, ctx: ShellContext | None, persona: RuntimePersona) -> None:
        self.ctx = ctx
        self.persona = persona
        self.events: list[dict[str, Any]] = []  # as reported
        self.kept = bytearray()                  # what was not streamed (the caller collects)
        self._start_t: float | None = None
        self._first: tuple[float, float] | None = None  # (real, reported) time of token 0
        self._last: tuple[float, float] | None = None

    def append(self, event: dict[str, Any]) -> None:
        reported = self._report(event)
        self.events.append(reported)
        line = (json.dumps(reported) + "\n").encode()
        self.kept += self.ctx.emit(line) if self.ctx is not None else line

    def _report(self, event: dict[str, Any]) -> dict[str, Any]:
        kind, t = event.get("event"), event.get("t")
        if kind == "start":
            self._start_t = t
        if t is None or self._start_t is None or kind not in ("token", "done"):
            return event
        p = self.persona
        if kind == "token" and self._first is None:
            shift = min(p.report_shift_s, SHIFT_CAP * (t - self._start_t))
            self._first = (t, t - shift)
        if kind == "done":
            said = self._last[1] + (t - self._last[0]) if self._last else t
        else:
            real0, said0 = self._first
            said = said0 + p.report_compression * (t - real0)
        if kind == "token":
            self._last = (t, said)
        return {**event, "t": said}
