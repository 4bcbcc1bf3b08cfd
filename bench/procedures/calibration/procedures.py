"""Instrument and fixture calibration procedures. Each measures, concludes a record against its
acceptance criteria (phonebench.bench.procedures.calibration.records.conclude) and returns it; the caller stores it.
Procedures measure with bare drivers (no corrections) and leave adjustments un-applied unless
the record passed.

- scope-deskew (scope): a fast edge from the stimulus into BOTH scope inputs (electrical
  loopback, a BNC tee): channel 2's lag behind channel 1 at 50 % of the step, as found; the
  deskew is programmed and the residual measured, as left.
- fixture-delay (fixture): the empty fixture's acoustic loopback (stimulus speaker -> the
  measurement mic over the fixture's path), deskewed scope, a chirp on both channels: the delay
  is the cross-correlation peak; it is what the voice-latency check subtracts.
- supply-zero (supply): the current meter's reading with the output off (no load), averaged.
- thermocouple-offsets (thermal): each thermocouple against the reference probe taped beside
  it, averaged over simultaneous readings.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from scipy import signal

from .corrections import CURRENT_ZERO_KEY, DESKEW_KEY, FIXTURE_DELAY_KEY, OFFSET_KEY
from .fixture import FixtureControl
from phonebench.drivers.power import PowerAnalyzer
from phonebench.drivers.scope import Oscilloscope, Waveform
from phonebench.drivers.stimulus import AudioStimulus
from phonebench.drivers.thermal import ThermalProbe
from phonebench.drivers.visa import InstrumentIdentity
from .records import CalibrationRecord, Criterion, Equipment, Reading, check_ambient, conclude
from .settings import CalibrationSettings
from phonebench.core.errors import BenchError, InstrumentError, InvalidMeasurement

log = logging.getLogger(__name__)

VERSIONS = {"scope-deskew": "1.0", "fixture-delay": "1.0", "supply-zero": "1.0", "thermocouple-offsets": "1.0"}
STEP_RATE = 100e6  # the deskew edge: arb samples at 100 MSa/s, a 10 ns rise
STEP_CLIP = np.r_[np.zeros(40), np.ones(400)]
CHIRP_RATE = 48_000.0
CHIRP_S = 0.010
SKEW_CHANNEL = 2  # the measurement mic's channel; channel 1 is the stimulus reference
MAX_RESIDUAL_SKEW_S = 2e-9


def speed_of_sound_m_s(air_c: float) -> float:
    return 331.3 + 0.606 * air_c


class Identified(Protocol):
    """Any instrument's driver, as a calibration record names it: who answered."""

    identity: InstrumentIdentity


@dataclass
class Context:
    """Who, where and under which conditions a calibration is done."""

    station: str
    settings: CalibrationSettings
    location: str = ""
    operator: str = ""
    ambient: dict[str, Any] = field(default_factory=dict)
    run_id: str | None = None

    def equipment(self, role: str, driver: Identified) -> Equipment:
        return Equipment.instrument(driver.identity, role, self.settings.asset_tag(role), self.location or None)

    def fixture(self) -> Equipment:
        return Equipment.fixture(self.station, self.settings.asset_tag("fixture"), self.location or None)

    def conclude(self, equipment: Equipment, procedure: str, results: list[Reading], adjustments: dict[str, float],
                 acceptance: list[Criterion], reference: dict[str, Any] | None = None,
                 problems: list[str] | None = None) -> CalibrationRecord:
        return conclude(equipment, procedure, VERSIONS.get(procedure, "1.0"), results, adjustments, acceptance,
                        self.settings.interval(procedure), ambient=self.ambient, reference=reference,
                        operator=self.operator or self.settings.operator_name(), station=self.station,
                        run_id=self.run_id, extra_problems=problems)


def _stats(name: str, values: list[float], unit: str, detail: str = "") -> tuple[Reading, Reading]:
    """(mean with its standard uncertainty, spread) of repeated readings."""
    arr = np.asarray(values, dtype=float)
    mean = float(arr.mean()) if arr.size else math.nan
    std = float(arr.std(ddof=1)) if arr.size > 1 else math.nan
    u = std / math.sqrt(arr.size) if arr.size > 1 else None
    return (Reading(name, mean, unit, u, int(arr.size), detail),
            Reading(f"{name}_spread", std, unit, None, int(arr.size), "standard deviation of the repeats"))


