"""Thermal probe drivers over pyserial: command sequences, faults, garbage, and the emulated probes."""
from __future__ import annotations

import numpy as np
import pytest
from instrument_helpers import ScriptedSerial

from bench.core.errors import ConfigError, InstrumentError, InvalidMeasurement
from drivers.thermal import FlukeHart, GenericAsciiProbe, ThermalProbe
from emulation.instruments.thermal_probe import GENERIC_CHANNELS, ThermalProbeServer
from emulation.world import World

GENERIC_IDN = "phonebench,TC4-MAX31855,TC4-000123,1.2.0"


def generic(answers: dict) -> tuple[GenericAsciiProbe, ScriptedSerial]:
    port = ScriptedSerial({"*IDN?": GENERIC_IDN, "CHAN?": "T1,T2,CJ", **answers})
    return GenericAsciiProbe("scripted", port=port), port


# --- scripted ------------------------------------------------------------------------------------

def test_generic_poll_sequence_and_parsing():
    probe, port = generic({"READ?": "T1=25.25,T2=31.50,CJ=24.1"})
    reading = probe.read()
    assert port.log == ["*IDN?", "CHAN?", "READ?"]
    assert probe.channels == ["T1", "T2"]
    assert reading["T1"] == 25.25 and reading["T2"] == 31.5 and reading.cold_junction_c == 24.1
    assert reading.valid and probe.identity.model == "TC4-MAX31855"


@pytest.mark.parametrize("fault", ["nan", "ERR:OC"])
def test_a_faulted_channel_is_flagged_and_never_a_number(fault):
    probe, _ = generic({"READ?": f"T1=25.25,T2={fault},CJ=24.1"})
    reading = probe.read()
    assert reading.faults == {"T2": fault} and not reading.valid
    assert reading["T1"] == 25.25
    with pytest.raises(InvalidMeasurement, match=f"T2 reported a probe fault \\({fault}\\)"):
        reading["T2"]


def test_board_fault_line_is_an_invalid_measurement():
    probe, _ = generic({"READ?": "ERR:ADC"})
    with pytest.raises(InvalidMeasurement, match="ERR:ADC"):
        probe.read()


def test_garbage_poll_answers_are_retried_and_counted_then_fatal_if_persistent():
    probe, _ = generic({"READ?": ["#$%&", "T1=1,T2=2,CJ=3"]})
    assert probe.read()["T2"] == 2.0 and probe.garbage_lines == 1
    probe, _ = generic({"READ?": "T1=1,T9=2"})
    with pytest.raises(InstrumentError, match="in a row were garbage"):
        probe.read()


def test_stream_sequence_skips_and_counts_garbage():
    lines = ("OK", "1000,25.00,30.00,24.0", "\x00\xffnoise", "2000,25.25,nan,24.0", "ERR:ADC",
             "3000,25.50,30.50,24.0")
    probe, port = generic({"STREAM 500": lines, "STREAM OFF": ("4000,1,2,3", "OK")})
    probe.start_stream(0.5)
    stream = probe.stream(n=3)
    probe.stop_stream()
    assert port.log[2:] == ["STREAM 500", "STREAM OFF"]
    assert (len(stream.samples), stream.garbage_lines, stream.fault_lines) == (3, 1, 1)
    t, t2 = stream.series("T2")
    assert t.tolist() == [1.0, 2.0, 3.0] and np.isnan(t2[1]) and t2[2] == 30.5


def test_persistent_stream_garbage_is_fatal():
    probe, _ = generic({"STREAM 1000": ("OK",) + ("garbage",) * 12})
    probe.start_stream(1.0)
    with pytest.raises(InstrumentError, match="garbage"):
        probe.stream(n=5)


def test_misuse_is_a_config_error():
    probe, _ = generic({"STREAM 1000": "OK"})
    with pytest.raises(ConfigError, match="before start_stream"):
        probe.stream(n=1)
    probe.start_stream(1.0)
    with pytest.raises(ConfigError, match="stop_stream"):
        probe.read()
    with pytest.raises(ConfigError, match="no channel"):
        generic({"READ?": "T1=1,T2=2,CJ=3"})[0].read()["T7"]


def test_silence_is_an_error_not_a_hang():
    probe, _ = generic({})
    with pytest.raises(InstrumentError, match="no answer to 'READ\\?'"):
        probe.read()


