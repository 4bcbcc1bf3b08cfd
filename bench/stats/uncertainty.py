"""Uncertainty budgets of the instrument verdicts (GUM): one function per quantity, each naming
its components so the report can list them (docs/uncertainty.md explains every number).

Every component is a standard uncertainty in the verdict's unit. Type A comes from the samples
(the standard error of the statistic the verdict reports); type B from the instrument's
specification, the bench's calibration (a correction applied carries its record's uncertainty,
a correction not applied its whole plausible size as a rectangular distribution), the onset
detector's residual error measured against the emulated world's truth
(benchmarks/bench_onset.py), and resolution (a quantisation step q is q / sqrt(12)).
`Uncertainty.combine` adds them in quadrature and expands with k = 2 (~95 %).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from phonebench.core.verdict import Uncertainty, UncertaintyComponent
from phonebench.drivers.power import N6781A_ACCURACY, SupplyAccuracy
from .ambient import AmbientCorrection

SQRT3, SQRT12 = math.sqrt(3.0), math.sqrt(12.0)

# Onset detector residuals per trial (standard deviations of measured - true, all voice personas,
# benchmarks/bench_onset.py on the emulated station at the voice check's 10 kS/s).
STIMULUS_ONSET_SPREAD_S = 0.15e-3
ANSWER_ONSET_SPREAD_S = 0.8e-3
ANSWER_END_SPREAD_S = 2.0e-3
ANSWER_END_BIAS_S = 3.0e-3  # the end reads ~2 ms early on average: left in the budget (rectangular), not subtracted
# Plausible size of corrections when no calibration applies them (rectangular half-widths).
UNCALIBRATED_FIXTURE_DELAY_S = 1.0e-3  # calibration accepts 0.1 .. 1 ms of air
UNCALIBRATED_SKEW_S = 100e-9  # the scope's deskew range
FIXTURE_ACCEPTANCE = 0.2  # fixture-delay calibration passes within 0.8 .. 1.2 x the geometric delay
UNCALIBRATED_CURRENT_ZERO_A = 5e-3  # supply-zero acceptance limit
UNCALIBRATED_THERMOCOUPLE_C = 1.0  # type T/K thermocouple tolerance class 1 is +-0.5..1 C
# Instrument specifications (rectangular half-widths: "accuracy +-(gain x reading + offset)").
SCOPE_TIMEBASE_PPM = 25.0
THERMAL_RESOLUTION_C = 0.25  # the coarsest supported probe board (generic) reports quarter degrees
REFERENCE_THERMOMETER_C = 0.01

Components = list[UncertaintyComponent]


def standard_error(samples: ArrayLike, statistic: str) -> float:
    """Type A: the standard error of a statistic of independent samples (NaN-free, finite)."""
    x = np.asarray(samples, dtype=float).ravel()
    x = x[np.isfinite(x)]
    n = x.size
    if n < 2:
        return math.nan
    s = float(np.std(x, ddof=1))
    if statistic == "mean":
        return s / math.sqrt(n)
    if statistic == "std":
        return s / math.sqrt(2.0 * (n - 1))
    if statistic.startswith("p"):  # order-statistic spread: +-1 binomial sd around the quantile's rank
        p = float(statistic[1:]) / 100.0
        ordered = np.sort(x)
        j = max(1, round(math.sqrt(n * p * (1.0 - p))))
        k = min(n - 1, max(0, math.ceil(p * n) - 1))
        return float(ordered[min(n - 1, k + j)] - ordered[max(0, k - j)]) / 2.0
    return 0.0  # max / min / value: the samples say nothing about a single reading's error


def _calibrated(calibration: Mapping[str, Any] | None, key: str) -> tuple[float | None, str]:
    """(standard uncertainty of a correction applied by calibration, its certificate) or (None, "")."""
    if not calibration:
        return None, ""
    u = (calibration.get("uncertainties") or {}).get(key)
    applied = key in (calibration.get("corrections") or {})
    if not applied:
        return None, ""
    return (float(u) if u is not None else 0.0), ", ".join(calibration.get("certificates") or ())


def _correction(name: str, key: str, calibration: Mapping[str, Any] | None, uncalibrated: float,
                scale: float, unit_note: str) -> UncertaintyComponent:
    u, certificate = _calibrated(calibration, key)
    if u is None:
        return UncertaintyComponent(name, scale * uncalibrated / SQRT3, "B",
                                    f"not calibrated: up to {uncalibrated:g} {unit_note}, rectangular")
    return UncertaintyComponent(name, scale * u, "B", f"calibration {certificate or 'record'}: u = {u:.3g} {unit_note}")


def voice_budget(samples: ArrayLike, statistic: str, unit_scale: float, *, sample_interval_s: float,
                 dialog: bool = False, fixture_delay_s: float | None = None,
                 calibration: Mapping[str, Any] | None = None, typical_s: float = 0.0) -> Uncertainty:
    """Voice latency (answer onset - stimulus onset - fixture delay) or dialog time (answer end ...),
    in the verdict's unit (unit_scale = unit per second). `fixture_delay_s`: the delay subtracted
    (None: none was); `calibration`: the scope's corrections and their uncertainties."""
    end_spread = ANSWER_END_SPREAD_S if dialog else ANSWER_ONSET_SPREAD_S
    parts: Components = [
        UncertaintyComponent("repeatability", standard_error(samples, statistic), "A",
                             f"standard error of the {statistic} from the trials", sampling=True),
        UncertaintyComponent("sample interval", unit_scale * sample_interval_s * math.sqrt(2.0) / SQRT12, "B",
                             f"two onsets each within one {sample_interval_s * 1e6:g} us sample, rectangular"),
        UncertaintyComponent("onset detector residual",
                             unit_scale * math.hypot(STIMULUS_ONSET_SPREAD_S, end_spread), "B",
                             "spread of measured - true onsets against the emulated world's truth"),
    ]
    if dialog:
        parts.append(UncertaintyComponent("end-of-speech bias", unit_scale * ANSWER_END_BIAS_S / SQRT3, "B",
                                          "the last sound's tail below the envelope noise: reads early, rectangular"))
    recorded, certificate = _calibrated(calibration, "fixture_delay_s")
    if fixture_delay_s is None:
        parts.append(UncertaintyComponent("fixture delay", unit_scale * UNCALIBRATED_FIXTURE_DELAY_S / SQRT3, "B",
                                          f"not subtracted: up to {UNCALIBRATED_FIXTURE_DELAY_S:g} s, rectangular"))
    elif recorded is not None:
        parts.append(UncertaintyComponent("fixture delay", unit_scale * recorded, "B",
                                          f"calibration {certificate or 'record'}: u = {recorded:.3g} s"))
    else:  # subtracted, its record not at hand: the calibration accepts 0.8 .. 1.2 x the fixture's geometry
        parts.append(UncertaintyComponent("fixture delay", unit_scale * FIXTURE_ACCEPTANCE * fixture_delay_s / SQRT3,
                                          "B", f"subtracted; within +-{FIXTURE_ACCEPTANCE:.0%} of the geometric "
                                               "delay (the calibration's acceptance), rectangular"))
    parts.append(_correction("channel skew", "ch2_deskew_s", calibration, UNCALIBRATED_SKEW_S, unit_scale, "s"))
    parts.append(UncertaintyComponent("scope timebase", unit_scale * typical_s * SCOPE_TIMEBASE_PPM * 1e-6 / SQRT3,
                                      "B", f"+-{SCOPE_TIMEBASE_PPM:g} ppm of the interval, rectangular"))
    return Uncertainty.combine(_finite(parts))


