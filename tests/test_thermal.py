"""Thermal probe drivers over pyserial: command sequences, faults, garbage, and the emulated probes."""
from __future__ import annotations

import numpy as np
import pytest
from instrument_helpers import ScriptedSerial

from phonebench.core.errors import ConfigError, InstrumentError, InvalidMeasurement
from phonebench.drivers.thermal import ThermalProbe, invalid_reason
from phonebench.drivers.thermal_fluke import Fluke1521, Fluke1529
from phonebench.drivers.thermal_generic import GenericAsciiProbe
from phonebench.emulation.instruments.thermal_probe import GENERIC_CHANNELS, ThermalProbeServer
from phonebench.emulation.world import World

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
    with pytest.raises(InvalidMeasurement, match=f"channel T2 reading is invalid \\({fault}\\)"):
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
    assert port.log[2:] == ["STREAM 500", "STREAM OFF", "CHAN?"]
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


def test_fluke_1529_fetches_stamped_readings_and_units():
    stamp = "{},{},{},{},14,5,{},2026,9,5"
    answers = {"*IDN?": "HART SCIENTIFIC,1529,A3B417,1.60", "FORM:STAM ON": (), "SYST:ERR?": '0,"No error"',
               "FETC? 1": stamp.format(1, 1, "25.587", "C", 35), "FETC? 2": stamp.format(1, 2, "77.000", "F", 35),
               "FETC? 3": stamp.format(0, 3, "9.9E+37", "C", 35)}
    port = ScriptedSerial(answers)
    probe = Fluke1529("scripted", channels=3, port=port)
    reading = probe.read()
    assert port.log == ["*IDN?", "FORM:STAM ON", "SYST:ERR?", "FETC? 1", "FETC? 2", "FETC? 3"]
    assert reading["T1"] == 25.587 and reading["T2"] == pytest.approx(25.0)
    assert reading.faults["T3"].startswith("overload")
    with pytest.raises(InvalidMeasurement, match="T3"):
        reading["T3"]


def test_fluke_1529_bare_numbers_and_the_handheld_format_are_not_1529_answers():
    """A 1529 with the stamp off answers bare numbers; `t: 25.587 C` is the handhelds' format.
    Neither is taken for a stamped answer: the driver insists on the stamp it switched on."""
    for answer in ("25.587", "t: 25.587 C"):
        port = ScriptedSerial({"*IDN?": "HART SCIENTIFIC,1529,A3B417,1.60", "FORM:STAM ON": (),
                               "SYST:ERR?": '0,"No error"', "FETC? 1": answer})
        probe = Fluke1529("scripted", channels=1, port=port)
        with pytest.raises(InstrumentError, match="were not"):
            probe.read()


def test_fluke_1529_refuses_another_model():
    port = ScriptedSerial({"*IDN?": "FLUKE,1586A,123,1.0"})
    with pytest.raises(InstrumentError, match="not a 1529"):
        Fluke1529("scripted", port=port)


def test_fluke_1521_handheld_format_units_and_open_sensor():
    port = ScriptedSerial({"*ver": "ver.1522,1.20", "fetch?": ["t: 25.587 C", "t: 77.000 F", "t: ------- C"]})
    probe = Fluke1521("scripted", port=port)
    assert probe.identity.model == "1522" and probe.channels == ["T1"]
    assert probe.read()["T1"] == 25.587
    assert probe.read()["T1"] == pytest.approx(25.0)
    assert probe.read().faults == {"T1": "-------"}
    with pytest.raises(ConfigError, match="no paced stream"):
        probe.start_stream(1.0)


@pytest.mark.parametrize("value, sensor, reason", [
    (9.9e37, "K", "overload"), (-9.9e37, "K", "overload"), (float("inf"), "K", "inf"), (float("nan"), "K", "nan"),
    (-500.0, "K", "below absolute zero"), (450.0, "T", "outside the T sensor's range"),
    (1500.0, "K", "outside the K sensor's range"), (-60.0, "S", "outside")])
def test_absurd_values_are_never_temperatures(value, sensor, reason):
    assert reason in invalid_reason(value, sensor)
    if sensor != "K":
        return  # the generic board's thermocouples are type K
    probe, _ = generic({"READ?": f"T1={value},T2=25.0,CJ=24.1"})
    reading = probe.read()
    assert "T1" not in reading.celsius and reading["T2"] == 25.0
    with pytest.raises(InvalidMeasurement, match="thermal generic-ascii at scripted: channel T1"):
        reading["T1"]


