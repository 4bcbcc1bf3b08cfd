"""The chamber role: a thermal chamber that holds the phone's ambient air (docs/chamber.md).

    chamber = open_instrument("chamber", "watlow-f4t", "10.0.0.9:502")
    chamber.set_ramp(2.0)                # °C/min; None: step to the set point
    chamber.set_point(35.0)              # °C; the loop controls to it
    chamber.wait_stable(band_c=0.5, hold_s=300, timeout_s=3600, clock=clock, pause=pause)
    chamber.standby()                    # the loop off: no heat, no refrigeration

Every call checks the chamber's alarms first: an open door or a tripped over-temperature limit is
one ChamberAlarm naming the alarm and the chamber, never a wrong temperature.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from phonebench.core.errors import InstrumentError
from .clock import StationClock
from .visa import InstrumentIdentity

Pause = Callable[[float], None]  # waits this many seconds on the station's time base


class ChamberAlarm(InstrumentError):
    """The chamber reports an alarm (door open, over-temperature limit, deviation): its
    temperature cannot be trusted to be the set point."""

    def __init__(self, chamber: str, alarm: str, hint: str) -> None:
        self.chamber, self.alarm = chamber, alarm
        super().__init__(f"{chamber}: {alarm}", hint=hint)


@dataclass(frozen=True)
class ChamberState:
    """One look at the control loop, °C."""

    air_c: float  # the loop's process value: the chamber's air
    set_point_c: float  # where the loop is going
    working_set_point_c: float  # where it is now (a ramp in progress moves this one)
    running: bool  # the loop is controlling (Auto or Manual), not in standby


@dataclass(frozen=True)
class Stabilised:
    """What wait_stable saw when the air had stayed inside the band for the hold time."""

    air_c: float
    set_point_c: float
    band_c: float
    held_s: float
    waited_s: float  # from the call to the end of the hold, on the clock it was given


@runtime_checkable
class Chamber(Protocol):
    name: str
    identity: InstrumentIdentity

    def set_point(self, celsius: float) -> None: ...

    def set_ramp(self, c_per_min: float | None) -> None: ...

    def air_temperature(self) -> float: ...

    def state(self) -> ChamberState: ...

    def alarms(self) -> list[str]: ...

    def check_alarms(self) -> None: ...

    def wait_stable(self, band_c: float = 0.5, hold_s: float = 120.0, timeout_s: float = 3600.0, *,
                    clock: StationClock | None = None, pause: Pause | None = None,
                    poll_s: float = 10.0) -> Stabilised: ...

    def standby(self) -> None: ...

    def close(self) -> None: ...