def power_budget(samples: ArrayLike, statistic: str, *, power_w: float, volts: float, scale: float = 1.0,
                 calibration: Mapping[str, Any] | None = None, note: str = "W",
                 accuracy: SupplyAccuracy = N6781A_ACCURACY) -> Uncertainty:
    """Mean power (W) or energy share (scale = verdict unit per W of mean power) from V x I, with
    the accuracy the supply that measured it states."""
    amps = power_w / volts if volts > 0 else 0.0
    acc = accuracy
    u_i = (acc.current_gain * amps + acc.current_offset_a) / SQRT3
    u_v = (acc.voltage_gain * volts + acc.voltage_offset_v) / SQRT3
    parts: Components = [
        UncertaintyComponent("repeatability", standard_error(samples, statistic), "A",
                             f"standard error of the {statistic} from the {note} samples", sampling=True),
        UncertaintyComponent("analyzer current accuracy", scale * volts * u_i, "B",
                             f"+-({acc.current_gain:.2%} of reading + {acc.current_offset_a * 1e6:g} uA), {acc.source}"),
        UncertaintyComponent("analyzer voltage accuracy", scale * amps * u_v, "B",
                             f"+-({acc.voltage_gain:.2%} of reading + {acc.voltage_offset_v * 1e3:g} mV), "
                             f"{acc.source}"),
        _correction("current zero offset", "current_zero_a", calibration, UNCALIBRATED_CURRENT_ZERO_A,
                    scale * volts, "A"),
    ]
    return Uncertainty.combine(_finite(parts))