def test_plausible_values_are_temperatures():
    assert invalid_reason(25.0, "K") is None and invalid_reason(-269.0, "K") is None
    assert invalid_reason(0.01, "PRT") is None


def test_a_cold_junction_overload_is_not_kept():
    probe, _ = generic({"READ?": "T1=25.0,T2=25.0,CJ=9.9E37"})
    assert probe.read().cold_junction_c is None


def test_non_ascii_answer_is_a_clear_error_naming_the_port():
    probe, port = generic({})
    port.answers["READ?"] = b"\xff\xfe\x80\x81"
    with pytest.raises(InstrumentError, match="non-ASCII bytes .* on port scripted") as err:
        probe.read()
    assert "baud" in str(err.value)


def test_stream_lines_after_the_stop_acknowledgement_are_not_answers():
    """The board acknowledges STREAM OFF before the stream lines already queued: the next command
    must not read one of them as its answer (the race behind a flaky test, provoked here)."""
    probe, port = generic({"STREAM 1000": "OK", "STREAM OFF": ("OK", "5000,1.00,2.00,24.0", "6000,1.00,2.00,24.0"),
                           "READ?": "T1=25.25,T2=31.50,CJ=24.1"})
    probe.start_stream(1.0)
    probe.stop_stream()
    assert probe.read()["T1"] == 25.25 and probe.garbage_lines == 0
    probe.start_stream(1.0)  # would read "5000,..." as its answer and fail without the sync
    assert port.log[-4:] == ["STREAM OFF", "CHAN?", "READ?", "STREAM 1000"]


def test_a_board_that_never_stops_streaming_is_an_error_not_a_hang():
    probe, _ = generic({"STREAM 1000": "OK", "STREAM OFF": ("OK",) + ("5000,1,2,24",) * 1200})
    probe.start_stream(1.0)
    with pytest.raises(InstrumentError, match="no clean answer after STREAM OFF"):
        probe.stop_stream()


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
    assert probe.channels == ["T1", "T2", "T3", "T4", "REF"] and server.address.startswith("socket://127.0.0.1:")
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


def test_emulated_stream_tail_after_stop_is_skipped(world, generic_bench):
    server, probe = generic_bench
    probe.start_stream(1.0)
    server.inject_fault("stream-tail")
    probe.stop_stream()
    assert probe.read().valid and probe.garbage_lines == 0
    probe.start_stream(1.0)
    probe.stop_stream()


def test_emulated_non_ascii_answer_names_the_port(world, generic_bench):
    server, probe = generic_bench
    server.inject_fault("binary")
    with pytest.raises(InstrumentError, match=f"non-ASCII bytes .* on port {server.address}"):
        probe.read()


def test_emulated_1529_fetch_does_not_wait_and_streams_take_fresh_readings(world):
    with ThermalProbeServer(world, "fluke") as server:
        probe = Fluke1529(server.address, timeout_s=1.0)
        assert probe.identity.manufacturer == "HART SCIENTIFIC" and server.stamp
        start = world.clock.now()
        reading = probe.read()
        assert world.clock.now() - start < 0.5  # FETC? answers the last measurement at once (9600 baud)
        assert reading["T4"] == pytest.approx(world.ambient_c, abs=0.05)
        probe.start_stream(2.0)
        start = world.clock.now()
        stream = probe.stream(n=3)
        assert 3.9 <= world.clock.now() - start <= 8.0  # three fresh measurements, one per 2 s period
        assert np.diff(stream.series("T1")[0]).tolist() == [2.0, 2.0]
        server.unit = "F"
        assert probe.read()["T4"] == pytest.approx(world.ambient_c, abs=0.05)  # converted back to °C
        server.set_probe_fault("3", "open")
        world.wait(2.0)  # the next measurement sees it
        assert probe.read().faults["T3"].startswith("overload")
        with pytest.raises(InstrumentError, match="-222"):
            probe.start_stream(0.01)
        probe.close()


