"""Power analyzer / battery emulator driver: command sequences, digitizer decoding, the emulated N6705C."""
from __future__ import annotations

import numpy as np
import pytest
from instrument_helpers import ScriptedResource, block

from phonebench.core.errors import ConfigError, InstrumentError, InvalidMeasurement
from phonebench.drivers.power import KeysightN6705C, PowerAnalyzer
from phonebench.emulation.instruments.power_analyzer import PowerAnalyzerServer
from phonebench.emulation.world import PHASE_POWER_W, World

IDN = "Keysight Technologies,N6705C,MY56001234,D.03.04.1296"


def scripted(answers: dict) -> tuple[KeysightN6705C, ScriptedResource]:
    res = ScriptedResource({"*IDN?": IDN, "SYST:CHAN:MOD? (@1)": "N6781A", **answers})
    supply = KeysightN6705C("TCPIP::scripted::5025::SOCKET", resource=res)
    res.log.clear()
    return supply, res


def test_battery_emulation_setup_sequence():
    supply, res = scripted({})
    assert supply.identity.options == {"module@1": "N6781A"}
    supply.battery_emulation(True)
    supply.set_voltage(3.8)
    supply.set_current_limit(3)
    supply.set_output_resistance(0.1)
    supply.output(True)
    supply.set_output_resistance(None)
    assert res.commands() == ["EMUL BATT,(@1)", "VOLT 3.8,(@1)", "CURR:LIM 3,(@1)", "VOLT:RES 0.1,(@1)",
                              "VOLT:RES:STAT ON,(@1)", "OUTP ON,(@1)", "VOLT:RES:STAT OFF,(@1)"]
    assert res.log.count("SYST:ERR?") == 7


def test_ripple_sequence_matches_the_field_notes():
    supply, res = scripted({"VOLT? (@1)": "+3.800000E+00"})
    supply.set_ripple(0.03, 217)
    supply.start_ripple()
    supply.stop_ripple()
    assert res.commands() == ["VOLT? (@1)", "VOLT:MODE ARB,(@1)", "ARB:FUNC:TYPE VOLT,(@1)",
                              "ARB:FUNC:SHAP SIN,(@1)", "ARB:VOLT:SIN:AMPL 0.03,(@1)",
                              "ARB:VOLT:SIN:OFFS 3.8,(@1)", "ARB:VOLT:SIN:FREQ 217,(@1)", "ARB:COUN INF,(@1)",
                              "TRIG:ARB:SOUR BUS", "INIT:TRAN (@1)", "TRIG:TRAN (@1)", "ABOR:TRAN (@1)",
                              "VOLT:MODE FIX,(@1)"]


def test_digitize_sequence_and_big_endian_float_decoding():
    current = np.array([0.1, 0.2, 1.0, 1.1], dtype=">f4")
    voltage = np.array([3.8, 3.79, 3.7, 3.69], dtype=">f4")
    supply, res = scripted({"SENS:SWE:TINT? (@1)": "+1.024000E-05", "STAT:OPER:COND? (@1)": ["+17", "+25"],
                            "FETC:ARR:CURR? (@1)": block(current.tobytes()),
                            "FETC:ARR:VOLT? (@1)": block(voltage.tobytes())})
    trace = supply.digitize(4, 10e-6, pretrigger_points=2)
    assert res.commands() == ["FORM REAL", "FORM:BORD NORM", "SENS:FUNC:CURR ON,(@1)", "SENS:FUNC:VOLT ON,(@1)",
                              "SENS:SWE:TINT 1e-05,(@1)", "SENS:SWE:POIN 4,(@1)", "SENS:SWE:OFFS:POIN -2,(@1)",
                              "TRIG:ACQ:SOUR BUS,(@1)", "INIT:ACQ (@1)", "SENS:SWE:TINT? (@1)",
                              # Triggered only once WTG-meas (8) says the pre-trigger points are in.
                              "STAT:OPER:COND? (@1)", "STAT:OPER:COND? (@1)", "TRIG:ACQ (@1)",
                              "FETC:ARR:CURR? (@1);:SYSTem:ERRor?", "FETC:ARR:VOLT? (@1);:SYSTem:ERRor?"]
    assert trace.interval_s == pytest.approx(10.24e-6)  # the instrument's rounded interval
    assert trace.t == pytest.approx(np.array([-2, -1, 0, 1]) * 10.24e-6)
    assert trace.power_w() == pytest.approx(current.astype(float) * voltage.astype(float))
    assert trace.sample_rate_hz > 50_000


def test_overload_values_are_invalid_not_numbers():
    data = np.array([0.1, 9.91e37, 0.2], dtype=">f4")
    supply, _ = scripted({"SENS:SWE:TINT? (@1)": "+1.024000E-05", "STAT:OPER:COND? (@1)": "+24",
                          "FETC:ARR:CURR? (@1)": block(data.tobytes()),
                          "MEAS:CURR? (@1)": "+9.91E+37"})
    trace = supply.digitize(3, 10e-6, quantities=("current",))
    assert trace.invalid_count() == 1
    with pytest.raises(InvalidMeasurement, match="overload"):
        trace.require_valid()
    with pytest.raises(InvalidMeasurement, match="overload"):
        supply.measure_current()


