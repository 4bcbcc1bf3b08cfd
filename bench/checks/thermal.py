"""Claim 7: back-cover temperature in sustained use, and how evenly the heat spreads.

Thermocouples sit on the back cover at the hotspots (T1 over the SoC, T2 over the battery; T3
reads the room). The phone runs a sustained dialog loop: the stimulus asks a question every
`period_s` and the phone answers. After each dialog the bench reads the probes and the phone's
own view (`dumpsys thermalservice`: thermal status and zones). The loop first warms the phone
up: at least `warmup_s`, then until the hottest cover probe rose less than `stable_c` over the
last `stable_window_s` (steady state; the cover's time constant is minutes), at most
`max_warmup_s`. Then `samples` readings are the measurement:

- cover temperature: the hottest cover probe of every reading, against the limit (a census:
  every reading counts), referred to the claim's reference ambient from the room the ambient
  probe read over the measurement (bench/stats/ambient.py; outside the window that is valid in,
  INCONCLUSIVE);
- spread: hottest minus coolest cover probe per reading ("heat spread evenly");
- device thermal status and zones over the same time, recorded (no target in the claim).

Time here is the bench's: the sum of the waits it asked the phone for (`sleep` on the phone,
which on real hardware takes that long too and, on the emulated station, moves its clock).
"""
from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import stats

from . import CheckResult
from .chamber_hold import ChamberStopped
from .voice import arm_stimulus
from ..phone.device_state import read_thermal_status
from phonebench.core.errors import ConfigError, InvalidMeasurement
from ..specs.sla import SlaEntry
from phonebench.core.verdict import Evidence, PlotHint, Verdict
from phonebench.core.judge import compare
from ..stats.ambient import PLACEMENT_C, VALID_AMBIENT_C, AmbientCorrection, AmbientReference, measure_ambient
from ..stats.uncertainty import calibration_of, thermal_budget
from phonebench.drivers.chamber import ChamberAlarm
from phonebench.drivers.device import Device
from phonebench.drivers.stimulus import AudioStimulus
from phonebench.drivers.thermal import ThermalProbe

log = logging.getLogger(__name__)

COVER_MAX = "back_cover_temperature_max"
COVER_SPREAD = "cover_temp_spread"
# cover_temperature_check's entries and the metric ids that hold them (profile.pick(**ENTRIES)).
ENTRIES = {"cover_max": COVER_MAX, "cover_spread": COVER_SPREAD}
STABLE_AVERAGE = 5  # readings averaged at each end of the stability window
# The warm-up bound (ThermalSetup.remaining_rise_c; benchmarks/bench_thermal_approach.py is its
# study, docs/nightly.md its figures): the slowest time constant of a cover's approach, above every
# fit on nominal and hot units (180-650 s); the slope is read over the last SLOPE_WINDOW_S (2 minutes
# was too short: the loop's heat wanders with the answers' lengths, and a flat stretch under-covered),
# and not before BOUND_FROM_S of the loop.
REMAINING_RISE_TAU_S = 800.0
SLOPE_WINDOW_S = 180.0
BOUND_FROM_S = 240.0


@dataclass(frozen=True)
class ThermalSetup:
    cover_channels: tuple[str, ...] = ("T1", "T2")
    ambient_channel: str | None = "T3"
    period_s: float = 3.0  # one dialog per period: the phone talks most of the time
    warmup_s: float = 600.0
    stable_c: float = 0.3
    stable_window_s: float = 300.0
    max_warmup_s: float = 3600.0
    # The warm-up may also end on a bound of the cover's remaining rise (remaining_rise_bound) once
    # it is at most this, degC; the bound then joins the verdicts' uncertainty. None: steadiness only.
    remaining_rise_c: float | None = None


def ambient_reference(entry: SlaEntry) -> AmbientReference | None:
    """The ambient an entry's figure is stated at (`reference_ambient_c`), the window referring a
    reading to it is valid in (`ambient_window_c`) and the ambient probe's placement bound
    (`ambient_placement_c`); None when the entry states no ambient (a difference of two probes)."""
    p = entry.parameters
    if "reference_ambient_c" not in p:
        return None
    try:
        reference = float(p["reference_ambient_c"])
        low, high = (float(x) for x in p.get("ambient_window_c", VALID_AMBIENT_C))
        placement = float(p.get("ambient_placement_c", PLACEMENT_C))
    except (TypeError, ValueError):
        reference, low, high, placement = math.nan, math.nan, math.nan, math.nan
    if not (low <= reference <= high and placement >= 0):
        raise ConfigError(f"SLA profile {entry.profile!r}: {entry.metric}: reference_ambient_c "
                          f"{p.get('reference_ambient_c')!r}, ambient_window_c {p.get('ambient_window_c')!r}, "
                          f"ambient_placement_c {p.get('ambient_placement_c')!r} do not make a reference ambient",
                          hint="reference_ambient_c = 25.0 inside ambient_window_c = [23.0, 27.0], "
                               "ambient_placement_c >= 0 (degC; docs/uncertainty.md, \"The room\")")
    return AmbientReference(reference, (low, high), placement)


