"""The chamber role: the Watlow F4T driver against the emulated F4T over Modbus/TCP on loopback,
the path a lab takes to a real chamber. Waits run on the emulated world's clock (the driver is
given that clock and a pause that advances it), so ten chamber minutes take a second."""
from __future__ import annotations

import struct

import pytest
from pymodbus.client import ModbusTcpClient

from phonebench.core.errors import InstrumentError
from phonebench.core.station import (
    BayConfig,
    DutConfig,
    EmulatedConfig,
    EmulatedPhoneConfig,
    InstrumentConfig,
    InstrumentRef,
    StationConfig,
    load_station,
    parse_station,
)
from phonebench.core.station_writer import emulated_station_toml, station_toml
from phonebench.drivers.chamber import Chamber, ChamberAlarm
from phonebench.drivers.chamber_f4t import WatlowF4T
from phonebench.drivers.registry import open_instrument
from phonebench.emulation.instruments.f4t import F4TServer
from phonebench.emulation.world import World


@pytest.fixture
def world() -> World:
    return World()


@pytest.fixture
def f4t(world):
    server = F4TServer(world)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def driver(f4t):  # not `chamber`: that is the bench plugin's fixture (the station's chamber)
    driver = open_instrument("chamber", "watlow-f4t", f4t.address, timeout_s=5.0)
    yield driver
    driver.close()


def _raw(f4t: F4TServer) -> ModbusTcpClient:
    host, port = f4t.address.split(":")
    client = ModbusTcpClient(host, port=int(port), timeout=5.0, retries=0)
    assert client.connect()
    return client


def _float_words(value: float) -> list[int]:
    high, low = struct.unpack(">HH", struct.pack(">f", value))
    return [low, high]  # the F4T's default word order: low word first


def test_identify(driver, f4t):
    assert isinstance(driver, Chamber)
    identity = driver.identity
    assert (identity.manufacturer, identity.model, identity.serial, identity.firmware) == \
        ("Watlow", "F4T", str(f4t.serial), "5.0.12")
    assert identity.options["part_number"].startswith("F4T") and identity.options["display_units"] == "C"
    assert identity.role == "chamber" and identity.family == "watlow-f4t" and identity.address == f4t.address


def test_set_point_with_ramp_then_stable_on_the_emulated_clock(driver, world):
    assert driver.air_temperature() == pytest.approx(25.0)
    driver.set_ramp(2.0)
    driver.set_point(40.0)
    highest: list[float] = []

    def pause(seconds: float) -> None:  # the station's wait: the world's time moves, not the host's
        world.wait(seconds)
        highest.append(driver.air_temperature())

    world.wait(60.0)
    state = driver.state()
    assert state.set_point_c == pytest.approx(40.0) and state.running
    assert 26.0 < state.working_set_point_c < 28.5  # ramping at 2 °C/min from the air's 25 °C
    done = driver.wait_stable(band_c=0.5, hold_s=120.0, timeout_s=3600.0, clock=world.clock, pause=pause,
                               poll_s=5.0)
    assert abs(done.air_c - 40.0) <= 0.5 and done.held_s >= 120.0
    assert done.waited_s >= 15.0 / 2.0 * 60.0 - 60.0  # the ramp alone takes 7.5 minutes
    assert 40.0 < max(highest) < 41.0  # a small overshoot, as a tuned loop gives
    assert world.ambient_c == pytest.approx(driver.air_temperature(), abs=0.1)  # the phone's ambient


def test_step_without_ramp_and_standby(driver, world):
    driver.set_ramp(None)
    driver.set_point(10.0)
    assert driver.state().working_set_point_c == pytest.approx(10.0)  # no ramp: the step at once
    driver.wait_stable(band_c=0.5, hold_s=60.0, timeout_s=3600.0, clock=world.clock, pause=world.wait)
    driver.standby()
    world.wait(900.0)
    state = driver.state()
    assert not state.running and 15.0 < state.air_c < 22.0  # drifting back to the room


def test_stability_timeout_is_a_clear_error(driver, world):
    driver.set_ramp(0.1)
    driver.set_point(60.0)
    with pytest.raises(InstrumentError, match=r"not within ±0.5 °C of the set point 60 °C .* after 600 s"):
        driver.wait_stable(band_c=0.5, hold_s=60.0, timeout_s=600.0, clock=world.clock, pause=world.wait)


def test_out_of_range_set_point_is_refused_by_the_controller(driver):
    with pytest.raises(InstrumentError) as caught:
        driver.set_point(250.0)
    first = str(caught.value).splitlines()[0]
    assert "refused set point 250 °C (Modbus exception 03, illegal data value)" in first
    assert "range -70 to 180 °C" in first and caught.value.hint
    assert driver.state().set_point_c == pytest.approx(25.0)  # nothing changed


def test_unmapped_register_is_a_clear_error(f4t):
    driver = WatlowF4T(f4t.address, limit=5)  # limit 5 is not on this controller
    try:
        with pytest.raises(InstrumentError, match=r"limit 5 \(register 11490\): Modbus exception 02, illegal data "
                                                  r"address") as caught:
            driver.alarms()
        assert "Data Map 1" in (caught.value.hint or "")
    finally:
        driver.close()


