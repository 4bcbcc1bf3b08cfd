"""The pieces of a thermal check in a chamber (bench/checks/chamber_hold.py), in process: an
emulated phone in its world inside an emulated F4T reached by the real driver over Modbus/TCP,
waits on the world's clock. The whole path (station file, bench run) is tests/test_chamber_runs.py."""
from __future__ import annotations

import dataclasses

import pytest
from device_double import WorldClock, make_device

from phonebench.bench.checks import CheckResult, chamber_hold, thermal_trip
from phonebench.bench.checks import thermal as thermal_check
from phonebench.bench.specs.sla import load_profile
from phonebench.core.errors import ConfigError
from phonebench.core.station import load_station
from phonebench.core.verdict import Outcome
from phonebench.drivers.chamber import ChamberAlarm
from phonebench.drivers.registry import open_instrument
from phonebench.drivers.runtime import RuntimeClient
from phonebench.emulation.instruments.f4t import F4TServer


@pytest.fixture
def in_chamber():
    """A nominal phone in its world, inside an emulated F4T reached by the real driver."""
    device = make_device("SM8650-ES", "EMU-CH", seed=3)
    world = device.phone.world
    server = F4TServer(world)
    server.start()
    driver = open_instrument("chamber", "watlow-f4t", server.address, timeout_s=5.0)
    try:
        yield device, world, server, driver
    finally:
        driver.close()
        server.stop()


def test_a_check_waits_for_the_chamber_and_a_door_open_soak_is_stopped_with_its_trace(in_chamber):
    device, world, server, driver = in_chamber
    sla = load_profile("default")
    clock = WorldClock(device)
    held = chamber_hold.hold_for(driver, sla.get("npu_trip_temperature"), clock=clock, pause=world.wait)
    assert held.set_point_c == 25.0 and held.stabilised.held_s >= chamber_hold.HOLD_S
    server.chamber.schedule_door(clock.now() - server.chamber.t0 + 120.0, 600.0)  # two minutes into the soak
    with pytest.raises(chamber_hold.ChamberStopped) as caught:
        thermal_trip.thermal_trip_check(RuntimeClient(device, clock=clock), trip=sla.get("npu_trip_temperature"),
                                        kills=sla.get("npu_process_kills"), success=sla.get("long_dialog_success"),
                                        dialogs=5, watch=held.watch)
    stop = caught.value
    assert isinstance(stop.alarm, ChamberAlarm) and len(str(stop).splitlines()) == 2  # the line and its hint
    assert "door open" in str(stop) and "the soak after 0 of" in str(stop)
    trace = stop.partial.raw["soak_trace"]
    assert len(trace["y"]) >= 1 and stop.partial.raw["soak_events"]["completed"] == []
    assert len(held.air_c) > 10  # the chamber was read after every approach call


def test_a_chamber_whose_air_wanders_makes_the_cover_verdict_inconclusive(in_chamber):
    from test_room import sustained_run

    device, world, _, driver = in_chamber
    sla = load_profile("default")
    held = chamber_hold.hold_for(driver, sla.get("back_cover_temperature_max"), clock=WorldClock(device),
                                 pause=world.wait)
    held.air_c += [25.1, 26.4]  # the air 1.4 degC off its set point during the measurement

    verdicts = thermal_check._thermal_verdicts(sustained_run(25.0), **sla.pick(**thermal_check.ENTRIES))
    judged = {v.name: v for v in held.attach(CheckResult(verdicts)).verdicts}
    assert judged["cover_temp_max"].outcome is Outcome.INCONCLUSIVE
    assert "more than 1 degC from its set point 25 degC" in judged["cover_temp_max"].explanation
    assert judged["thermal_status_max"].outcome is Outcome.INFO  # a status count has no ambient
    assert "in chamber F4T s/n 4170001 at 25 degC" in judged["cover_temp_spread"].explanation


def test_a_held_chamber_carries_over_only_when_nothing_moved(in_chamber):
    device, world, server, driver = in_chamber
    entry = load_profile("default").get("back_cover_temperature_max")
    clock = WorldClock(device)
    held = chamber_hold.hold_for(driver, entry, clock=clock, pause=world.wait)
    held.watch()
    world.wait(600.0)
    again = chamber_hold.hold_for(driver, entry, clock=clock, pause=world.wait, previous=held)
    assert again.stabilised.waited_s == 0.0 and again.since_s == pytest.approx(600.0, abs=1.0)
    warmer = dataclasses.replace(entry, parameters={**entry.parameters, "chamber_set_point_c": 30.0})
    moved = chamber_hold.hold_for(driver, warmer, clock=clock, pause=world.wait, previous=again)
    assert moved.set_point_c == 30.0 and moved.stabilised.waited_s >= chamber_hold.HOLD_S


@pytest.mark.parametrize("parameters, message", [
    ({"chamber_set_point_c": 250.0}, "chamber_set_point_c 250.0 is not a chamber set point"),
    ({"chamber_hold_s": -5}, "chamber_hold_s -5"),
])
def test_a_bad_chamber_parameter_in_a_profile_is_one_clear_error(parameters, message):
    entry = load_profile("default").get("npu_trip_temperature")
    bad = dataclasses.replace(entry, parameters={**entry.parameters, **parameters})
    with pytest.raises(ConfigError, match=message) as caught:
        chamber_hold.hold_for(object(), bad, clock=object(), pause=print)  # type: ignore[arg-type]
    assert "SLA profile 'default'" in str(caught.value)


