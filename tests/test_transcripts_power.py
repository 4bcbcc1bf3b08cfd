"""N6705C driver against the dialogue its programming manual describes: battery emulation, the
ARB ripple and a digitizer sweep with pre-trigger points, step by step (independent of the emulator)."""
from __future__ import annotations

import numpy as np
import pytest
from instrument_helpers import NO_ERROR, TranscriptResource, block, ok

from phonebench.drivers.power import KeysightN6705C

IDN = "Keysight Technologies,N6705C,MY56001234,D.03.04.1296"
OPENING = [("*IDN?", IDN), ("SYST:CHAN:MOD? (@1)", '"N6781A"')]


def supply(steps: list) -> tuple[KeysightN6705C, TranscriptResource]:
    res = TranscriptResource(OPENING + steps)
    return KeysightN6705C("TCPIP::192.0.2.9::5025::SOCKET", poll_s=0, resource=res), res


def test_battery_emulation_transcript():
    driver, res = supply(ok("EMUL BATT,(@1)", "VOLT 3.85,(@1)", "CURR:LIM 3,(@1)", "VOLT:RES 0.12,(@1)",
                            "VOLT:RES:STAT ON,(@1)", "OUTP ON,(@1)")
                         + [("MEAS:VOLT? (@1)", "+3.849120E+00"), ("MEAS:CURR? (@1)", "+2.310000E-01")])
    driver.battery_emulation(True)
    driver.set_voltage(3.85)
    driver.set_current_limit(3)
    driver.set_output_resistance(0.12)
    driver.output(True)
    assert driver.measure_voltage() == pytest.approx(3.84912)
    assert driver.measure_current() == pytest.approx(0.231)
    res.assert_done()
    assert driver.identity.options == {"module@1": "N6781A"}


def test_arb_sine_ripple_transcript():
    driver, res = supply([("VOLT? (@1)", "+3.800000E+00"),
                          *ok("VOLT:MODE ARB,(@1)", "ARB:FUNC:TYPE VOLT,(@1)", "ARB:FUNC:SHAP SIN,(@1)",
                              "ARB:VOLT:SIN:AMPL 0.03,(@1)", "ARB:VOLT:SIN:OFFS 3.8,(@1)",
                              "ARB:VOLT:SIN:FREQ 217,(@1)", "ARB:COUN INF,(@1)", "TRIG:ARB:SOUR BUS"),
                          *ok("INIT:TRAN (@1)", "TRIG:TRAN (@1)"),
                          *ok("ABOR:TRAN (@1)", "VOLT:MODE FIX,(@1)")])
    driver.set_ripple(0.03, 217)
    driver.start_ripple()
    driver.stop_ripple()
    res.assert_done()


def test_digitizer_sweep_with_pretrigger_points_transcript():
    current = np.array([0.10, 0.11, 0.90, 1.00, 0.95, 0.92], dtype=">f4")
    voltage = np.array([3.80, 3.80, 3.72, 3.71, 3.71, 3.72], dtype=">f4")
    steps = [
        *ok("FORM REAL", "FORM:BORD NORM", "SENS:FUNC:CURR ON,(@1)", "SENS:FUNC:VOLT ON,(@1)",
            "SENS:SWE:TINT 1.024e-05,(@1)", "SENS:SWE:POIN 6,(@1)", "SENS:SWE:OFFS:POIN -2,(@1)",
            "TRIG:ACQ:SOUR BUS,(@1)", "INIT:ACQ (@1)"),
        ("SENS:SWE:TINT? (@1)", "+1.024000E-05"),
        # Operation Status: 1 CV + 16 MEAS-active while the 2 pre-trigger points fill; + 8 WTG-meas once
        # the digitizer waits for its trigger. A trigger before that would be ignored.
        ("STAT:OPER:COND? (@1)", "+17"),
        ("STAT:OPER:COND? (@1)", "+25"),
        *ok("TRIG:ACQ (@1)"),
        # Big-endian float32 blocks; the error queue is read in the same message.
        ("FETC:ARR:CURR? (@1);:SYSTem:ERRor?", block(current.tobytes()) + b";" + NO_ERROR.encode()),
        ("FETC:ARR:VOLT? (@1);:SYSTem:ERRor?", block(voltage.tobytes()) + b";" + NO_ERROR.encode()),
    ]
    driver, res = supply(steps)
    trace = driver.digitize(6, 10.24e-6, pretrigger_points=2)
    res.assert_done()
    assert trace.interval_s == pytest.approx(10.24e-6)  # the instrument's rounded interval
    assert trace.t.tolist() == pytest.approx([i * 10.24e-6 for i in range(-2, 4)])
    assert trace.power_w() == pytest.approx(current.astype(float) * voltage.astype(float))
    assert trace.energy_j() == pytest.approx(float(np.sum(current.astype(float) * voltage)) * 10.24e-6)


def test_digitizing_voltage_alone_switches_voltage_on_before_current_off():
    """The analyzer refuses a moment with nothing sensed: a voltage-only sweep (the ripple at the
    phone's terminals) must turn voltage on first."""
    from phonebench.emulation.instruments.power_analyzer import PowerAnalyzerServer
    from phonebench.emulation.world import World

    from phonebench.drivers.power import KeysightN6705C

    server = PowerAnalyzerServer(World(seed=3))
    server.start()
    try:
        supply = KeysightN6705C(server.address)
        try:
            supply.arm_digitizer(1000, 20.48e-6, quantities=("voltage",))  # the emulator queues -221 otherwise
        finally:
            supply.close()
    finally:
        server.stop()
