"""A thermal check in a chamber: the air held at a set point, stable before anything is judged,
watched for alarms while the check measures, and stated on every verdict (docs/chamber.md, "Runs
in a chamber").

    hold = hold_ambient(chamber, set_point_for(entry), clock=clock, pause=pause)   # waits until stable
    result = some_thermal_check(..., watch=hold.watch)                                # reads the air, alarms
    result = hold.attach(result)                                                      # extra["chamber"] on every verdict

`watch` reads the chamber after each reading of the check: the air goes into the record, and an
alarm (door open, over-temperature limit) is a ChamberAlarm at once. A check that meets one stops
with a ChamberStopped carrying what it had measured, which `kept` records before the test fails.

The chamber holds the air; it is not the measurement. The ambient a cover figure is referred from
is still the ambient probe's (bench/stats/ambient.py); the chamber's air, set point and identity
are the conditions the verdict states.
"""
from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from . import CheckResult, Recorder
from ..stats.ambient import REFERENCE_AMBIENT_C
from phonebench.core.errors import ConfigError, InstrumentError
from phonebench.core.judge import found
from phonebench.core.verdict import Finding, FindingKind, Outcome, Verdict
from phonebench.drivers.chamber import Chamber, ChamberAlarm, Pause, Stabilised
from phonebench.drivers.clock import StationClock
from ..specs.sla import SlaEntry

log = logging.getLogger(__name__)

# What "stable" means before a thermal check starts (an SLA entry may state its own, parameters
# chamber_band_c / chamber_hold_s): the air within +-0.5 degC of the set point for 5 minutes. The
# phone's cover follows its air with minutes of lag; 5 minutes in band after the chamber settled
# leaves the phone's own warm-up (the checks' rules) to do the rest.
BAND_C = 0.5
HOLD_S = 300.0
TIMEOUT_S = 3600.0
POLL_S = 10.0
# A chamber's air may wander a little more during a measurement than the band it settled in (the
# phone's own heat, the loop's control); beyond this the verdict is not at the set point it states.
DRIFT_C = 1.0
# No claim is stated below or above these: a set point outside them is a profile's typo.
SET_POINT_RANGE_C = (-40.0, 85.0)


def set_point_for(entry: SlaEntry) -> float:
    """The air a thermal check runs in: the entry's `chamber_set_point_c`, else the ambient its
    figure is stated at (`reference_ambient_c`), else the claims' 25 degC."""
    p = entry.parameters
    value = p.get("chamber_set_point_c", p.get("reference_ambient_c", REFERENCE_AMBIENT_C))
    low, high = SET_POINT_RANGE_C
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= float(value) <= high:
        raise ConfigError(f"SLA profile {entry.profile!r}: {entry.metric}: chamber_set_point_c {value!r} is not a "
                          f"chamber set point", hint=f"degC between {low:g} and {high:g} (docs/chamber.md)")
    return float(value)


def _parameter(entry: SlaEntry, key: str, default: float) -> float:
    value = entry.parameters.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not float(value) > 0:
        raise ConfigError(f"SLA profile {entry.profile!r}: {entry.metric}: {key} {value!r}",
                          hint=f"a number > 0 ({default:g} by default; docs/chamber.md)")
    return float(value)


class ChamberStopped(InstrumentError):
    """A chamber alarm stopped a thermal check; `partial` is what it had measured by then."""

    def __init__(self, alarm: ChamberAlarm, partial: CheckResult, what: str) -> None:
        self.alarm, self.partial = alarm, partial
        first = str(alarm).splitlines()[0]
        super().__init__(f"{first}: {what} stopped, what it had measured is kept", hint=alarm.hint)


