"""The link between the host and the phone as the station clock sees it: a trivial command's round
trip, its jitter, the clock's tick, and whether the station clock runs in the phone's time domain
(a pause on the phone, timed on the station clock). Token checks size their tolerances on it; the
NPU fingerprint's timing signature needs the clock to be in the phone's domain."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from phonebench.core.errors import InvalidMeasurement
from phonebench.core import judge
from phonebench.core.verdict import Finding, FindingKind, Uncertainty, UncertaintyComponent, Verdict
from phonebench.drivers.runtime import RuntimeClient

LINK_PROBES = 20          # round trips of a trivial command that measure the link
CLOCK_PAUSE_S = 0.2       # a pause on the phone's clock, timed on the station clock
CLOCK_RATE_RANGE = (0.5, 2.0)  # station seconds per phone second: outside, another time domain


@dataclass(frozen=True)
class LinkTiming:
    """A trivial command's output arriving after it was sent, on the station clock."""

    round_trip_s: float   # mean
    jitter_s: float       # standard deviation of the round trip
    resolution_s: float   # the station clock's tick
    n: int
    clock: str = "the station clock"
    rate: float | None = None  # station-clock seconds per phone second over CLOCK_PAUSE_S on the phone

    @property
    def domain_problem(self) -> "ClockDomainProblem | None":
        """Why the station clock is not in the phone's time domain; None when it is (or was not checked)."""
        low, high = CLOCK_RATE_RANGE
        if self.rate is None or low <= self.rate <= high:
            return None
        return ClockDomainProblem(self.clock, f"a {CLOCK_PAUSE_S:g} s pause on the phone's clock took "
                                              f"{self.rate * CLOCK_PAUSE_S:.4g} s on it", self.rate)

    @property
    def tolerance_s(self) -> float:
        """How far an interval on the host may differ from the same interval on the phone."""
        return self.round_trip_s / 2.0 + 3.0 * self.jitter_s + 2.0 * self.resolution_s

    def uncertainty(self, unit_scale: float = 1000.0) -> Uncertainty:
        """Of one interval between two arrivals (in ms by default): link jitter at each end, clock ticks."""
        return Uncertainty.combine([
            UncertaintyComponent("link jitter", unit_scale * math.sqrt(2.0) * self.jitter_s, "A",
                                 f"std of {self.n} round trips, at both ends of the interval"),
            UncertaintyComponent("station clock resolution", unit_scale * self.resolution_s / math.sqrt(3.0), "B",
                                 "one tick, rectangular, at both ends")])

    def as_dict(self) -> dict[str, float | str | None]:
        return {"round_trip_ms": 1000.0 * self.round_trip_s, "jitter_ms": 1000.0 * self.jitter_s,
                "resolution_ms": 1000.0 * self.resolution_s, "tolerance_ms": 1000.0 * self.tolerance_s, "n": self.n,
                "clock": self.clock, "clock_rate": self.rate}


@dataclass(frozen=True)
class ClockDomainProblem:
    """The station clock does not run in the phone's time domain: a station error, not the phone's."""

    clock: str
    witness: str        # what showed it
    rate: float | None  # station-clock seconds per second of the witness

    def invalidate(self, verdict: Verdict) -> Verdict:
        """The verdict as INVALID, naming the clock: nothing timed on that clock says anything."""
        rate = "n/a" if self.rate is None else f"{self.rate:.3g}"
        low, high = CLOCK_RATE_RANGE
        return judge.found(verdict, Finding(
            FindingKind.INVALID, f"invalid: station error: {self.clock} is not in the phone's time domain "
                                 f"({self.witness}: rate {rate}, expected {low:g}..{high:g}); check the "
                                 f"station file's [instruments.clock] (each emulated bay needs its own world's "
                                 f"clock, hardware the host clock); nothing timed on it is judged"),
            extra={"station_error": "clock", "clock": self.clock, "clock_rate": self.rate})


def _timed_arrival(runtime: RuntimeClient, command: str, expect: str) -> float:
    """Send-to-arrival of `expect`'s line, on the station clock."""
    result = runtime.device.shell_timed(command, runtime.clock.now)  # type: ignore[attr-defined,union-attr]
    arrived = [t for t, line in result.lines if line.strip() == expect]
    if result.exit_code != 0 or not arrived:
        raise InvalidMeasurement(f"{runtime.device.name}: `{command}` did not come back ({result.output!r})",
                                 hint="the device's shell does not answer a trivial command; check `adb shell`")
    return arrived[0] - result.sent_t


def measure_link(runtime: RuntimeClient, n: int = LINK_PROBES) -> LinkTiming | None:
    """The link's round trip as the station clock sees it, and the clock's rate against the
    phone's own (a pause timed on it); None when the host cannot observe."""
    if not runtime.observes:
        return None
    values = np.asarray([_timed_arrival(runtime, "echo pb-link", "pb-link") for _ in range(n)])
    round_trip = float(values.mean())
    paused = _timed_arrival(runtime, f"sleep {CLOCK_PAUSE_S:g}; echo pb-clock", "pb-clock")
    return LinkTiming(round_trip, float(values.std(ddof=1)) if n > 1 else 0.0,
                      float(getattr(runtime.clock, "resolution_s", 0.0)), n,
                      clock=str(getattr(runtime.clock, "name", "the station clock")),
                      rate=max(0.0, paused - round_trip) / CLOCK_PAUSE_S)
