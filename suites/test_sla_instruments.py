"""The SLA suite, instrument side: claims 1, 2, 6 and 7 measured with the scope, the audio
stimulus, the power analyzer and the thermal probes (bench/checks/{voice,power,thermal}.py).

Limits, confidence and sample counts come from the station's SLA profile; every verdict keeps
its raw series next to results.json (the first raw file of each verdict holds what its plot
needs). The fixture's acoustic delay comes from the station's calibration when it has one; the
latency verdicts say whether it was applied. `acceptance` marks the short sanity versions a
production line can afford on every unit.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from bench.checks import power as power_check
from bench.checks import thermal as thermal_check
from bench.checks import voice as voice_check
from bench.sla import SlaProfile, load_profile
from bench.core.verdict import Verdict

SANITY_TRIALS = 20
SANITY_TOKENS = 64


@pytest.fixture(scope="session")
def profile(request: pytest.FixtureRequest, station: Any) -> SlaProfile:
    """The plugin's `sla` fixture when it has one (it honours --sla-profile), else the station's."""
    try:
        return request.getfixturevalue("sla")
    except pytest.FixtureLookupError:
        return load_profile(station.sla_profile)


@pytest.fixture
def fixture_delay(request: pytest.FixtureRequest) -> float | None:
    """The fixture's acoustic delay from the station's calibration (None: not calibrated)."""
    try:
        calibration = request.getfixturevalue("calibration")
    except pytest.FixtureLookupError:
        return None
    return getattr(calibration, "fixture_delay_s", None)


def _keep(record: Any, verdict: Verdict, *raw: tuple[str, dict[str, np.ndarray]]) -> Verdict:
    verdict.raw = [record.raw(name, data) for name, data in raw]
    return record(verdict)


def _samples(trials: voice_check.VoiceTrials, verdict: Verdict) -> np.ndarray:
    """The valid samples behind a voice verdict, in its unit (what its `samples` plot shows)."""
    seconds = trials.dialog_s if verdict.name.startswith("dialog") else trials.latency_s
    return seconds[~np.isnan(seconds)] * voice_check.UNIT_SCALE[verdict.unit]


def _voice(scope: Any, stimulus: Any, dut: Any, profile: SlaProfile, fixture_delay: float | None,
           trials: int | None) -> voice_check.VoiceResult:
    return voice_check.check_voice(scope, stimulus, dut, profile, trials=trials,
                                   fixture_delay_s=fixture_delay or 0.0,
                                   fixture_calibrated=fixture_delay is not None)


@pytest.mark.regression
@pytest.mark.needs("scope", "stimulus")
def test_voice_latency_and_dialog_time(dut, scope, stimulus, profile, fixture_delay, record):
    """Claims 1 and 2: p99 and std of the end-to-end latency, p99 of the full dialog."""
    result = _voice(scope, stimulus, dut, profile, fixture_delay, None)
    trials = ("voice-trials", result.trials.raw())
    waveforms = ("voice-waveforms", result.trials.raw_waveforms())
    for verdict in result.verdicts:
        _keep(record, verdict, (verdict.name, {"samples": _samples(result.trials, verdict)}), trials, waveforms)


@pytest.mark.regression
@pytest.mark.needs("supply")
def test_sustained_and_peak_power(dut, supply, profile, record):
    """Claim 6: sustained inference power (run means of long generates) and the peak."""
    power_check.battery_emulation(supply)
    verdicts, runs = power_check.check_sustained_power(supply, dut, profile)
    raw = runs.raw()
    for verdict in verdicts:
        _keep(record, verdict, ("power-runs", raw))


@pytest.mark.regression
@pytest.mark.needs("supply", "stimulus")
def test_energy_per_dialog(dut, supply, stimulus, profile, record):
    """Claim 6: energy of each spoken dialog until the phone is idle again, as battery share."""
    power_check.battery_emulation(supply)
    verdicts, energy = power_check.check_dialog_energy(supply, stimulus, profile)
    for verdict in verdicts:
        _keep(record, verdict, ("dialog-energy", energy.raw()))


@pytest.mark.regression
@pytest.mark.needs("thermal", "stimulus")
def test_cover_temperature_in_sustained_use(dut, thermal, stimulus, profile, record):
    """Claim 7: hottest back-cover probe and the spread between hotspots after warm-up in a
    sustained dialog loop; the phone's own thermal status and zones over the same time."""
    verdicts, run = thermal_check.check_cover_temperature(thermal, stimulus, dut, profile)
    series = ("cover-temperature", run.raw())
    for verdict in verdicts:
        if verdict.name == "cover_temp_spread":
            _keep(record, verdict, ("cover-spread", run.raw_spread()), series)
        else:
            _keep(record, verdict, series)


@pytest.mark.acceptance
@pytest.mark.needs("scope", "stimulus", "supply")
def test_voice_and_power_sanity(dut, scope, stimulus, supply, profile, fixture_delay, record):
    """Short line check: a few dialogs, each answered within the latency and dialog limits
    (every trial, no statistics over a handful), and one generate within the sustained power."""
    power_check.battery_emulation(supply)
    result = _voice(scope, stimulus, dut, profile, fixture_delay, SANITY_TRIALS)
    trials = ("voice-trials", result.trials.raw())
    for verdict in voice_check.sanity_verdicts(result.trials, profile):
        _keep(record, verdict, (verdict.name, {"samples": _samples(result.trials, verdict)}), trials)
    runs = power_check.measure_sustained_power(supply, dut, 1, tokens=SANITY_TOKENS)
    _keep(record, power_check.sanity_verdict(runs, profile.get(power_check.SUSTAINED)), ("power-run", runs.raw()))