def thermal_budget(samples: ArrayLike, statistic: str, *, channels: Sequence[str], difference: bool = False,
                   calibration: Mapping[str, Any] | None = None,
                   remaining_rise_c: float | None = None, ambient: AmbientCorrection | None = None) -> Uncertainty:
    """Cover temperature (one probe's reading) or spread (difference of two probes), degC.
    `remaining_rise_c`: the warm-up ended on this bound of the cover's remaining rise (a bias in
    [0, bound], taken as rectangular over +-bound: at k=2 the expanded uncertainty exceeds it).
    `ambient`: the reading was referred to a reference ambient by this correction, whose probe,
    placement, movement and model join the budget (bench/stats/ambient.py)."""
    probes = 2 if difference else 1
    offsets = [_correction(f"{ch} offset", f"{ch}_offset_c", calibration, UNCALIBRATED_THERMOCOUPLE_C, 1.0, "degC")
               for ch in channels]
    worst = max(offsets, key=lambda c: c.standard)  # the hottest (or either) probe may be any of them
    parts: Components = [
        UncertaintyComponent("repeatability", standard_error(samples, "mean" if statistic == "max" else statistic),
                             "A", "standard error of the readings over the measurement window",
                             sampling=statistic != "max"),
        UncertaintyComponent("thermocouple offset", worst.standard * math.sqrt(probes), "B",
                             worst.note + (" (both probes)" if difference else "")),
        UncertaintyComponent("resolution", THERMAL_RESOLUTION_C * math.sqrt(probes) / SQRT12, "B",
                             f"{THERMAL_RESOLUTION_C:g} degC display step"),
    ]
    if remaining_rise_c is not None:
        parts.append(UncertaintyComponent("remaining rise", remaining_rise_c / SQRT3, "B",
                                          f"the warm-up ended with at most {remaining_rise_c:.2f} degC left to rise"))
    if ambient is not None and ambient.channel is not None:
        probe = _correction("ambient probe", f"{ambient.channel}_offset_c", calibration, UNCALIBRATED_THERMOCOUPLE_C,
                            1.0, "degC")
        parts.extend(ambient.components(probe.standard, probe.note))
    if _calibrated(calibration, f"{channels[0]}_offset_c")[0] is not None:
        parts.append(UncertaintyComponent("reference thermometer", REFERENCE_THERMOMETER_C, "B",
                                          "the reference the offsets were measured against"))
    return Uncertainty.combine(_finite(parts))


def calibration_of(instrument: object) -> dict[str, Any] | None:
    """Corrections, their standard uncertainties and certificates of a corrected driver
    (phonebench.bench.procedures.calibration.corrections), or None for a bare driver."""
    role = getattr(instrument, "calibration", None)
    if role is None or not hasattr(role, "procedures"):
        return None
    uncertainties: dict[str, float] = {}
    for state in role.procedures:
        record = state.record
        if record is None or not record.passed:
            continue
        for key in record.adjustments:
            reading = record.reading(key) or record.reading(key.replace("ch2_deskew_s", "skew_as_left_s"))
            if reading is not None and reading.uncertainty is not None:
                uncertainties[key] = float(reading.uncertainty)
    return {"corrections": dict(role.corrections), "uncertainties": uncertainties,
            "certificates": [s.record.certificate for s in role.procedures if s.record is not None]}


def _finite(parts: Components) -> Components:
    return [c for c in parts if math.isfinite(c.standard)]
