"""The station clock: the time base every host-side observation of a phone is stamped with.

On hardware the bench's own clock is real time, so the station clock is the host's monotonic
clock (family `host`, the default when a station file names no clock). An emulated world runs on
its own simulated clock, faster than real time: there the station clock is the world's, served
by a SCPI time server and reached over VISA like any other instrument (family `phonebench-clock`;
protocol in docs/evidence.md). Either way a check asks `clock.now()` and never mixes time bases.
"""
from __future__ import annotations

import logging
import platform
import time
from typing import Any, Protocol, runtime_checkable

from phonebench.core.errors import InstrumentError
from .visa import DEFAULT_TIMEOUT_S, InstrumentIdentity, ScpiInstrument

log = logging.getLogger(__name__)


@runtime_checkable
class StationClock(Protocol):
    """Seconds on the station's time base (monotonic; the epoch is the clock's own)."""

    name: str
    identity: InstrumentIdentity
    resolution_s: float

    def now(self) -> float: ...

    def close(self) -> None: ...


class HostClock:
    """The host's monotonic clock (time.monotonic)."""

    role = "clock"
    family = "host"

    def __init__(self, address: str = "host") -> None:
        self.address = address
        self.name = "clock host (time.monotonic)"
        info = time.get_clock_info("monotonic")
        self.resolution_s = float(info.resolution)
        self.identity = InstrumentIdentity("host", "time.monotonic", platform.node(), info.implementation,
                                           address, self.role, self.family)

    def now(self) -> float:
        return time.monotonic()

    def close(self) -> None:
        """Nothing to release."""


class ScpiClock(ScpiInstrument):
    """A SCPI time server: `:TIME:MONotonic?` answers seconds, `:TIME:RESolution?` its step."""

    role = "clock"
    family = "phonebench-clock"

    def __init__(self, address: str, backend: str = "@py", timeout_s: float = DEFAULT_TIMEOUT_S,
                 resource: Any = None) -> None:
        super().__init__(address, backend, timeout_s, resource)
        self.resolution_s = self._number(":TIME:RES?")

    def _number(self, command: str) -> float:
        text = self.query(command)
        try:
            return float(text)
        except ValueError:
            raise InstrumentError(f"{self.name}: `{command}` answered {text.strip()!r}, not a number of seconds",
                                  hint="is this address a phonebench-clock time server (docs/evidence.md)?") from None

    def now(self) -> float:
        return self._number(":TIME:MON?")