def setup_for(cover_max: SlaEntry) -> ThermalSetup:
    """The loop's setup from the cover entry's parameters: `warmup_s` (the least warm-up) and
    `warmup_bound_c` (the remaining rise a warm-up may end on; docs/nightly.md)."""
    bound = cover_max.parameters.get("warmup_bound_c")
    return ThermalSetup(warmup_s=float(cover_max.parameters.get("warmup_s", ThermalSetup.warmup_s)),
                        remaining_rise_c=None if bound is None else float(bound))


@dataclass
class ThermalRun:
    """Every reading of the loop (warm-up included); `measure_from` starts the measurement."""

    setup: ThermalSetup
    t_s: list[float] = field(default_factory=list)
    probes: dict[str, list[float]] = field(default_factory=dict)  # channel -> °C, NaN on a probe fault
    status: list[int] = field(default_factory=list)  # the phone's THERMAL_STATUS per reading
    zones: dict[str, list[float]] = field(default_factory=dict)  # the phone's own sensors, °C
    measure_from: int = 0
    stable: bool = False
    remaining_rise_c: float | None = None  # the bound the warm-up ended on (None: it ended steady or at its limit)
    calibration: dict | None = None  # the probes' offsets and their uncertainties

    def channel(self, name: str) -> np.ndarray:
        return np.asarray(self.probes.get(name, [math.nan] * len(self.t_s)), dtype=float)

    def cover(self) -> np.ndarray:
        """Readings x cover channels, °C."""
        return np.column_stack([self.channel(c) for c in self.setup.cover_channels])

    @property
    def hottest(self) -> np.ndarray:
        return self.cover().max(axis=1)

    @property
    def spread(self) -> np.ndarray:
        cover = self.cover()
        return cover.max(axis=1) - cover.min(axis=1)

    def raw(self) -> dict[str, np.ndarray]:
        """Trace arrays (t, y = first cover probe, y2 = second) plus every series of the loop."""
        channels = self.setup.cover_channels
        out = {"t": np.asarray(self.t_s), "y": self.channel(channels[0]),
               "measure_from": np.asarray(self.measure_from),
               "remaining_rise_c": np.asarray(math.nan if self.remaining_rise_c is None else self.remaining_rise_c)}
        if len(channels) > 1:
            out["y2"] = self.channel(channels[1])
        if self.setup.ambient_channel:
            out["ambient"] = self.channel(self.setup.ambient_channel)
        for name in self.probes:
            out[f"probe_{name}"] = self.channel(name)
        out["thermal_status"] = np.asarray(self.status)
        for name, values in self.zones.items():
            out[f"zone_{name}"] = np.asarray(values, dtype=float)
        return out

    def raw_spread(self) -> dict[str, np.ndarray]:
        return {"t": np.asarray(self.t_s), "y": self.spread}


Watch = Callable[[], None]  # a look at the conditions after each reading (a chamber: its air and alarms)


def run_dialog_loop(thermal: ThermalProbe, stimulus: AudioStimulus, device: Device, samples: int,
                    setup: ThermalSetup = ThermalSetup(), watch: Watch | None = None) -> ThermalRun:
    """Warm up in a sustained dialog loop, then take `samples` readings (stimulus loaded and armed).
    A chamber alarm `watch` raises stops the loop: a ChamberStopped with the readings taken."""
    missing = [c for c in (*setup.cover_channels, setup.ambient_channel) if c and c not in thermal.channels]
    if missing:
        raise InvalidMeasurement(f"thermal probe has no channel(s) {missing}; it has {thermal.channels}",
                                 hint="name the cover and ambient channels of this station's probe")
    run = ThermalRun(setup, calibration=calibration_of(thermal))
    elapsed, measured = 0.0, 0
    while measured < samples:
        stimulus.fire()
        device.run(["sleep", f"{setup.period_s:g}"])
        elapsed += setup.period_s
        read_monitors(run, thermal, device, elapsed)
        try:
            if watch is not None:
                watch()
        except ChamberAlarm as alarm:  # the readings so far are kept; nothing is judged from them
            raise ChamberStopped(alarm, CheckResult([], {"cover-temperature": run.raw(),
                                                         "cover-spread": run.raw_spread()}),
                                 f"the cover loop after {elapsed:.0f} s") from None
        if warmed_up(run, elapsed):
            measured = len(run.t_s) - run.measure_from
    # The last question may still be being answered: hand the phone on quiet, or the next test's
    # first recording starts inside this answer (its quiet lead-in is not quiet).
    device.run(["sleep", f"{setup.period_s:g}"])
    return run


