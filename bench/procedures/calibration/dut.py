"""DUT calibration: per unit, what the product needs tuned, measured at the line and written to
the phone through the runtime contract (`llmrt config set`) and to the store.

- dut-ripple-onset: with redundancy forced off, a ripple sweep on the battery emulator finds the
  amplitude at which the NPU's MACs start to err (probe batches with a known exact result: any
  other answer is a MAC error). The redundancy trigger is set below the last clean amplitude by
  a margin, the release below it by the hysteresis; the mode goes back to auto.
- dut-skin-offset: the phone's skin sensor against the (corrected) back-cover probes at the
  sensor's position, written as `thermal.skin_offset_c` (added to the sensor's reading).

A record outside its acceptance criteria is stored as failed and nothing is written to the
phone (the runtime's redundancy mode is still restored to auto).
"""
from __future__ import annotations

import logging
import math
from typing import Any, Callable

import numpy as np

from .procedures import Context, _stats
from .records import CalibrationRecord, Criterion, Equipment, Reading
from ...phone.device_state import read_thermal_zones
from phonebench.core.errors import BenchError
from phonebench.drivers.device import Device
from phonebench.drivers.power import PowerAnalyzer
from phonebench.drivers.thermal import ThermalProbe
from ...phone.identity import DutIdentity
from phonebench.drivers.runtime import Probe, RuntimeClient

log = logging.getLogger(__name__)

VERSIONS = {"dut-ripple-onset": "1.0", "dut-skin-offset": "1.0"}
RIPPLE_HZ = 217.0  # GSM-frame ripple, the usual battery-emulator test tone
SUPPLY_V = 3.85
SUPPLY_R_OHM = 0.08
# Probe batch: every product is 0 (a = 0), so the exact answer is 0 on any accumulator width and
# any other result is a MAC error. 16 x 2^30 MACs per batch: at the onset's rate (~1e-9 per MAC)
# about 17 errors are expected, so the first erring amplitude is not missed.
PROBE_LENGTH = 1 << 30
PROBES_PER_BATCH = 16
SKIN_READINGS = 8


def unit_equipment(identity: DutIdentity, location: str = "") -> Equipment:
    """A DUT as calibration equipment, from phonebench.bench.phone.identity.DutIdentity."""
    return Equipment.dut(identity.serial, identity.soc_manufacturer, identity.product_model,
                         identity.build_fingerprint or None, location or None)


def _conclude(ctx: Context, equipment: Equipment, procedure: str, results: list[Reading],
              adjustments: dict[str, float], acceptance: list[Criterion], reference: dict[str, Any],
              problems: list[str] | None = None) -> CalibrationRecord:
    from .records import conclude

    return conclude(equipment, procedure, VERSIONS[procedure], results, adjustments, acceptance,
                    ctx.settings.interval("dut"), ambient=ctx.ambient, reference=reference,
                    operator=ctx.operator or ctx.settings.operator_name(), station=ctx.station, run_id=ctx.run_id,
                    extra_problems=problems)


def mac_error_batch() -> list[Probe]:
    return [Probe(f"zero-{i}", f"0x{PROBE_LENGTH}", f"1x{PROBE_LENGTH}") for i in range(PROBES_PER_BATCH)]


def count_mac_errors(runtime: RuntimeClient) -> int:
    return sum(1 for r in runtime.probe(mac_error_batch()) if r.result != 0)


def bracket_onset(amplitudes: list[float], errors_at: Callable[[float], int]) -> list[tuple[float, int]]:
    """The grid's first erring amplitude and the clean one below it, by bisection: each point a full
    probe batch, as in a step-by-step sweep, in ~log2(n) steps instead of up to n (the line's takt:
    6 batches over 14-46 mV where the sweep took 10-14). MAC errors grow with ripple past the
    unit's timing margin and are absent below it, so a clean point implies clean below it; the
    amplitudes measured are returned in order."""
    lo, hi = -1, len(amplitudes)  # amplitudes[lo] clean (or below the grid), amplitudes[hi] erring (or above)
    measured: dict[int, int] = {}
    while hi - lo > 1:
        mid = (lo + hi) // 2
        measured[mid] = errors_at(amplitudes[mid])
        lo, hi = (lo, mid) if measured[mid] else (mid, hi)
    return [(float(amplitudes[i]), measured[i]) for i in sorted(measured)]