def identity_dict(driver: Identified) -> dict[str, Any]:
    ident = driver.identity
    return {"manufacturer": ident.manufacturer, "model": ident.model, "serial": ident.serial,
            "firmware": ident.firmware, "address": ident.address}


# --- scope deskew and fixture delay ---------------------------------------------------------
def _arm_quiet(scope: Oscilloscope, tries: int = 5) -> None:
    """Arm, and check nothing (the previous shot still ringing) triggers it before the stimulus fires."""
    for _ in range(tries):
        scope.single()
        try:
            scope.wait_triggered(timeout_s=0.0)
        except InstrumentError:
            return  # armed and still waiting: the fixture is quiet
    raise InstrumentError(f"{scope.name}: triggers {tries} times without a stimulus",
                          hint="the fixture is not quiet: check for noise or hum above the trigger level on channel 1")


def _acquire(scope: Oscilloscope, stimulus: AudioStimulus, scale_s: float, center_s: float, points: int,
             ch2_v_div: float) -> tuple[Any, Any]:
    reference, skewed = scope.channel(1), scope.channel(SKEW_CHANNEL)
    scope.configure_channel(reference, 0.2)
    scope.configure_channel(skewed, ch2_v_div)
    scope.set_timebase(scale_s, center_s)
    scope.set_edge_trigger(reference, 0.1)
    _arm_quiet(scope)
    stimulus.fire()
    scope.wait_triggered(timeout_s=10)
    return scope.read_waveform(reference, points=points), scope.read_waveform(skewed, points=points)


def crossing_time(t: np.ndarray, v: np.ndarray, level: float) -> float:
    """First rising crossing of `level`, linearly interpolated between samples."""
    above = np.flatnonzero((v[1:] >= level) & (v[:-1] < level))
    if above.size == 0:
        raise InvalidMeasurement(f"the edge never crosses {level:.3g} V",
                                 hint="check the electrical loopback (BNC tee into both scope inputs)")
    i = int(above[0])
    frac = (level - v[i]) / (v[i + 1] - v[i])
    return float(t[i] + frac * (t[i + 1] - t[i]))


def _edge_delays(scope: Oscilloscope, stimulus: AudioStimulus, trials: int) -> list[float]:
    stimulus.load_clip(STEP_CLIP, STEP_RATE, amplitude_vpp=1.0)
    stimulus.arm()
    delays = []
    for _ in range(trials):
        ch1, ch2 = _acquire(scope, stimulus, 20e-9, 0.0, 20_000, ch2_v_div=0.2)
        v1, v2 = ch1.require_valid().volts.astype(float), ch2.require_valid().volts.astype(float)
        level1, level2 = 0.5 * (v1.min() + v1.max()), 0.5 * (v2.min() + v2.max())
        delays.append(crossing_time(ch2.t, v2, level2) - crossing_time(ch1.t, v1, level1))
    return delays