@dataclass
class AmbientHold:
    """The chamber around one check: its set point, how it settled, and its air while the check ran."""

    chamber: Chamber
    set_point_c: float
    stabilised: Stabilised
    clock: StationClock
    drift_c: float = DRIFT_C
    since_s: float | None = None  # a hold kept on from an earlier check: the station time since its last look
    t_s: list[float] = field(default_factory=list)  # station clock, s
    air_c: list[float] = field(default_factory=list)  # the chamber's air (its loop's process value)

    def watch(self) -> None:
        """One look at the chamber during the check: its alarms first (ChamberAlarm), then its air."""
        self.air_c.append(self.chamber.air_temperature())
        self.t_s.append(self.clock.now())

    def record(self) -> dict[str, Any]:
        """What each verdict keeps of the chamber (extra["chamber"])."""
        air = [a for a in self.air_c if math.isfinite(a)]
        identity = self.chamber.identity
        return {"set_point_c": self.set_point_c,
                "air_c": sum(air) / len(air) if air else None,
                "air_min_c": min(air) if air else None, "air_max_c": max(air) if air else None, "n": len(air),
                "stable": {"air_c": self.stabilised.air_c, "band_c": self.stabilised.band_c,
                           "held_s": self.stabilised.held_s, "waited_s": self.stabilised.waited_s,
                           "kept_on_from_last_check_s": self.since_s},
                "instrument": {**identity.as_dict(), "name": self.chamber.name,
                               # The chamber holds the air; the ambient probe measures it (docs/chamber.md).
                               "calibration": "not used for the figure: the ambient probe measures the air"}}

    def findings(self) -> tuple[Finding, ...]:
        """The air left its set point during the check: the verdict is not at the ambient it states."""
        air = [a for a in self.air_c if math.isfinite(a)]
        if not air:
            return ()
        worst = max(air, key=lambda a: abs(a - self.set_point_c))
        if abs(worst - self.set_point_c) <= self.drift_c:
            return ()
        return (Finding(FindingKind.OUTSIDE_VALIDITY,
                        f"the chamber's air reached {worst:.2f} degC during the measurement, more than "
                        f"{self.drift_c:g} degC from its set point {self.set_point_c:g} degC: re-measure with the "
                        "chamber holding its air"),)

    def attach(self, result: CheckResult) -> CheckResult:
        """The check's verdicts with the chamber stated on each, in its data and its detail (and a
        finding if its air wandered)."""
        record, findings, text = self.record(), self.findings(), self.text()
        result.verdicts = [_with_chamber(v, record, findings, text) for v in result.verdicts]
        return result

    def kept_on(self, chamber: Chamber, set_point_c: float, band_c: float) -> AmbientHold | None:
        """This hold carried into the next check without a new wait, if nothing moved: the same set
        point and band, every look of this check inside the band, and the air inside it now (its
        alarms checked first). The stability wait costs minutes a check (docs/chamber.md)."""
        if chamber.identity != self.chamber.identity or set_point_c != self.set_point_c \
                or band_c != self.stabilised.band_c or not self.t_s:
            return None
        looks = [*self.air_c, chamber.air_temperature()]
        if not all(abs(a - set_point_c) <= band_c for a in looks):
            return None
        now = self.clock.now()
        held = self.stabilised.held_s + (now - self.t_s[0])
        return AmbientHold(chamber, set_point_c, Stabilised(looks[-1], set_point_c, band_c, held, 0.0),
                           self.clock, self.drift_c, since_s=now - self.t_s[-1])

    def text(self) -> str:
        """One line for a verdict's detail: where the air was held, and where it was."""
        air = [a for a in self.air_c if math.isfinite(a)]
        seen = f", air {min(air):.2f}..{max(air):.2f} degC" if air else ""
        return (f"in chamber {self.chamber.identity.model} s/n {self.chamber.identity.serial} at "
                f"{self.set_point_c:g} degC (stable within +-{self.stabilised.band_c:g} degC for "
                f"{self.stabilised.held_s:.0f} s{seen})")


def _with_chamber(verdict: Verdict, record: dict[str, Any], findings: tuple[Finding, ...], text: str) -> Verdict:
    detail = "; ".join(part for part in (verdict.detail, text) if part)
    # A drifting air is a condition of a judged temperature, not of a count or a record (INFO).
    if findings and verdict.unit == "degC" and verdict.outcome is not Outcome.INFO:
        return found(verdict, *findings, extra={"chamber": record}, detail=detail)
    return verdict.but(extra={"chamber": record}, detail=detail)


def hold_ambient(chamber: Chamber, set_point_c: float, *, clock: StationClock, pause: Pause,
                 band_c: float = BAND_C, hold_s: float = HOLD_S, timeout_s: float = TIMEOUT_S,
                 poll_s: float = POLL_S) -> AmbientHold:
    """Set the chamber to `set_point_c` (a step: the controller's loop limits its own rate) and wait
    until its air has held within +-band_c for hold_s, on the station clock."""
    chamber.set_ramp(None)
    chamber.set_point(set_point_c)
    stable = chamber.wait_stable(band_c=band_c, hold_s=hold_s, timeout_s=timeout_s, clock=clock, pause=pause,
                                 poll_s=poll_s)
    log.info("%s: air %.2f degC, stable at %g degC after %.0f s", chamber.name, stable.air_c, set_point_c,
             stable.waited_s)
    return AmbientHold(chamber, set_point_c, stable, clock)


def hold_for(chamber: Chamber, entry: SlaEntry, *, clock: StationClock, pause: Pause,
             previous: AmbientHold | None = None) -> AmbientHold:
    """hold_ambient at the entry's set point, band and hold time (set_point_for; chamber_band_c,
    chamber_hold_s), or the `previous` check's hold kept on when nothing moved (AmbientHold.kept_on)."""
    set_point, band = set_point_for(entry), _parameter(entry, "chamber_band_c", BAND_C)
    kept_on = previous.kept_on(chamber, set_point, band) if previous is not None else None
    if kept_on is not None:
        log.info("%s: still at %g degC from the last check: no new wait", chamber.name, set_point)
        return kept_on
    return hold_ambient(chamber, set_point, clock=clock, pause=pause, band_c=band,
                        hold_s=_parameter(entry, "chamber_hold_s", HOLD_S))


@contextlib.contextmanager
def kept(record: Recorder, held: AmbientHold | None) -> Iterator[None]:
    """Records what a check stopped by a chamber alarm had measured (the chamber stated on its
    verdicts), then lets the stop fail the test."""
    try:
        yield
    except ChamberStopped as stop:
        (held.attach(stop.partial) if held is not None else stop.partial).record_into(record)
        raise