def test_fluke_sequence_units_and_open_sensor():
    answers = {"*IDN?": "HART SCIENTIFIC,1529,A3B417,1.60", "FETC? 1": "t: 25.587 C", "FETC? 2": "t: 77.000 F",
               "FETC? 3": "t: ------- C", "SENS:APER 2": (), "SYST:ERR?": '0,"No error"', "READ? 1": "t: 299.15 K"}
    port = ScriptedSerial(answers)
    probe = FlukeHart("scripted", channels=3, port=port)
    reading = probe.read()
    assert port.log == ["*IDN?", "FETC? 1", "FETC? 2", "FETC? 3"]
    assert reading["T1"] == 25.587 and reading["T2"] == pytest.approx(25.0)
    assert reading.faults == {"T3": "-------"}
    probe.start_stream(2.0)
    stream = probe.stream(n=2)
    assert port.log[4:] == ["SENS:APER 2", "SYST:ERR?", "READ? 1", "FETC? 2", "FETC? 3", "READ? 1", "FETC? 2",
                            "FETC? 3"]
    assert stream.samples[0]["T1"] == pytest.approx(26.0) and stream.series("T1")[0].tolist() == [0.0, 2.0]


# --- against the emulated probes ---------------------------------------------------------------------

@pytest.fixture()
def world():
    return World(seed=4)


@pytest.fixture()
def generic_bench(world):
    with ThermalProbeServer(world, "generic") as server:
        probe = GenericAsciiProbe(server.address, timeout_s=1.0)
        yield server, probe
        probe.close()


def test_emulated_generic_probe_reads_the_back_cover(world, generic_bench):
    server, probe = generic_bench
    assert isinstance(probe, ThermalProbe)
    assert probe.channels == ["T1", "T2", "T3", "REF"] and server.address.startswith("socket://127.0.0.1:")
    reading = probe.read()
    points = world.surface_temperatures()
    for name, channel in GENERIC_CHANNELS.items():
        assert reading[name] == pytest.approx(points[channel.point] + channel.offset_c, abs=0.5)
    assert reading.cold_junction_c == pytest.approx(world.ambient_c + 1.2, abs=0.1)


def test_stream_is_paced_by_simulated_time_and_shows_the_rise(world, generic_bench):
    server, probe = generic_bench
    probe.start_stream(1.0)
    world.work("decode", 60.2)
    stream = probe.stream(n=60)
    t, t1 = stream.series("T1")
    assert np.diff(t) == pytest.approx(np.ones(59))
    assert t1[-5:].mean() > t1[:5].mean() + 1.0
    probe.stop_stream()
    probe.start_stream(0.5)
    world.work("decode", 10.2)
    by_time = probe.stream(duration_s=4.0)
    assert len(by_time.samples) == 9 and by_time.series("T1")[0][-1] - by_time.series("T1")[0][0] == 4.0
    probe.stop_stream()  # the rest of the 20 buffered lines are skipped up to the acknowledgement
    # Nothing advances simulated time now: the stream has no data, and that is an error, not a hang.
    probe.start_stream(1.0)
    with pytest.raises(InstrumentError, match="no stream data"):
        probe.stream(n=1)
    probe.stop_stream()


def test_emulated_faults(world, generic_bench):
    server, probe = generic_bench
    server.set_probe_fault("T2", "ERR:OC")
    assert probe.read().faults == {"T2": "ERR:OC"}
    server.set_probe_fault("T2", None)
    server.inject_fault("garbage")
    assert probe.read().valid and probe.garbage_lines == 1
    server.inject_fault("error")
    with pytest.raises(InvalidMeasurement):
        probe.read()
    probe.start_stream(1.0)
    server.inject_fault("garbage", count=3)
    world.wait(5.5)
    stream = probe.stream(n=5)
    assert stream.garbage_lines == 3 and len(stream.samples) == 5
    server.inject_fault("garbage", count=None)
    world.wait(30)
    with pytest.raises(InstrumentError, match="garbage"):
        probe.stream(n=20)
    server.clear_faults()


def test_emulated_fluke_waits_one_period_per_fresh_reading(world):
    with ThermalProbeServer(world, "fluke") as server:
        probe = FlukeHart(server.address, timeout_s=1.0)
        assert probe.identity.manufacturer == "HART SCIENTIFIC"
        probe.start_stream(2.0)
        start = world.clock.now()
        stream = probe.stream(n=3)
        assert world.clock.now() - start == pytest.approx(6.0, abs=1e-3)
        assert stream.samples[0]["T4"] == pytest.approx(world.ambient_c, abs=0.05)
        server.unit = "F"
        assert probe.read()["T4"] == pytest.approx(world.ambient_c, abs=0.05)  # converted back to °C
        server.set_probe_fault("3", "open")
        assert probe.read().faults == {"T3": "-------"}
        with pytest.raises(InstrumentError, match="-222"):
            probe.start_stream(0.01)
        probe.close()
