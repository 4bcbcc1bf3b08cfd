"""Instrument sanity and the bench's basic closed loop, on whatever station is configured.

An utterance fired from the audio source reaches scope channel 1 and the phone, whose spoken
answer appears on channel 2; the power analyzer digitizes the same dialog; the probes on the
back cover warm under load and cool at idle. The same code runs on the emulated station and on
real instruments. The stimulus clip (suites/data/utterance.wav) is a 0.3 s synthetic voiced
utterance (phonebench.emulation.audio.synth_speech, seed 2024); a lab may replace it with a recording.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from phonebench.bench.checks.power import battery_emulation
from phonebench.bench.checks.targets import target
from phonebench.bench.stats.onset import measure_latency
from phonebench.drivers.stimulus import read_wav

pytestmark = [pytest.mark.regression, pytest.mark.evidence("measured")]

CLIP = Path(__file__).parent / "data" / "utterance.wav"
SUPPLY_V = 3.85  # nominal Li-ion voltage the battery emulator holds
SUPPLY_R_OHM = 0.08  # emulated cell's internal resistance
DIGITIZER_INTERVAL_S = 10.24e-6  # 97.7 kS/s with current and voltage
LOAD_RUNS = 3  # generate calls of ~10 s of decode each
# The rest lasts until the probe shows the fall its target asks (bench/checks/targets.toml) and a
# quarter degree more (one probe's reading noise is ~0.05 °C), read every 30 s, at most 900 s: no
# lab time spent waiting once the answer is in (docs/labtime.md).
REST_MARGIN_C = 0.25
REST_POLL_S = 30
REST_MAX_S = 900


def _power_up(supply) -> None:
    battery_emulation(supply, SUPPLY_V, SUPPLY_R_OHM, current_limit_a=3.0)  # a series R where it has one


@pytest.mark.parametrize("role", [pytest.param(r, marks=pytest.mark.needs(r))
                                  for r in ("scope", "supply", "thermal", "stimulus")])
def test_instrument_identifies_itself(request, role, record):
    identity = request.getfixturevalue(role).identity
    record.raw(f"{role}-identity", identity.as_dict())
    assert identity.manufacturer and identity.model, f"{role} gave no usable identity: {identity}"


@pytest.mark.needs("scope", "stimulus", "supply")
def test_dialog_on_both_scope_channels_and_its_power_trace(dut, scope, stimulus, supply, sla, record):
    _power_up(supply)
    samples, rate = read_wav(CLIP)
    stimulus.load_clip(samples, rate, amplitude_vpp=1.0)
    stimulus.arm()
    scope.configure_channel(scope.channel(1), 0.2)
    scope.configure_channel(scope.channel(2), 0.1)
    scope.set_timebase(0.4, 1.6)  # -0.4 s .. 3.6 s around the utterance onset (10 divisions)
    scope.set_edge_trigger(scope.channel(1), 0.05)
    scope.single()
    interval = supply.digitizer_interval(DIGITIZER_INTERVAL_S)  # 4.1 s around the stimulus, 0.2 s before it
    supply.arm_digitizer(int(round(4.096 / interval)), interval, pretrigger_points=int(round(0.2048 / interval)))
    supply.trigger()  # waits for the pre-trigger points; then t = 0 is the stimulus on both instruments

    stimulus.fire()
    scope.wait_triggered(timeout_s=30)
    ch1 = scope.read_waveform(scope.channel(1), points=200_000)
    ch2 = scope.read_waveform(scope.channel(2), points=200_000)
    trace = supply.fetch()
    record.raw("scope", {"t": ch1.t, "ch1": ch1.volts, "ch2": ch2.volts})
    record.raw("power", {"t": trace.t, "current_a": trace.current_a, "voltage_v": trace.voltage_v})

    latency = measure_latency(ch1.volts, ch2.volts, 1.0 / ch1.sample_interval_s, t0=float(ch1.t[0]))
    assert latency.valid, f"no answer found on channel 2: {latency.reason}"
    record.judge(sla, "dialog_answer_latency_one_trial", latency.latency_s)
    assert latency.latency_s > 0

    power = trace.require_valid().power_w()
    record.judge(sla, "dialog_digitizer_rate", trace.sample_rate_hz)
    record.check("dialog_energy", trace.energy_j(), "J", None, statistic="sum")
    before, during = power[trace.t < 0].mean(), power[(trace.t > 0) & (trace.t < 3.0)].mean()
    record.judge(sla, "dialog_power_rise", during / before, detail=f"{before:.2f} W -> {during:.2f} W")


@pytest.mark.needs("thermal")
def test_probes_warm_under_load_and_cool_at_idle(dut, thermal, sla, record):
    rest_fall_c = target(sla, "thermal_fall_at_idle").limit + REST_MARGIN_C
    before = thermal.read()
    for _ in range(LOAD_RUNS):
        dut.run(["llmrt", "generate", "--prompt-tokens", "16", "--max-tokens", "224"], timeout_s=600)
    loaded = thermal.read()
    channels = [c for c in before.channels if c in before.celsius and c in loaded.celsius]
    assert channels, f"every probe channel reported a fault: {loaded.faults}"
    rise = {c: loaded[c] - before[c] for c in channels}
    hottest = max(rise, key=rise.get)
    rested, rest_s, fallen = loaded, 0, []
    while rest_s < REST_MAX_S:
        dut.run(["sleep", str(REST_POLL_S)], timeout_s=REST_POLL_S + 60)
        rest_s += REST_POLL_S
        rested = thermal.read()
        fallen.append(loaded[hottest] - rested.celsius.get(hottest, float("nan")))
        if fallen[-1] >= rest_fall_c:
            break
    record.raw("probes", {"before": before.celsius, "loaded": loaded.celsius, "rested": rested.celsius,
                          "faults": {**before.faults, **loaded.faults, **rested.faults},
                          "rest": {"seconds": rest_s, "poll_s": REST_POLL_S, "fall_c": fallen,
                                   "reason": f"until channel {hottest} fell {rest_fall_c} °C, at most {REST_MAX_S} s"}})
    record.judge(sla, "thermal_rise_under_load", rise[hottest], detail=f"channel {hottest}")
    record.judge(sla, "thermal_fall_at_idle", loaded[hottest] - rested.celsius.get(hottest, float("nan")),
                 detail=f"channel {hottest}, after a {rest_s} s rest")
    assert np.isfinite(list(rested.celsius.values())).all()