@pytest.mark.parametrize("emulated, message", [
    ('chamber_bays = ["bay1"]', "chamber_bays: the emulated station has no chamber"),
    ('chamber = "watlow-f4t"\nchamber_door_open_at_s = -3', "chamber_door_open_at_s: expected seconds >= 0"),
    ('chamber = "watlow-f4t"\nchamber_door_open_for_s = 60', "chamber_door_open_for_s: the door never opens"),
    ('chamber = "watlow-f4t"\nchamber_door_open_at_s = "soon"', "chamber_door_open_at_s: expected seconds"),
])
def test_a_wrong_chamber_scenario_is_one_clear_error_naming_the_file_and_key(tmp_path, emulated, message):
    path = tmp_path / "station.toml"
    path.write_text(f"[emulated]\n{emulated}\n")
    with pytest.raises(ConfigError, match=message) as caught:
        load_station(path)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize("options, message", [
    ({"door_alarm": 20}, "options.door_alarm = 20: expected the alarm block 1-14"),
    ({"limit": 9}, "options.limit = 9: expected the over-temperature limit block 1-6"),
    ({"door": 2}, "door"),
])
def test_a_wrong_chamber_option_is_one_error_naming_it(options, message):
    from phonebench.core.errors import BenchError

    with pytest.raises(BenchError, match=message) as caught:
        open_instrument("chamber", "watlow-f4t", "127.0.0.1:1", **options)
    assert "station file" in (caught.value.hint or "")


def test_a_wrong_chamber_option_in_a_station_file_names_its_section():
    from phonebench.bench.station.owner import open_configured
    from phonebench.core.station import InstrumentConfig

    cfg = InstrumentConfig("chamber", "watlow-f4t", "127.0.0.1:1", options={"door_alarm": 20}, name="f4t")
    with pytest.raises(ConfigError, match=r"station file \[instruments\.f4t\]: chamber watlow-f4t at 127\.0\.0\.1:1: "
                                          r"options\.door_alarm = 20") as caught:
        open_configured(cfg)
    assert "station file" in (caught.value.hint or "")


def test_the_station_file_docs_room_and_chamber_examples_load_as_written(tmp_path):
    """Someone writing a room or a chamber from docs/station-file.md alone gets a valid file: its
    examples, as printed, load (the room's on an emulated station, the chamber's on a bay)."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "station-file.md").read_text()
    blocks = re.findall(r"```toml\n(.*?)```", text, re.S)
    room = next(b for b in blocks if b.startswith("[room]"))
    chamber = next(b for b in blocks if "[instruments.f4t]" in b)
    path = tmp_path / "room.toml"
    path.write_text("[emulated]\nbays = 4\n\n" + room)
    rooms = load_station(path).rooms
    assert rooms.for_bay("bay3").profile == "warm-night" and rooms.for_bay("bay1").profile == "hvac"
    path = tmp_path / "chamber.toml"
    path.write_text('[[dut]]\nname = "phone1"\nadb = "10.0.0.21:5555"\n\n' + chamber)
    station = load_station(path)
    assert station.instruments["chamber"].options["door_alarm"] == 2 and station.instruments["chamber"].family == \
        "watlow-f4t"


def test_the_chamber_scenario_round_trips_through_the_writer(tmp_path):
    from phonebench.core.station import EmulatedConfig, StationConfig
    from phonebench.core.station_writer import emulated_station_toml

    emulated = EmulatedConfig(bays=2, families={"chamber": "watlow-f4t"}, chamber_bays=["bay2"],
                              chamber_door_open_at_s=900.0, chamber_door_open_for_s=120.0)
    path = tmp_path / "emulate.toml"
    path.write_text(emulated_station_toml(StationConfig(name="emu", source=None), emulated))
    loaded = load_station(path).emulated
    assert (loaded.chamber_bays, loaded.chamber_door_open_at_s, loaded.chamber_door_open_for_s) == \
        (["bay2"], 900.0, 120.0)


def test_an_emulated_chamber_sits_only_in_its_bays_and_opens_its_door_on_time():
    from phonebench.core.station import parse_station
    from phonebench.emulation.station import EmulatedStation

    config = parse_station({"emulated": {"chamber": "watlow-f4t", "chamber_bays": ["bay2"], "bays": 2,
                                         "chamber_door_open_at_s": 600.0, "chamber_door_open_for_s": 60.0}})
    with EmulatedStation(config.emulated) as station:
        assert [name for name in station.fleet.servers if name.startswith("chamber-")] == ["chamber-bay2"]
        chamber = station.fleet.servers["chamber-bay2"].chamber
        world = station.duts[1].phone.world
        world.wait(599.0)
        assert not chamber.door_open
        world.wait(2.0)
        assert chamber.door_open
        world.wait(60.0)
        assert not chamber.door_open
    with pytest.raises(ConfigError, match="chamber_bays names no bay bay7"):
        bad = parse_station({"emulated": {"chamber": "watlow-f4t", "chamber_bays": ["bay7"], "bays": 2}})
        EmulatedStation(bad.emulated).start()