def warmed_up(run: ThermalRun, elapsed: float) -> bool:
    """After the latest reading: whether the run is measuring (warm-up over). The warm-up ends at
    `warmup_s` once the hottest cover probe is steady, or at `max_warmup_s` regardless."""
    setup = run.setup
    if run.measure_from or (run.stable and elapsed >= setup.warmup_s):
        return True
    window = max(1, int(round(setup.stable_window_s / setup.period_s)))
    hottest = run.hottest
    if len(hottest) > window + STABLE_AVERAGE:
        rise = np.nanmean(hottest[-STABLE_AVERAGE:]) - np.nanmean(hottest[-window - STABLE_AVERAGE:-window])
        run.stable = bool(rise < setup.stable_c)
    if elapsed >= setup.warmup_s and (run.stable or elapsed >= setup.max_warmup_s):
        run.measure_from = len(run.t_s)
        log.info("warm-up done after %.0f s (%s)", elapsed, "steady" if run.stable else "not steady")
    elif elapsed >= max(setup.warmup_s, BOUND_FROM_S) and setup.remaining_rise_c is not None:
        t = np.asarray(run.t_s)
        recent = t > elapsed - SLOPE_WINDOW_S
        bound = remaining_rise_bound(t[recent], hottest[recent])
        if bound <= setup.remaining_rise_c:
            run.measure_from, run.remaining_rise_c = len(run.t_s), bound
            log.info("warm-up done after %.0f s (the cover may still rise <= %.2f degC)", elapsed, bound)
    return False


def remaining_rise_bound(t_s: np.ndarray, celsius: np.ndarray, tau_s: float = REMAINING_RISE_TAU_S) -> float:
    """An upper bound on how much more a warming cover rises, degC: the slowest approach time
    constant (`tau_s`) times the upper 95 % bound of the present slope, a line through
    the readings given whose standard error is inflated for lag-1 autocorrelated residuals. A
    first-order approach rising at slope s has s x tau left to rise (0 when falling)."""
    keep = np.isfinite(celsius)
    if keep.sum() < 3:
        return math.inf
    t, y = t_s[keep], celsius[keep]
    line = stats.linregress(t, y)
    residuals = y - (line.intercept + line.slope * t)
    rho = float(np.corrcoef(residuals[:-1], residuals[1:])[0, 1]) if residuals.std() > 0 else 0.0
    inflation = math.sqrt((1 + rho) / (1 - rho)) if 0 < rho < 1 else 1.0
    return tau_s * max(float(line.slope) + 1.645 * float(line.stderr) * inflation, 0.0)


def read_monitors(run: ThermalRun, thermal: ThermalProbe, device: Device, elapsed: float) -> None:
    """One reading of the probes and of the phone's own thermal view, appended to the run."""
    reading = thermal.read()
    run.t_s.append(elapsed)
    for name in reading.channels:
        run.probes.setdefault(name, [math.nan] * (len(run.t_s) - 1)).append(reading.celsius.get(name, math.nan))
    for name, values in run.probes.items():  # a channel missing from this reading
        if len(values) < len(run.t_s):
            values.append(math.nan)
    report = read_thermal_status(device)
    run.status.append(report.status)
    for name, (_type, celsius) in report.temperatures.items():
        run.zones.setdefault(name, [math.nan] * (len(run.t_s) - 1)).append(celsius)
    for values in run.zones.values():
        if len(values) < len(run.t_s):
            values.append(math.nan)