def deskew_scope(scope: Oscilloscope, stimulus: AudioStimulus, fixture: FixtureControl, ctx: Context) -> CalibrationRecord:
    """scope-deskew: channel 2's skew on the electrical loopback; programmed only if it passes."""
    limits = ctx.settings.limits
    trials = max(3, ctx.settings.loopback_trials // 2)
    key = DESKEW_KEY.format(SKEW_CHANNEL)
    skewed = scope.channel(SKEW_CHANNEL)
    fixture.loopback("electrical")
    try:
        scope.set_deskew(skewed, 0.0)
        found, found_spread = _stats("skew_as_found_s", _edge_delays(scope, stimulus, trials), "s",
                                     "channel 2 minus channel 1 at 50 % of a 10 ns edge, deskew 0")
        scopes_own = scope.measure_delay(scope.channel(1), skewed)
        deskew = found.value if found.value is not None and math.isfinite(found.value) else 0.0
        problems: list[str] = []
        results = [found, found_spread,
                   Reading("scope_measure_delay_s", scopes_own, "s", detail=":MEASure:DELay? cross-check")]
        if abs(deskew) <= limits.max_skew_s:
            scope.set_deskew(skewed, deskew)
            left, _ = _stats("skew_as_left_s", _edge_delays(scope, stimulus, trials), "s",
                             "after programming the deskew")
            results.append(left)
        else:
            problems.append(f"skew {deskew:.3g} s is beyond the scope's deskew range ±{limits.max_skew_s:g} s")
        acceptance = [Criterion("skew_as_found_s", "s", max_abs=limits.max_skew_s),
                      Criterion("skew_as_found_s_spread", "s", high=MAX_RESIDUAL_SKEW_S),
                      Criterion("skew_as_left_s", "s", max_abs=MAX_RESIDUAL_SKEW_S)]
        record = ctx.conclude(ctx.equipment("scope", scope), "scope-deskew", results, {key: deskew}, acceptance,
                              reference={"method": "electrical loopback, 10 ns edge into both inputs",
                                         "stimulus": identity_dict(stimulus)}, problems=problems)
        if not record.passed:
            scope.set_deskew(skewed, 0.0)  # a failed calibration is not applied
        return record
    finally:
        fixture.loopback(None)


def _chirp() -> np.ndarray:
    t = np.arange(int(CHIRP_S * CHIRP_RATE)) / CHIRP_RATE
    return signal.chirp(t, 500.0, CHIRP_S, 6000.0) * signal.windows.tukey(t.size, 0.1)


def correlation_delay(ch1: Waveform, ch2: Waveform) -> float:
    """Delay of channel 2 behind channel 1: cross-correlation peak, parabolic sub-sample fit."""
    a = ch1.require_valid().volts.astype(float)
    b = ch2.require_valid().volts.astype(float)
    a, b = a - a.mean(), b - b.mean()
    xcorr = signal.correlate(b, a, mode="full", method="fft")
    lags = signal.correlation_lags(b.size, a.size, mode="full")
    i = int(np.argmax(xcorr))
    shift = 0.0
    if 0 < i < xcorr.size - 1:
        y0, y1, y2 = xcorr[i - 1], xcorr[i], xcorr[i + 1]
        denom = y0 - 2 * y1 + y2
        shift = 0.5 * (y0 - y2) / denom if denom else 0.0
    return float((lags[i] + shift) * ch1.sample_interval_s)


def measure_fixture_delay(scope: Oscilloscope, stimulus: AudioStimulus, fixture: FixtureControl, ctx: Context,
                          deskew: CalibrationRecord | None = None) -> CalibrationRecord:
    """fixture-delay: the empty fixture's acoustic loopback with the scope deskewed (if it passed)."""
    limits = ctx.settings.limits
    fixture.loopback("acoustic")
    try:
        stimulus.load_clip(_chirp(), CHIRP_RATE, amplitude_vpp=1.0)
        stimulus.arm()
        delays = []
        for _ in range(ctx.settings.loopback_trials):
            ch1, ch2 = _acquire(scope, stimulus, 2e-3, 6e-3, 100_000, ch2_v_div=0.1)
            delays.append(correlation_delay(ch1, ch2))
    finally:
        fixture.loopback(None)
    delay, spread = _stats("fixture_delay_s", delays, "s", "acoustic loopback, cross-correlation of a chirp")
    measured_air = ctx.ambient.get("temperature_c")
    air_c = 20.0 if measured_air is None else float(measured_air)
    geometric = ctx.settings.fixture_path_m / speed_of_sound_m_s(air_c)
    ratio = delay.value / geometric if delay.value is not None else math.nan
    results = [delay, spread,
               Reading("geometric_delay_s", geometric, "s",
                       detail=f"{ctx.settings.fixture_path_m:g} m of air at {air_c:.1f} C"),
               Reading("delay_over_geometry", ratio, "1", detail="measured / documented path")]
    low, high = limits.fixture_delay_s
    acceptance = [Criterion("fixture_delay_s", "s", low=low, high=high),
                  Criterion("fixture_delay_s_spread", "s", high=limits.max_delay_spread_s),
                  Criterion("delay_over_geometry", "1", low=0.8, high=1.2)]
    reference = {"method": "acoustic loopback of the empty fixture, chirp 0.5-6 kHz",
                 "scope": identity_dict(scope), "stimulus": identity_dict(stimulus),
                 "scope_deskew": deskew.summary() if deskew is not None else None}
    return ctx.conclude(ctx.fixture(), "fixture-delay", results, {FIXTURE_DELAY_KEY: delay.value or 0.0},
                        acceptance, reference=reference)


# --- power analyzer zero --------------------------------------------------------------------
def supply_zero(supply: PowerAnalyzer, ctx: Context) -> CalibrationRecord:
    """supply-zero: the current reading with the output off (no load) is the meter's zero error."""
    supply.output(False)
    readings = [supply.measure_current() for _ in range(ctx.settings.zero_readings)]
    zero, spread = _stats("current_zero_a", readings, "A", "MEAS:CURR? with the output off")
    acceptance = [Criterion("current_zero_a", "A", max_abs=ctx.settings.limits.max_current_zero_a),
                  Criterion("current_zero_a_spread", "A", high=ctx.settings.limits.max_current_zero_a / 5)]
    return ctx.conclude(ctx.equipment("supply", supply), "supply-zero", [zero, spread],
                        {CURRENT_ZERO_KEY: zero.value or 0.0}, acceptance,
                        reference={"method": "null measurement, output off"})


# --- thermocouple offsets -------------------------------------------------------------------
def thermocouple_offsets(probe: ThermalProbe, fixture: FixtureControl, ctx: Context,
                         reference: ThermalProbe | None = None) -> CalibrationRecord:
    """thermocouple-offsets: each channel minus the reference probe beside it.

    The reference is the probe board's own reference input (settings.reference.channel, moved
    beside each thermocouple in turn: settings.reference.points), or a separate reference
    thermometer whose channel sits beside each thermocouple (settings.reference.channels).
    """
    ref = ctx.settings.reference
    n = ctx.settings.thermal_readings
    results: list[Reading] = []
    adjustments: dict[str, float] = {}
    acceptance: list[Criterion] = []
    channels = [c for c in probe.channels if c != ref.channel and (c in ref.points or c in ref.channels)]
    if not channels:
        raise BenchError(f"{probe.name}: no thermocouple channel has a reference position",
                         hint="set [calibration.reference] points (or channels) in the calibration settings")
    for channel in channels:
        diffs = []
        if reference is not None and channel in ref.channels:
            for _ in range(n):
                diffs.append(probe.read()[channel] - reference.read()[ref.channels[channel]])
            where = f"reference thermometer channel {ref.channels[channel]}"
        else:
            fixture.place_reference(ref.points[channel])
            for _ in range(n):
                reading = probe.read()
                diffs.append(reading[channel] - reading[ref.channel])
            where = f"reference input {ref.channel} beside {ref.points[channel]}"
        offset, spread = _stats(f"{channel}_offset_c", diffs, "degC", f"{channel} minus {where}")
        results += [offset, spread]
        adjustments[OFFSET_KEY.format(channel)] = offset.value or 0.0
        acceptance += [Criterion(offset.name, "degC", max_abs=ctx.settings.limits.max_thermocouple_offset_c),
                       Criterion(spread.name, "degC", high=ctx.settings.limits.max_offset_spread_c)]
    reference_info = {"method": "comparison with a reference probe at the same point",
                      "reference": identity_dict(reference) if reference is not None
                      else {**identity_dict(probe), "input": ref.channel},
                      "certificate": ref.certificate or None, "due": ref.due or None}
    return ctx.conclude(ctx.equipment("thermal", probe), "thermocouple-offsets", results, adjustments, acceptance,
                        reference=reference_info)


def ambient_conditions(probe: ThermalProbe | None, settings: CalibrationSettings) -> dict[str, Any]:
    """Air temperature from the probe board (its ambient channel, else its cold junction), and
    the lab's humidity if the settings carry it.

    An unreachable probe leaves the temperature "not measured"; an invalid reading (overload,
    open thermocouple, a value that is not lab air) is an InvalidMeasurement: a calibration
    record never carries a number that is not a temperature.
    """
    out: dict[str, Any] = {"temperature_c": None, "source": "not measured", "humidity_pct": settings.humidity_pct}
    if probe is None:
        return out
    try:
        reading = probe.read()
    except InstrumentError as exc:
        log.warning("ambient temperature not measured: %s", exc)
        return out
    channel = settings.ambient_channel
    if channel in reading.faults:
        raise InvalidMeasurement(f"{probe.name}: ambient channel {channel} reading is invalid "
                                 f"({reading.faults[channel]})",
                                 hint="check the ambient thermocouple (open, unplugged) or set ambient_channel "
                                      "to the probe that hangs in free air")
    if channel in reading.celsius:
        out.update(temperature_c=round(reading.celsius[channel], 2), source=f"{probe.name} {channel}")
    elif reading.cold_junction_c is not None:
        out.update(temperature_c=round(reading.cold_junction_c, 2), source=f"{probe.name} cold junction")
    check_ambient(out)
    return out