def test_driver_misuse_is_a_config_error():
    supply, _ = scripted({})
    with pytest.raises(ConfigError, match="before arm"):
        supply.fetch()
    with pytest.raises(ConfigError, match="cannot digitize"):
        supply.arm_digitizer(10, 1e-5, quantities=("power",))


# --- against the emulated N6705C ---------------------------------------------------------------------

@pytest.fixture()
def bench():
    world = World(seed=2)
    server = PowerAnalyzerServer(world)
    server.start()
    supply = KeysightN6705C(server.address, timeout_s=2)
    yield world, server, supply
    supply.close()
    server.stop()


def test_output_powers_the_phone_through_the_emulated_battery(bench):
    world, server, supply = bench
    assert isinstance(supply, PowerAnalyzer)
    supply.battery_emulation(True)
    supply.set_voltage(3.85)
    supply.set_current_limit(3.0)
    supply.output(True)
    idle_v = supply.measure_voltage()
    assert idle_v == pytest.approx(3.85, abs=0.002)
    supply.set_output_resistance(0.15)
    world.schedule("decode", world.clock.now(), world.clock.now() + 10)
    current = supply.measure_current()
    assert current == pytest.approx(PHASE_POWER_W["decode"] / world.supply_v, rel=0.01)
    # Battery-emulation sag: the terminal voltage drops by I x R.
    assert supply.measure_voltage() == pytest.approx(3.85 - 0.15 * current, abs=0.003)
    assert world.battery_state().voltage_v == pytest.approx(3.85 - 0.15 * current, abs=0.002)


def test_output_resistance_needs_battery_emulation(bench):
    world, server, supply = bench
    with pytest.raises(InstrumentError, match="-221.*EMUL BATT"):
        supply.set_output_resistance(0.1)


def test_digitizer_sees_the_phones_activity_before_and_after_the_trigger(bench):
    world, server, supply = bench
    supply.set_voltage(3.85)
    supply.output(True)
    supply.arm_digitizer(20_000, 10.24e-6, pretrigger_points=10_000)
    world.work("decode", 0.2)  # the runtime decodes until the trigger
    trace = supply.trigger() or supply.fetch()
    assert trace.sample_rate_hz > 90_000
    # The status poll and the trigger command take a few ms after the decode ended: skip them.
    before, after = trace.power_w()[trace.t < -0.01], trace.power_w()[trace.t > 0]
    assert before.mean() == pytest.approx(PHASE_POWER_W["decode"], rel=0.01)
    assert after.mean() == pytest.approx(PHASE_POWER_W["idle"], rel=0.02)
    assert trace.energy_j() == pytest.approx((3.9 + 0.45) * 10_000 * 10.24e-6, rel=0.02)


def test_fetch_waits_for_the_sweep_in_simulated_time(bench):
    world, server, supply = bench
    supply.output(True)
    start = world.clock.now()
    trace = supply.digitize(100_000, 20e-6, quantities=("current",))
    assert trace.voltage_v is None and trace.current_a.size == 100_000
    # The sweep, plus about 1 ms of simulated time per command unit of the setup.
    assert 100_000 * 20.48e-6 < world.clock.now() - start < 100_000 * 20.48e-6 + 0.05


def test_ripple_reaches_the_world_and_the_voltage_trace(bench):
    world, server, supply = bench
    supply.battery_emulation(True)
    supply.set_voltage(3.8)
    supply.output(True)
    supply.set_ripple(0.05, 217)
    assert world.ripple_amplitude_v() == 0.0  # configured, not started
    supply.start_ripple()
    assert world.ripple_amplitude_v() == 0.05 and world.supply.ripple_hz == 217
    trace = supply.digitize(50_000, 10.24e-6, quantities=("voltage",))
    spectrum = np.abs(np.fft.rfft(trace.voltage_v - trace.voltage_v.mean())) * 2 / trace.voltage_v.size
    freqs = np.fft.rfftfreq(trace.voltage_v.size, trace.interval_s)
    assert freqs[np.argmax(spectrum)] == pytest.approx(217, abs=2)
    assert spectrum.max() == pytest.approx(0.05, rel=0.05)
    supply.stop_ripple()
    assert world.ripple_amplitude_v() == 0.0


@pytest.mark.parametrize("points, interval, message", [(100, 5.12e-6, "-222"), (2_000_000, 1e-5, "-222")])
def test_digitizer_limits_are_enforced_by_the_instrument(bench, points, interval, message):
    world, server, supply = bench
    with pytest.raises(InstrumentError, match=message):
        supply.arm_digitizer(points, interval)