def ripple_onset(device: Device, supply: PowerAnalyzer, equipment: Equipment, ctx: Context) -> CalibrationRecord:
    """dut-ripple-onset: sweep ripple with redundancy off; set trigger and release with margin."""
    settings, limits = ctx.settings, ctx.settings.limits
    runtime = RuntimeClient(device)
    start, stop, step = settings.ripple_sweep_mv
    amplitudes = list(np.round(np.arange(start, stop + step / 2, step), 3))
    supply.battery_emulation(True)
    supply.set_voltage(SUPPLY_V)
    supply.set_output_resistance(SUPPLY_R_OHM)
    supply.output(True)
    runtime.config_set("redundancy.mode", "off")

    def errors_at(amplitude: float) -> int:
        supply.set_ripple(amplitude / 1000.0, RIPPLE_HZ, SUPPLY_V)
        supply.start_ripple()
        return count_mac_errors(runtime)

    try:
        sweep = bracket_onset(amplitudes, errors_at)
    finally:
        supply.stop_ripple()
        runtime.config_set("redundancy.mode", "auto")
    erring = [a for a, e in sweep if e]
    clean = [a for a, e in sweep if not e]
    first_error = erring[0] if erring else math.nan
    last_clean = max(clean) if clean else math.nan
    onset = 0.5 * (first_error + last_clean) if erring and clean else first_error
    trigger = last_clean - settings.trigger_margin_mv
    release = trigger - settings.hysteresis_mv
    results = [Reading("ripple_onset_mv", onset, "mV", step / math.sqrt(12) if erring and clean else None,
                       detail=f"MAC errors first at {first_error:g} mV, none at {last_clean:g} mV (redundancy off)"),
               Reading("last_clean_mv", last_clean, "mV"), Reading("first_error_mv", first_error, "mV"),
               Reading("redundancy_trigger_mv", trigger, "mV",
                       detail=f"last clean - {settings.trigger_margin_mv:g} mV"),
               Reading("redundancy_release_mv", release, "mV", detail=f"trigger - {settings.hysteresis_mv:g} mV")]
    problems = [] if erring else [f"no MAC errors up to {stop:g} mV: the onset is not in the swept range"]
    low, high = limits.ripple_onset_mv
    acceptance = [Criterion("ripple_onset_mv", "mV", low=low, high=high),
                  Criterion("redundancy_trigger_mv", "mV", low=limits.min_trigger_mv)]
    reference = {"method": f"ripple bisection over {start:g}-{stop:g} mV step {step:g} at {RIPPLE_HZ:g} Hz, redundancy off, "
                           f"{PROBES_PER_BATCH} x 2^30-MAC zero probes per amplitude",
                 "supply": {"manufacturer": supply.identity.manufacturer, "model": supply.identity.model,
                            "serial": supply.identity.serial},
                 "sweep": [{"ripple_mv": a, "mac_errors": e} for a, e in sweep]}
    record = _conclude(ctx, equipment, "dut-ripple-onset", results,
                       {"redundancy.trigger_mv": trigger, "redundancy.release_mv": release}, acceptance,
                       reference, problems)
    if record.passed:
        # Release first: the runtime keeps release <= trigger in effect either way.
        runtime.config_set("redundancy.release_mv", round(release, 2))
        runtime.config_set("redundancy.trigger_mv", round(trigger, 2))
    return record


def skin_offset(device: Device, probe: ThermalProbe, equipment: Equipment, ctx: Context) -> CalibrationRecord:
    """dut-skin-offset: probes at the skin sensor's position minus the sensor; written if it passes."""
    weights = ctx.settings.skin_reference
    diffs, sensor = [], []
    for _ in range(SKIN_READINGS):
        zones = {z.type: z.celsius for z in read_thermal_zones(device)}
        if "skin" not in zones:
            raise BenchError(f"{device.name}: no skin thermal zone (zones: {', '.join(sorted(zones)) or 'none'})",
                             hint="the phone must expose its skin sensor as a thermal zone named 'skin'")
        reading = probe.read()
        at_sensor = sum(w * reading[ch] for ch, w in weights.items()) / sum(weights.values())
        diffs.append(at_sensor - zones["skin"])
        sensor.append(zones["skin"])
    offset, spread = _stats("skin_offset_c", diffs, "degC", "probes at the sensor's position minus the skin zone")
    results = [offset, spread, Reading("skin_sensor_c", float(np.mean(sensor)), "degC", n=len(sensor))]
    acceptance = [Criterion("skin_offset_c", "degC", max_abs=ctx.settings.limits.max_skin_offset_c)]
    corrections = getattr(probe, "corrections", {})
    reference = {"method": "back-cover probes weighted to the skin sensor's position: "
                           + ", ".join(f"{ch} x {w:g}" for ch, w in weights.items()),
                 "probe": {"manufacturer": probe.identity.manufacturer, "model": probe.identity.model,
                           "serial": probe.identity.serial},
                 "probe_corrections": dict(corrections)}
    record = _conclude(ctx, equipment, "dut-skin-offset", results, {"thermal.skin_offset_c": offset.value or 0.0},
                       acceptance, reference)
    if record.passed:
        RuntimeClient(device).config_set("thermal.skin_offset_c", round(offset.value or 0.0, 3))
    return record

