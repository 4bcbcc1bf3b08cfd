"""The issue's "done when", in-process: an emulated phone in its world, the emulated instruments on
loopback, and only the real drivers in between — the same calls a bench makes on hardware."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from instrument_helpers import onset_s

from phonebench.drivers.registry import open_instrument
from phonebench.emulation.audio import synth_speech
from phonebench.emulation.device import EmulatedPhone, PhoneSpec
from phonebench.emulation.phones import emulated_phone
from phonebench.emulation.instruments.awg import AwgServer
from phonebench.emulation.instruments.power_analyzer import PowerAnalyzerServer
from phonebench.emulation.instruments.scope import scope_server
from phonebench.emulation.instruments.thermal_probe import ThermalProbeServer
from phonebench.emulation.world import PHASE_POWER_W, World

COMBOS = {"keysight+generic": ("keysight", "generic", {"poll_s": 0}),
          "rigol+fluke": ("rigol", "fluke", {"poll_s": 0, "memory_depth": 600_000})}  # a two-channel depth


@dataclass
class Rig:
    world: World
    phone: EmulatedPhone
    scope: object
    supply: object
    stimulus: object
    thermal: object


@pytest.fixture(params=sorted(COMBOS))
def rig(request):
    scope_dialect, probe_dialect, scope_options = COMBOS[request.param]
    world = World(seed=21)
    phone = emulated_phone(PhoneSpec(), world=world)
    servers = {"scope": scope_server(world, scope_dialect), "supply": PowerAnalyzerServer(world),
               "stimulus": AwgServer(world), "thermal": ThermalProbeServer(world, probe_dialect)}
    options = {"scope": scope_options, "supply": {}, "stimulus": {}, "thermal": {}}
    drivers = {}
    try:
        for role, server in servers.items():
            server.start()
            drivers[role] = open_instrument(role, server.family, server.address, **options[role])
        yield Rig(world, phone, **drivers)
    finally:
        for driver in drivers.values():
            driver.close()
        for server in servers.values():
            server.stop()


def test_stimulus_answer_on_two_channels_and_the_power_trace_of_the_same_dialog(rig):
    supply, scope, stimulus = rig.supply, rig.scope, rig.stimulus
    supply.battery_emulation(True)
    supply.set_voltage(3.85)
    supply.set_current_limit(3.0)
    supply.set_output_resistance(0.08)
    supply.output(True)
    stimulus.load_clip(synth_speech(0.3, 16_000, np.random.default_rng(5)), 16_000, amplitude_vpp=1.0)
    stimulus.arm()
    scope.configure_channel(1, 0.2)
    scope.configure_channel(2, 0.1)
    scope.set_timebase(0.4, 1.6)
    scope.set_edge_trigger(1, 0.05)
    scope.single()
    supply.arm_digitizer(400_000, 10.24e-6, pretrigger_points=40_000)
    rig.world.work("decode", 0.5)  # the phone is busy while the digitizer's pre-trigger points fill
    supply.trigger()  # t = 0 of the power trace: right before the stimulus

    stimulus.fire()
    scope.wait_triggered(timeout_s=10)
    ch1, ch2 = scope.read_waveform(1, points=100_000), scope.read_waveform(2, points=100_000)
    trace = supply.fetch()

    dialog = rig.world.voice.dialogs[-1]  # the phone's own record, to check the measurement against
    # Every time below is on the emulated world's clock (the instruments' sample times, the world's
    # record of the dialog): accuracy of the measurement, not speed, and independent of machine load.
    assert ch1.require_valid() and ch2.require_valid()
    measured = onset_s(ch2.t, ch2.volts) - onset_s(ch1.t, ch1.volts)
    assert measured == pytest.approx(dialog.latency_s, abs=0.006)
    assert measured < 0.410  # the default phone meets the latency claim on this trial
    speech = np.flatnonzero(np.abs(ch2.volts) > 0.05)
    # The answer's last sound comes at most a syllable gap before the phone stops speaking.
    assert dialog.duration_s - 0.3 < ch2.t[speech[-1]] <= dialog.duration_s + 0.005

    power = trace.require_valid().power_w()
    t = trace.t
    assert trace.sample_rate_hz >= 50_000
    assert power[t < -0.1].mean() == pytest.approx(PHASE_POWER_W["decode"], rel=0.02)  # pre-trigger
    assert power[(t > 0.05) & (t < 0.2)].mean() == pytest.approx(PHASE_POWER_W["prefill"], rel=0.02)
    answer = (t > dialog.latency_s + 0.05) & (t < dialog.duration_s - 0.05)
    assert power[answer].mean() == pytest.approx(PHASE_POWER_W["speak"], rel=0.02)
    assert power[t > dialog.duration_s + 0.05].mean() == pytest.approx(PHASE_POWER_W["idle"], rel=0.05)
    # Battery emulation sags the terminal voltage while the phone works hard.
    assert trace.voltage_v[answer].mean() < trace.voltage_v[t > dialog.duration_s + 0.05].mean() - 0.07
    assert 8.0 < trace.energy_j() < 16.0


def test_probe_temperatures_rise_under_load_and_fall_at_idle(rig):
    before = rig.thermal.read()
    rig.world.work("decode", 120)
    loaded = rig.thermal.read()
    rig.phone.shell.execute("sleep 900")  # the phone idles; simulated time passes
    rested = rig.thermal.read()
    assert loaded["T1"] > before["T1"] + 2.0 and loaded["T2"] > before["T2"] + 0.5
    assert rested["T1"] < loaded["T1"] - 2.0
    # The phone's own skin sensor tells the same story through its thermal zones.
    skin = [name for name, _, _ in rig.phone.thermal_zones()].index("skin")
    assert abs(int(rig.phone.fs.read(f"/sys/class/thermal/thermal_zone{skin}/temp")) / 1000
               - rested["T1"]) < 2.0


def test_negative_controls_quiet_stimulus_and_supply_off(rig):
    """What makes the suite's checks fail: no answer on channel 2, no power through the analyzer."""
    rig.stimulus.load_clip(synth_speech(0.3, 16_000, np.random.default_rng(5)), 16_000, amplitude_vpp=0.03)
    rig.stimulus.arm()
    rig.scope.configure_channel(1, 0.005)
    rig.scope.configure_channel(2, 0.1)
    rig.scope.set_timebase(0.4, 1.6)
    rig.scope.set_edge_trigger(1, 0.01)
    rig.scope.single()
    rig.supply.arm_digitizer(100_000, 10.24e-6, pretrigger_points=1000)  # output never switched on
    rig.stimulus.fire()
    rig.supply.trigger()
    rig.scope.wait_triggered(timeout_s=10)
    ch2 = rig.scope.read_waveform(2, points=50_000)
    assert len(rig.world.voice.dialogs) == 0  # too quiet: the phone did not hear it
    assert np.abs(ch2.volts).max() < 0.03  # nothing but noise and hum on channel 2
    assert np.abs(rig.supply.fetch().power_w()).mean() < 0.01
