"""Keysight DAQ970A thermal driver: its command sequence, reading formats and validity, against a
scripted resource and the strict emulator."""
from __future__ import annotations

import pytest
from instrument_helpers import ScriptedResource

from phonebench.core.errors import ConfigError, InstrumentError, InvalidMeasurement
from phonebench.drivers.daq970a import KeysightDaq970a
from phonebench.drivers.thermal import ThermalProbe
from phonebench.emulation.instruments.daq970a import Daq970aServer
from phonebench.emulation.world import World

IDN = "Keysight Technologies,DAQ970A,MY58012345,A.03.02"
CARD = "Keysight Technologies,DAQM901A,0,1.0"


def scripted(read: str | list, card: str = CARD, **options) -> tuple[KeysightDaq970a, ScriptedResource]:
    res = ScriptedResource({"*IDN?": IDN, "SYST:CTYP? 100": card, "READ?": read})
    return KeysightDaq970a("scripted", resource=res, channels={"T1": 101, "T2": 102}, rtd={}, **options), res


def test_setup_sequence_and_a_reading():
    probe, res = scripted("+2.53070000E+01 C,+000000000.000,101,+3.10000000E+01 C,+000000000.042,102")
    assert res.commands() == [
        "*IDN?", "SYST:CTYP? 100", "*CLS", "CONF:TEMP TC,K,(@101,102)", "SENS:TEMP:TRAN:TC:RJUN:TYPE INT,(@101,102)",
        "SENS:TEMP:TRAN:TC:CHEC ON,(@101,102)", "UNIT:TEMP C,(@101,102)", "SENS:TEMP:NPLC 1,(@101,102)",
        "ROUT:SCAN (@101,102)", "FORM:READ:UNIT ON", "FORM:READ:TIME ON", "FORM:READ:TIME:TYPE REL",
        "FORM:READ:CHAN ON", "FORM:READ:ALAR OFF", "TRIG:SOUR IMM", "TRIG:COUN 1"]
    reading = probe.read()
    assert reading.celsius == {"T1": 25.307, "T2": 31.0} and reading.valid
    assert probe.identity.options == {"slot1": "DAQM901A"} and probe.channels == ["T1", "T2"]


@pytest.mark.parametrize("value, reason", [("+9.90000000E+37", "open thermocouple or over range"),
                                           ("-9.90000000E+37", "overload"), ("-5.00000000E+02", "absolute zero"),
                                           ("+1.50000000E+03", "outside the K sensor's range")])
def test_overload_and_absurd_values_are_invalid(value, reason):
    probe, _ = scripted(f"{value} C,+000000000.000,101,+2.50000000E+01 C,+000000000.042,102")
    reading = probe.read()
    assert reason in reading.faults["T1"] and reading["T2"] == 25.0
    with pytest.raises(InvalidMeasurement, match=r"keysight-daq970a at scripted.*: channel T1"):
        reading["T1"]


def test_a_reading_in_another_unit_or_for_another_channel_is_refused():
    probe, _ = scripted("+2.5E+01 F,+0.0,101,+2.5E+01 C,+0.042,102")
    assert "not °C" in probe.read().faults["T1"]
    probe, _ = scripted("+2.5E+01 C,+0.0,102,+2.5E+01 C,+0.042,101")
    with pytest.raises(InstrumentError, match="channel 102 where the scan list has 101"):
        probe.read()
    probe, _ = scripted("+2.5E+01 C,+0.0,101")
    with pytest.raises(InstrumentError, match="expected 2 readings"):
        probe.read()


def test_module_and_options_are_checked():
    with pytest.raises(InstrumentError, match="slot 1 holds 'DAQM903A'"):
        scripted("", card="Keysight Technologies,DAQM903A,0,1.0")
    with pytest.raises(InstrumentError, match="no module"):
        scripted("", card="Keysight Technologies,0,0,0")
    with pytest.raises(ConfigError, match="thermocouple type"):
        scripted("", thermocouple="Q")
    res = ScriptedResource({"*IDN?": "Keysight Technologies,34465A,MY1,A.02"})
    with pytest.raises(InstrumentError, match="not a DAQ970A"):
        KeysightDaq970a("scripted", resource=res)