def test_emulated_1529_is_strict(world):
    with ThermalProbeServer(world, "fluke") as server:
        probe = Fluke1529(server.address, timeout_s=0.5)
        probe.line.write("FETC? 1;FETC? 2")  # one command per line on the 1529
        assert probe.line.query("SYST:ERR?").startswith("-113")
        probe.line.write("STREAM 1000")  # the generic board's command
        assert probe.line.query("SYST:ERR?").startswith('-113,"Undefined header')
        probe.line.write("FORM:STAM OFF")
        assert float(probe.line.query("FETC? 1")) == pytest.approx(world.surface_temperatures()["cover_a"], abs=0.1)
        probe.close()


def test_emulated_1521_handheld(world):
    with ThermalProbeServer(world, "fluke1521") as server:
        probe = Fluke1521(server.address, timeout_s=1.0)
        assert probe.identity.model == "1521"
        assert probe.read()["T1"] == pytest.approx(world.surface_temperatures()["reference"], abs=0.05)
        probe.close()
        with pytest.raises(InstrumentError, match="no answer to '\\*IDN\\?'"):  # the handheld ignores SCPI
            Fluke1529(server.address, timeout_s=0.3)


# --- calibration never keeps a number that is not a temperature --------------------------------------

def test_ambient_from_an_invalid_channel_is_an_error_not_a_record():
    from phonebench.bench.procedures.calibration.procedures import ambient_conditions
    from phonebench.bench.procedures.calibration.settings import CalibrationSettings

    probe, _ = generic({"READ?": "T1=25.0,T2=9.9E37,CJ=24.1"})
    settings = CalibrationSettings(ambient_channel="T2")
    with pytest.raises(InvalidMeasurement, match="ambient channel T2 reading is invalid"):
        ambient_conditions(probe, settings)
    probe, _ = generic({"READ?": "T1=25.0,T2=23.5,CJ=24.1"})  # negative control: lab air is kept
    assert ambient_conditions(probe, settings)["temperature_c"] == 23.5


def test_a_record_never_carries_an_absurd_ambient():
    import datetime as dt

    from phonebench.bench.procedures.calibration.records import Equipment, conclude

    equipment = Equipment.fixture("bench-1")
    for value in (9.9e37, float("nan"), -500.0, 150.0):
        with pytest.raises(InvalidMeasurement, match="not lab air"):
            conclude(equipment, "fixture-delay", "1.0", [], {}, [], dt.timedelta(days=1),
                     ambient={"temperature_c": value, "source": "probe T3"})
    assert conclude(equipment, "fixture-delay", "1.0", [], {}, [], dt.timedelta(days=1),
                    ambient={"temperature_c": 22.0}).ambient["temperature_c"] == 22.0


def test_bench_calibrate_with_an_open_ambient_thermocouple_fails_and_stores_nothing(tmp_path, capsys):
    from phonebench.bench.procedures.calibration.station import open_book
    from phonebench.bench.cli import main
    from phonebench.emulation.instruments.daq970a import Daq970aServer

    with Daq970aServer(World(seed=3)) as server:
        server.set_probe_fault(103, "open")  # T3, the ambient channel
        station = tmp_path / "lab.toml"
        station.write_text(f'[station]\nname = "lab"\nresults_dir = "out"\n[[dut]]\nname = "bay1"\n'
                           f'adb = "127.0.0.1:1"\n[instruments.thermal]\nfamily = "keysight-daq970a"\n'
                           f'address = "{server.address}"\n', encoding="utf-8")
        code = main(["calibrate", "--station", str(station), "--procedure", "thermocouple-offsets"])
    assert code == 2
    assert "ambient channel T3 reading is invalid" in capsys.readouterr().err
    book = open_book(None, tmp_path / "out")
    try:
        assert book.history() == []
    finally:
        book.store.close()


@pytest.mark.parametrize("stamp", ["1,1,25.587,C,14,5,35,inf,9,5", "1,1,25.587,C,14,5,35,99999999999999999999,9,5",
                                   "1,1,25.587,C,14,5,1e400,2026,9,5"])
def test_fluke_1529_stamps_that_overflow_are_garbage_lines_not_a_crash(stamp):
    port = ScriptedSerial({"*IDN?": "HART SCIENTIFIC,1529,A3B417,1.60", "FORM:STAM ON": (),
                           "SYST:ERR?": '0,"No error"', "FETC? 1": stamp})
    probe = Fluke1529("scripted", channels=1, port=port)
    with pytest.raises(InstrumentError, match="were not"):
        probe.read()
    assert probe.garbage_lines == 3