def test_trigger_without_arming_is_ignored_with_an_error(bench):
    world, server, supply = bench
    with pytest.raises(ConfigError, match="before arm_digitizer"):
        supply.trigger()
    with pytest.raises(InstrumentError, match="-211.*not initiated"):
        supply.configure("TRIG:ACQ (@1)")


def test_a_trigger_before_the_pretrigger_points_are_in_is_ignored_and_the_fetch_blocks(bench):
    world, server, supply = bench
    supply.output(True)
    supply.arm_digitizer(40_000, 10.24e-6, pretrigger_points=20_000)  # 0.2 s of pre-trigger points
    # What the old driver did: trigger right after arming.
    with pytest.raises(InstrumentError, match="-211.*pre-trigger points not yet acquired"):
        supply.configure("TRIG:ACQ (@1)")
    supply.timeout_s = 0.3
    with pytest.raises(InstrumentError, match="truncated or stalled"):
        supply.fetch()  # the sweep never started: on hardware FETC blocks until its timeout


def test_operation_status_shows_the_digitizer_filling_then_waiting_for_its_trigger(bench):
    world, server, supply = bench
    assert int(supply.query("STAT:OPER:COND? (@1)")) == 4  # OFF, nothing initiated
    supply.output(True)
    armed_at = world.clock.now()
    supply.arm_digitizer(40_000, 10.24e-6, pretrigger_points=20_000)
    assert int(supply.query("STAT:OPER:COND? (@1)")) == 1 | 16  # CV, MEAS-active, not yet WTG-meas
    supply.trigger()  # polls until WTG-meas: the pre-trigger points took their 0.2 s of simulated time
    assert world.clock.now() - armed_at >= 20_000 * 10.24e-6
    trace = supply.fetch()
    assert trace.t[0] == pytest.approx(-20_000 * 10.24e-6) and trace.require_valid().current_a.size == 40_000
    assert int(supply.query("STAT:OPER:COND? (@1)")) == 1


def test_empty_slot_is_refused_at_open_and_rejected_queries_report_the_instruments_error(bench):
    world, server, supply = bench
    with pytest.raises(InstrumentError, match="no module in slot 2"):
        KeysightN6705C(server.address, channel=2)
    supply.timeout_s = 0.2
    with pytest.raises(InstrumentError, match="VOLT\\? \\(@3\\)` failed: -241"):
        supply.query("VOLT? (@3)")


@pytest.mark.parametrize("fault, error, message", [("garbage_block", InstrumentError, "binary block"),
                                                   ("truncated_block", InstrumentError, "truncated"),
                                                   ("overload", InvalidMeasurement, "overload")])
def test_fetch_faults(bench, fault, error, message):
    world, server, supply = bench
    supply.output(True)
    supply.timeout_s = 0.3
    server.inject_fault(fault)
    with pytest.raises(error, match=message):
        supply.digitize(1000, 1e-5).require_valid()


@pytest.mark.parametrize("interval", ["+0.000000E+00", "NAN", "-1.024000E-05", "+9.9E+37", "INF"])
def test_an_unusable_sample_interval_is_refused_not_divided_by(interval):
    supply, _ = scripted({"SENS:SWE:TINT? (@1)": interval})
    with pytest.raises(InstrumentError, match=r"s/n MY56001234\): `SENS:SWE:TINT\? \(@1\)` gave the digitizer "
                                              r"sample interval = .*not a usable positive value"):
        supply.arm_digitizer(4, 10e-6)


@pytest.mark.parametrize("reading", ["+9.9E+37", "-9.91E+37", "NAN", "INF"])
def test_scalar_sentinels_are_invalid_measurements(reading):
    supply, _ = scripted({"MEAS:VOLT? (@1)": reading})
    with pytest.raises(InvalidMeasurement, match="overload"):
        supply.measure_voltage()


def test_infinite_samples_in_a_fetched_array_are_invalid():
    data = np.array([0.1, np.inf, np.nan, 0.2], dtype=">f4")
    supply, _ = scripted({"SENS:SWE:TINT? (@1)": "+1.024000E-05", "STAT:OPER:COND? (@1)": "+24",
                          "FETC:ARR:CURR? (@1)": block(data.tobytes())})
    trace = supply.digitize(4, 10e-6, quantities=("current",))
    assert trace.invalid_count() == 2
    with pytest.raises(InvalidMeasurement, match="2 digitizer samples"):
        trace.require_valid()


def test_a_queued_error_after_a_fetch_is_raised():
    data = np.array([0.1, 0.2], dtype=">f4")
    supply, _ = scripted({"SENS:SWE:TINT? (@1)": "+1.024000E-05", "STAT:OPER:COND? (@1)": "+24",
                          "FETC:ARR:CURR? (@1)": block(data.tobytes()),
                          ":SYSTem:ERRor?": ['-230,"Data corrupt or stale"', '+0,"No error"']})
    with pytest.raises(InstrumentError, match='FETC:ARR:CURR\\? \\(@1\\)` failed: -230,"Data corrupt or stale"'):
        supply.digitize(2, 10e-6, quantities=("current",))