# --- against the emulated DAQ970A ------------------------------------------------------------------

@pytest.fixture()
def world():
    return World(seed=7)


@pytest.fixture()
def daq(world):
    with Daq970aServer(world) as server:
        probe = KeysightDaq970a(server.address, timeout_s=2.0)
        yield server, probe
        probe.close()


def test_emulated_scan_reads_the_fixture(world, daq):
    server, probe = daq
    assert isinstance(probe, ThermalProbe) and probe.channels == ["T1", "T2", "T3", "REF"]
    start = world.clock.now()
    reading = probe.read()
    assert 0.0 < world.clock.now() - start < 0.5  # four channels at 1 PLC with autozero
    points = world.surface_temperatures()
    assert reading["T1"] == pytest.approx(points["cover_a"], abs=0.6)
    assert reading["T3"] == pytest.approx(world.ambient_c, abs=0.5)
    assert reading["REF"] == pytest.approx(points["reference"], abs=0.02)


def test_emulated_timed_scan_streams_and_shows_the_rise(world, daq):
    server, probe = daq
    probe.start_stream(2.0)
    before = world.clock.now()
    world.schedule("decode", before, before + 60)
    stream = probe.stream(duration_s=60.0)
    t, t1 = stream.series("T1")
    assert len(stream.samples) == 31 and t[1] - t[0] == pytest.approx(2.0, abs=1e-3)
    assert t1[-3:].mean() > t1[:3].mean() + 1.0
    assert probe.read().valid  # back to single sweeps


def test_emulated_open_thermocouple_reads_overload_with_the_check_on(world, daq):
    server, probe = daq
    server.set_probe_fault(102, "open")
    reading = probe.read()
    assert "open thermocouple" in reading.faults["T2"] and reading["T1"] > 0
    # Without the open-thermocouple check the floating input reads a plausible lie.
    probe.configure("SENS:TEMP:TRAN:TC:CHEC OFF,(@102)")
    assert "T2" in probe.read().celsius


def test_emulated_daq_is_strict(world, daq):
    server, probe = daq
    for command, code in (("STREAM 1000", "-113"), ("CONF:TEMP TC,Q,(@101)", "-224"), ("ROUT:SCAN (@301)", "-241"),
                          ("CONF:TEMP FRTD,85,(@112)", "-221"), ("ROUT:SCAN (@101,114)", "-221")):
        with pytest.raises(InstrumentError, match=code):
            probe.configure(command)
    assert probe.read().valid  # a refused command changed nothing


def test_emulated_daq_refuses_volts_without_a_channel_list_and_keeps_serving(world, daq):
    """The internal DMM alone is not modelled: -109, and the connection still answers (it used to end
    the connection's thread with an IndexError)."""
    server, probe = daq
    with pytest.raises(InstrumentError, match="-109"):
        probe.configure("CONF:VOLT:DC")
    assert probe.read().valid


def test_emulated_station_default_thermal_is_the_daq():
    from phonebench.core.station import parse_station
    from phonebench.emulation.station import EmulatedStation

    config = parse_station({"emulated": {"phone": [{"serial": "EMU-DAQ"}]}})
    with EmulatedStation(config.emulated) as station:
        server = station.fleet.servers["thermal-bay1"]
        assert server.family == "keysight-daq970a" and server.address.startswith("TCPIP::127.0.0.1::")


def test_unreachable_daq_is_a_clear_error():
    with pytest.raises(InstrumentError, match="keysight-daq970a at TCPIP::127.0.0.1::1::SOCKET"):
        KeysightDaq970a("TCPIP::127.0.0.1::1::SOCKET", timeout_s=0.5)