def test_emulator_refuses_what_the_controller_refuses(f4t):
    client = _raw(f4t)
    try:
        assert client.read_holding_registers(2, count=2, device_id=1).exception_code == 2  # not in the map
        assert client.write_registers(2820, _float_words(30.0), device_id=1).exception_code == 2  # PV: read-only
        assert client.write_register(2782, 0, device_id=1).exception_code == 2  # half of the set point's float
        assert client.write_register(2794, 99, device_id=1).exception_code == 3  # no such ramp action
        assert client.write_registers(2782, _float_words(-100.0), device_id=1).exception_code == 3  # below -70
        assert not client.write_registers(2782, _float_words(30.0), device_id=1).isError()
        words = client.read_holding_registers(2782, count=2, device_id=1).registers
        assert struct.unpack(">f", struct.pack(">HH", words[1], words[0]))[0] == pytest.approx(30.0)
    finally:
        client.close()


def test_door_open_is_one_chamber_alarm(driver, f4t, world):
    driver.set_point(35.0)
    f4t.open_door()
    with pytest.raises(ChamberAlarm) as caught:
        driver.air_temperature()
    message = str(caught.value).splitlines()
    assert message[0] == f"{driver.name}: door open (alarm 2: alarm high)"
    assert message[1:] == ["  hint: close the chamber door"]
    assert isinstance(caught.value, InstrumentError) and caught.value.alarm.startswith("door open")
    with pytest.raises(ChamberAlarm, match="door open"):
        driver.wait_stable(clock=world.clock, pause=world.wait)
    f4t.close_door()
    assert driver.alarms() == []


def test_preflight_names_the_chambers_alarm(f4t):
    from phonebench.bench.procedures.preflight import check_instrument

    f4t.open_door()
    item = check_instrument("chamber", InstrumentConfig("chamber", "watlow-f4t", f4t.address, name="chamber"))
    assert any(line.startswith("air: 25.0 °C, set point 25 °C") for line in item.found)
    assert item.problems == ["alarm: door open (alarm 2: alarm high)"]


def test_over_temperature_limit_stops_the_wait(driver, f4t, world):
    f4t.chamber.limit_high_c = 45.0  # the limit's high set point, set at the chamber
    driver.set_point(60.0)
    with pytest.raises(ChamberAlarm, match="over-temperature limit 1 tripped") as caught:
        driver.wait_stable(timeout_s=3600.0, clock=world.clock, pause=world.wait)
    assert "reset the limit" in (caught.value.hint or "")
    assert not driver.state().running  # the limit holds the loop off


def test_display_units_and_word_order_are_the_controllers(world):
    server = F4TServer(world, word_order="high", units="F")
    server.start()
    try:
        driver = WatlowF4T(server.address, word_order="high")
        try:
            assert driver.identity.serial == str(server.serial) and driver.identity.options["display_units"] == "F"
            driver.set_point(30.0)
            assert server.chamber.set_point_c == pytest.approx(30.0)  # 86 °F on the wire
            assert driver.air_temperature() == pytest.approx(25.0, abs=0.01)
        finally:
            driver.close()
    finally:
        server.stop()


def test_unreachable_chamber_is_a_clear_error():
    with pytest.raises(InstrumentError, match="no Modbus/TCP answer at 127.0.0.1:1"):
        WatlowF4T("127.0.0.1:1", timeout_s=0.5)


# --- the station file -------------------------------------------------------------------------
def test_station_file_with_a_chamber_round_trips(tmp_path):
    chamber = InstrumentConfig(role="chamber", family="watlow-f4t", address="10.0.0.9:502", name="f4t", shared=True,
                               options={"door_alarm": 3, "word_order": "low"})
    config = StationConfig(name="rack", source=None, results_dir=tmp_path,
                           duts=[DutConfig("P1", "10.0.0.7:5555"), DutConfig("P2", "10.0.0.8:5555")],
                           inventory={"f4t": chamber},
                           bays=[BayConfig("b1", ["P1"], {"chamber": InstrumentRef("f4t")}),
                                 BayConfig("b2", ["P2"], {"chamber": InstrumentRef("f4t")})])
    written = station_toml(config, "round trip")
    path = tmp_path / "station.toml"
    path.write_text(written)
    parsed = load_station(path)
    assert parsed.inventory["f4t"].shared  # one chamber holding two bays' phones
    assert parsed.for_bay("b2").instruments["chamber"].options == {"door_alarm": 3, "word_order": "low"}
    assert station_toml(parsed, "round trip") == written


def test_emulated_chamber_round_trips(tmp_path):
    emulated = EmulatedConfig(phones=[EmulatedPhoneConfig("EMU-CH")], families={"chamber": "watlow-f4t"})
    config = StationConfig(name="emu", source=None, results_dir=tmp_path)
    path = tmp_path / "emulate.toml"
    path.write_text(emulated_station_toml(config, emulated))
    assert load_station(path).emulated.families == {"chamber": "watlow-f4t"}
    with pytest.raises(Exception, match="'vötsch' is not an emulated chamber family"):
        parse_station({"emulated": {"chamber": "vötsch"}})


def test_emulated_station_wires_a_chamber_into_the_bay():
    from phonebench.bench.station.owner import StationOwner
    from phonebench.emulation.station import EmulatedStation

    config = parse_station({"emulated": {"chamber": "watlow-f4t", "phone": [{"serial": "EMU-CH"}]}})
    with EmulatedStation(config.emulated) as station:
        merged = station.merge_into(config)
        assert merged.instruments["chamber"].family == "watlow-f4t"
        with StationOwner(merged) as owner:
            driver = owner.chamber()
            assert driver is not None and driver.identity.model == "F4T"
            driver.set_point(30.0)
            world = station.duts[0].phone.world
            world.wait(1200.0)
            assert world.surface_temperatures()["ambient"] == pytest.approx(30.0, abs=0.5)
