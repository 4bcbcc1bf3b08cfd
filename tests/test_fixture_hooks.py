"""Hooks the calibration procedures and the production line build on: fixture loopback, scope
channel skew, instrument zero and offset errors, the reference probe, and loading the next unit."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scipy import signal

from phonebench.drivers.power import KeysightN6705C
from phonebench.drivers.scope import KeysightInfiniiVision
from phonebench.drivers.stimulus import Keysight33500B
from phonebench.drivers.thermal_generic import GenericAsciiProbe
from phonebench.emulation.audio import synth_speech
from phonebench.emulation.device import PhoneSpec
from phonebench.emulation.phones import emulated_phone
from phonebench.emulation.instruments.awg import AwgServer
from phonebench.emulation.instruments.power_analyzer import CURRENT_ZERO_OFFSET_A, PowerAnalyzerServer
from phonebench.emulation.instruments.scope import INPUT_DELAY_S, KeysightScopeServer
from phonebench.emulation.instruments.thermal_probe import GENERIC_CHANNELS, ThermalProbeServer
from phonebench.emulation.world import FRESH_CAPACITY_PCT, SLA_PERSONAS_WORLD, World

CLIP = synth_speech(0.3, 16_000, np.random.default_rng(5))


@pytest.fixture
def rig():
    world = World(seed=3)
    phone = emulated_phone(PhoneSpec(seed=3), world=world)
    servers = [KeysightScopeServer(world), AwgServer(world), PowerAnalyzerServer(world), ThermalProbeServer(world)]
    for server in servers:
        server.start()
    scope = KeysightInfiniiVision(servers[0].address, poll_s=0)
    awg = Keysight33500B(servers[1].address)
    supply = KeysightN6705C(servers[2].address)
    probe = GenericAsciiProbe(servers[3].address, timeout_s=1.0)
    try:
        yield world, phone, scope, awg, supply, probe
    finally:
        for driver in (scope, awg, supply, probe):
            driver.close()
        for server in servers:
            server.stop()


def _acquire(scope, awg, scale_s: float, center_s: float, points: int, ch2_v_div: float = 0.1):
    scope.configure_channel(1, 0.2)
    scope.configure_channel(2, ch2_v_div)
    scope.set_timebase(scale_s, center_s)
    scope.set_edge_trigger(1, 0.1)
    scope.single()
    awg.fire()
    scope.wait_triggered(timeout_s=5)
    return scope.read_waveform(1, points=points), scope.read_waveform(2, points=points)


def test_acoustic_loopback_shows_the_fixture_delay_and_the_phone_stays_silent(rig):
    world, _phone, scope, awg, _supply, _probe = rig
    world.set_fixture_loopback(True)
    awg.load_clip(CLIP, 16_000, amplitude_vpp=1.0)
    awg.arm()
    ch1, ch2 = _acquire(scope, awg, 0.01, 0.03, 200_000)  # -20 ms .. 80 ms at 2 MS/s
    # The same sound on both channels: the cross-correlation peak is the delay between them.
    xcorr = signal.correlate(ch2.volts - ch2.volts.mean(), ch1.volts - ch1.volts.mean(), method="fft")
    lag = (int(np.argmax(xcorr)) - (ch1.volts.size - 1)) * ch1.sample_interval_s
    assert lag == pytest.approx(world.fixture_delay_s() + INPUT_DELAY_S[2], abs=3e-6)
    assert world.fixture_delay_s() == pytest.approx(291.5e-6, abs=0.5e-6)
    assert len(world.voice.dialogs) == 0  # the phone is out of the fixture: no answer
    world.set_fixture_loopback(False)
    awg.fire()
    assert len(world.voice.dialogs) == 1
    with pytest.raises(ValueError, match="acoustic, electrical"):
        world.set_fixture_loopback(True, path="optical")


def test_electrical_loopback_measures_the_channel_skew_and_deskew_removes_it(rig):
    world, _phone, scope, awg, _supply, _probe = rig
    world.set_fixture_loopback(True, path="electrical")
    step = np.r_[np.zeros(40), np.ones(400)]  # a 10 ns edge at 100 MSa/s
    awg.load_clip(step, 100e6, amplitude_vpp=1.0)
    awg.arm()
    _acquire(scope, awg, 20e-9, 0.0, 20_000, ch2_v_div=0.2)  # both channels see the full 0.5 V step
    assert scope.measure_delay(1, 2) == pytest.approx(INPUT_DELAY_S[2], abs=1e-9)
    scope.set_deskew(2, INPUT_DELAY_S[2])
    _acquire(scope, awg, 20e-9, 0.0, 20_000, ch2_v_div=0.2)
    assert abs(scope.measure_delay(1, 2)) < 1e-9


def test_power_analyzer_current_zero_offset_shows_with_no_load(rig):
    _world, _phone, _scope, _awg, supply, _probe = rig
    supply.output(False)
    assert supply.measure_current() == pytest.approx(CURRENT_ZERO_OFFSET_A, abs=0.1e-3)
    trace = supply.digitize(5000, 20.48e-6, quantities=("current",))
    assert float(np.mean(trace.current_a)) == pytest.approx(CURRENT_ZERO_OFFSET_A, abs=0.05e-3)


def test_thermocouple_offsets_against_the_reference_probe(rig):
    world, _phone, _scope, _awg, _supply, probe = rig
    assert "REF" in probe.channels
    readings = [probe.read() for _ in range(40)]
    t1_error = np.mean([r["T1"] - r["REF"] for r in readings])
    assert t1_error == pytest.approx(GENERIC_CHANNELS["T1"].offset_c, abs=0.05)
    world.place_reference_probe("cover_b")  # the operator moves the reference beside T2
    readings = [probe.read() for _ in range(40)]
    t2_error = np.mean([r["T2"] - r["REF"] for r in readings])
    assert t2_error == pytest.approx(GENERIC_CHANNELS["T2"].offset_c, abs=0.05)
    assert GENERIC_CHANNELS["T1"].offset_c == 0.4 and GENERIC_CHANNELS["T2"].offset_c == -0.3
    with pytest.raises(ValueError, match="no probe point"):
        world.place_reference_probe("pocket")


def test_load_phone_brings_the_next_unit_in_at_ambient_with_a_fresh_battery(rig):
    world, phone, scope, awg, _supply, probe = rig
    world.work("decode", 600)
    world.capacity_pct -= 10
    world.set_fixture_loopback(True)
    assert probe.read()["T1"] > world.ambient_c + 5
    nxt = emulated_phone(replace(phone.spec, serial="EMU0002", seed=11, sla_persona="hot"), world=world)
    world.load_phone(nxt)
    assert world.phone is nxt and world.seed == 11 and world.persona == "hot"
    assert world.capacity_pct == FRESH_CAPACITY_PCT and world.fixture.loopback is None
    assert max(world.surface_temperatures().values()) == pytest.approx(world.ambient_c)
    assert probe.read()["T1"] == pytest.approx(world.ambient_c + 0.4, abs=0.5)  # the probes stay attached
    awg.load_clip(CLIP, 16_000, amplitude_vpp=1.0)
    awg.arm()
    ch1, ch2 = _acquire(scope, awg, 0.1, 0.4, 100_000)  # the new unit answers through the same scope
    assert np.abs(ch2.volts).max() > 0.2 and len(world.voice.dialogs) == 1
    with pytest.raises(ValueError, match="another world"):
        world.load_phone(emulated_phone(PhoneSpec(serial="EMU0003")))


def test_world_personas_are_exported_and_unknown_ones_leave_the_world_nominal():
    assert SLA_PERSONAS_WORLD == {"nominal", "slow", "jittery", "power-hungry", "hot", "uneven-heat"}
    world = World(persona="leaky-log")  # a runtime persona: nothing changes here
    assert world.phase_power_w("decode") == World().phase_power_w("decode")
    assert World(persona="power-hungry").phase_power_w("decode") > 4.2