def _thermal_verdicts(run: ThermalRun, *, cover_max: SlaEntry, cover_spread: SlaEntry,
                      note: str = "") -> list[Verdict]:
    """Cover maximum and spread by their entries; the phone's thermal status as a record. Each
    points at the cover readings (the spread at its own series first); `note` ends each detail."""
    part = slice(run.measure_from, None)
    channel = run.setup.ambient_channel
    air = run.channel(channel)[part] if channel else np.array([])
    context: dict[str, Any] = {}  # the measurement's conditions, beside the verdict's own fields
    if channel and np.isfinite(air).any():
        context["ambient_c"] = float(np.nanmean(air))
    ended = ("steady" if run.stable else
             f"ended on a bound: the cover may still rise <= {run.remaining_rise_c:.2f} degC, in the uncertainty"
             if run.remaining_rise_c is not None else "NOT steady: the warm-up limit ended it")
    warmup = (f"measured after {run.t_s[run.measure_from - 1] if run.measure_from else 0:.0f} s of warm-up "
              f"({ended}), dialog every {run.setup.period_s:g} s")
    verdicts = []
    for entry, name, series, labels, what, raw, difference in (
            (cover_max, "cover_temp_max", run.hottest, tuple(run.setup.cover_channels), "hottest of",
             ("cover-temperature",), False),
            (cover_spread, "cover_temp_spread", run.spread, ("spread",), "hottest minus coolest of",
             ("cover-spread", "cover-temperature"), True)):
        # A figure stated at an ambient is judged at it: referred from the room the probe read.
        reference = ambient_reference(entry)
        room = measure_ambient(air, reference or AmbientReference(), channel)
        referred: AmbientCorrection | None = room if reference is not None else None
        samples = referred.refer(series[part]) if referred is not None else series[part]
        budget = thermal_budget(samples, "max", channels=run.setup.cover_channels,
                                difference=difference, calibration=run.calibration,
                                remaining_rise_c=run.remaining_rise_c, ambient=referred)
        verdict = entry.evaluate(
            samples, evidence=Evidence.MEASURED, uncertainty=budget, name=name, raw=raw,
            findings=referred.findings() if referred is not None else (),
            detail_suffix="; ".join(text for text in (
                f"{what} {', '.join(run.setup.cover_channels)} per reading, {warmup}",
                room.text() if referred is not None else
                (f"ambient {room.mean_c:.2f} degC" if room.mean_c is not None else ""), note) if text),
            plot=PlotHint("trace", labels=labels, y_label="degC", steady=run.stable), **context)
        raw_value = None if verdict.value is None or referred is None else verdict.value + referred.correction_c
        record = room.record(raw_value) if referred is not None else {**room.record(), "applied": False,
                                                                      "correction_c": 0.0}
        verdicts.append(verdict.but(extra={"ambient": record}))
    status = np.asarray(run.status[part])
    skin = run.zones.get("skin")
    counts = {int(k): int(n) for k, n in zip(*np.unique(status, return_counts=True))}
    detail = f"the phone's THERMAL_STATUS during the measurement (status: readings): {counts}"
    if skin:
        detail += f"; phone's skin sensor up to {np.nanmax(skin[part]):.1f} degC"
    if note:
        detail += f"; {note}"
    verdicts.append(compare("thermal_status_max", float(status.max()) if status.size else None, "status", None,
                            statistic="max", n=int(status.size), detail=detail, claim=7, raw=("cover-temperature",)))
    return verdicts


def cover_temperature_check(thermal: ThermalProbe, stimulus: AudioStimulus, device: Device, *,
                            cover_max: SlaEntry, cover_spread: SlaEntry, samples: int | None = None,
                            setup: ThermalSetup | None = None,
                            cover_channels: Sequence[str] | None = None,
                            clip: tuple[np.ndarray, float] | None = None, watch: Watch | None = None) -> CheckResult:
    """Claim 7 by its entries (ENTRIES: the metric ids that usually hold them); warm-up and sample
    count default to the entries'. `measurement` is the ThermalRun; `watch` looks at the chamber
    after each reading (bench/checks/chamber_hold.py)."""
    arm_stimulus(stimulus, clip=clip)
    if setup is None:
        setup = setup_for(cover_max)
    if cover_channels is not None:
        setup = replace(setup, cover_channels=tuple(cover_channels))
    count = samples if samples is not None else max(cover_max.n_required, cover_spread.n_required)
    run = run_dialog_loop(thermal, stimulus, device, count, setup, watch)
    verdicts = _thermal_verdicts(run, cover_max=cover_max, cover_spread=cover_spread)
    return CheckResult(verdicts, {"cover-temperature": run.raw(), "cover-spread": run.raw_spread()}, measurement=run)
