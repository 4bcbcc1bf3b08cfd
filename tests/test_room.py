"""The room is part of the measurement (issue 49): claim 7's cover figure is judged at the 25 degC
it is stated at, referred from the ambient the probe read; a warm night is no regression; the
emulated room moves as its station file says."""
from __future__ import annotations

import math

import numpy as np
import pytest

from phonebench.bench.checks import thermal as thermal_check
from phonebench.bench.results.compare import REGRESSED, compare_runs
from phonebench.bench.specs.sla import load_profile
from phonebench.core.errors import ConfigError
from phonebench.core.station import (BayConfig, DutConfig, EmulatedConfig, RoomConfig, Rooms, StationConfig,
                                     load_station)
from phonebench.core.station_writer import emulated_station_toml, station_toml
from phonebench.core.verdict import Outcome
from phonebench.emulation.clock import SimClock
from phonebench.emulation.room import RACK_AMBIENTS_C, Room
from phonebench.emulation.thermal_model import ThermalModel
from phonebench.emulation.world import World

PERIOD_S = 3.0
PROBE_NOISE_C = 0.08  # the emulated ambient probe's (emulation/instruments/thermal_probe.py, T3)
DEFAULT = load_profile("default")
COVER = DEFAULT.pick(**thermal_check.ENTRIES)


# A lab's probes after `bench calibrate`: each channel's offset corrected, u = 0.05 degC.
CALIBRATED = {"corrections": {f"{ch}_offset_c": 0.0 for ch in ("T1", "T2", "T3")},
              "uncertainties": {f"{ch}_offset_c": 0.05 for ch in ("T1", "T2", "T3")}, "certificates": ["CAL-T-1"]}


def sustained_run(ambient_c: float, *, power_w: float = 3.5, n: int = 60, seed: int = 0,
                  air: np.ndarray | None = None, calibration: dict | None = None) -> thermal_check.ThermalRun:
    """A steady cover loop's measurement: the emulated phone's cover at its steady state for
    `power_w` of decode in air at ambient_c (or the `air` series), read with probe noise."""
    rng = np.random.default_rng(seed)
    air = np.full(n, ambient_c) if air is None else np.asarray(air, dtype=float)
    model = ThermalModel(0.0)
    model.settle(model.heat("decode", power_w))
    rise = model.temperatures()  # above the air: the model's cover moves degree for degree with it
    run = thermal_check.ThermalRun(thermal_check.ThermalSetup(), stable=True, calibration=calibration)
    run.t_s = list(PERIOD_S * np.arange(1, n + 1))
    run.probes = {"T1": list(air + rise["cover_a"] + rng.normal(0, 0.05, n)),
                  "T2": list(air + rise["cover_b"] + rng.normal(0, 0.05, n)),
                  "T3": list(air + rng.normal(0, PROBE_NOISE_C, n))}
    run.status = [0] * n
    return run


def cover_verdict(run: thermal_check.ThermalRun, profile=DEFAULT):
    verdicts = thermal_check._thermal_verdicts(run, **profile.pick(**thermal_check.ENTRIES))
    return {v.name: v for v in verdicts}["cover_temp_max"]


# --- 1. ambient in every thermal verdict ------------------------------------------------------
def test_the_same_phone_in_a_cool_and_a_warm_room_gets_the_same_verdict_at_25_degc():
    cool, warm = cover_verdict(sustained_run(23.5)), cover_verdict(sustained_run(26.5, seed=1))
    assert cool.outcome is warm.outcome is Outcome.PASS
    raw = {v.extra["ambient"]["raw_value"] for v in (cool, warm)}
    assert max(raw) - min(raw) == pytest.approx(3.0, abs=0.3)  # as read: the room's 3 degC
    assert abs(cool.value - warm.value) <= math.hypot(cool.uncertainty.expanded, warm.uncertainty.expanded)
    assert abs(cool.value - warm.value) < 0.3  # referred to 25 degC they agree
    for v, room in ((cool, 23.5), (warm, 26.5)):
        record = v.extra["ambient"]
        assert record["mean_c"] == pytest.approx(room, abs=0.05) and record["min_c"] <= room <= record["max_c"]
        assert record["reference_c"] == 25.0 and record["applied"]
        assert record["correction_c"] == pytest.approx(room - 25.0, abs=0.05)
        assert v.value == pytest.approx(record["raw_value"] - record["correction_c"])
        names = {c.name for c in v.uncertainty.components}
        assert {"ambient probe", "ambient placement", "ambient movement", "ambient model"} <= names
        assert f"ambient {record['mean_c']:.2f} degC" in v.explanation and "referred to 25 degC" in v.explanation


def test_judged_as_read_the_same_phone_passes_in_a_cool_room_only():
    """The negative control: judged as read (the entry states no reference ambient), the same
    phone passes at 23.5 degC and not at 26.5 — the room decided it; referred, it passes in both."""
    base = DEFAULT.get(thermal_check.COVER_MAX)
    as_read = {"cover_max": base.__class__(**{**base.__dict__, "parameters": {"warmup_s": 600}}),
               "cover_spread": DEFAULT.get(thermal_check.COVER_SPREAD)}
    runs = {room: sustained_run(room, power_w=3.9, seed=1) for room in (23.5, 26.5)}
    judged = {room: {v.name: v for v in thermal_check._thermal_verdicts(run, **as_read)}["cover_temp_max"]
              for room, run in runs.items()}
    assert judged[23.5].outcome is Outcome.PASS and judged[26.5].outcome is not Outcome.PASS
    assert judged[26.5].extra["ambient"]["applied"] is False
    assert {cover_verdict(run).outcome for run in runs.values()} == {Outcome.PASS}


def test_a_room_outside_the_window_is_inconclusive_with_the_reason():
    hot_room = cover_verdict(sustained_run(28.0))
    assert hot_room.outcome is Outcome.INCONCLUSIVE
    assert "outside 23-27 degC" in hot_room.explanation and "re-measure in a room inside" in hot_room.explanation
    assert hot_room.extra["ambient"]["mean_c"] == pytest.approx(28.0, abs=0.05)
    assert hot_room.extra["ambient"]["applied"] is False and hot_room.extra["ambient"]["correction_c"] == 0.0
    cold_and_hot_phone = cover_verdict(sustained_run(21.0, power_w=6.0))  # a FAIL is not shown either
    assert cold_and_hot_phone.outcome is Outcome.INCONCLUSIVE
    no_probe = sustained_run(25.0)
    no_probe.probes["T3"] = [math.nan] * len(no_probe.t_s)
    assert cover_verdict(no_probe).outcome is Outcome.INCONCLUSIVE
    assert "ambient not measured" in cover_verdict(no_probe).explanation


def test_a_hot_phone_still_fails_in_a_cool_room():
    verdict = cover_verdict(sustained_run(23.2, power_w=5.0))
    assert verdict.outcome is Outcome.FAIL and verdict.extra["ambient"]["raw_value"] < verdict.value


def test_the_spread_is_not_referred_but_states_its_room():
    spread = {v.name: v for v in thermal_check._thermal_verdicts(sustained_run(26.5), **COVER)}["cover_temp_spread"]
    assert spread.outcome is Outcome.PASS and spread.extra["ambient"]["applied"] is False
    assert spread.extra["ambient"]["mean_c"] == pytest.approx(26.5, abs=0.05)
    assert f"ambient {spread.extra['ambient']['mean_c']:.2f} degC" in spread.explanation


def test_a_bad_reference_ambient_in_a_profile_is_one_clear_error(tmp_path):
    lab = tmp_path / "lab.toml"
    lab.write_text('extends = "default"\n[metrics.back_cover_temperature_max.parameters]\n'
                   'ambient_window_c = [26.0, 28.0]\n')
    with pytest.raises(ConfigError, match="reference_ambient_c") as caught:
        thermal_check.ambient_reference(load_profile(lab).get(thermal_check.COVER_MAX))
    assert "SLA profile 'lab'" in str(caught.value) and "[26.0, 28.0]" in str(caught.value)


# --- 2. the nightly compares like with like ---------------------------------------------------
def _night(run_id: str, ambients: dict[str, float], power_w: float = 3.5, seed: int = 0) -> dict:
    """A nightly results.json record of two phones of one model, their cover verdicts judged by the check."""
    tests, duts = [], {}
    for k, (phone, ambient) in enumerate(ambients.items()):
        duts[phone] = {"serial": phone, "product_model": "Model A", "runtime_version": run_id}
        run = sustained_run(ambient, power_w=power_w, n=20, seed=seed + k, calibration=CALIBRATED)
        verdicts = thermal_check._thermal_verdicts(run,
                                                   **load_profile("nightly").pick(**thermal_check.ENTRIES))
        tests.append({"nodeid": "suites/test_sla_instruments.py::test_sustained_use", "dut": phone,
                      "outcome": "passed", "verdicts": [v.to_dict() for v in verdicts]})
    return {"run_id": run_id, "status": "complete", "duts": duts, "tests": tests}


def _cover_call(tonight: dict, accepted: dict) -> str:
    thresholds = {"back_cover_temperature_max": 0.03, "cover_temp_spread": 0.30}
    night = compare_runs(tonight, accepted, thresholds)
    return next(c for c in night.comparisons if c.metric == "cover_temp_max" and c.phone is None).call


def test_a_warm_night_is_no_thermal_regression_but_a_hotter_build_is():
    accepted = _night("accepted", {"A001": 24.6, "A002": 25.3})
    warm = _night("warm", {"A001": 26.6, "A002": 27.0}, seed=10)  # the same build, the room 2 degC warmer
    assert _cover_call(warm, accepted) != REGRESSED
    # +1.5 degC of cover rise at the same ambient: a build that really heats the cover more
    model = ThermalModel(0.0)
    per_watt = model.temperatures()["cover_a"]
    model.settle(model.heat("decode", 1.0))
    extra_w = 1.5 / (model.temperatures()["cover_a"] - per_watt)
    hotter = _night("hotter", {"A001": 24.6, "A002": 25.3}, power_w=3.5 + extra_w, seed=20)
    assert _cover_call(hotter, accepted) == REGRESSED


def test_a_night_outside_the_window_is_listed_not_called():
    """A room at 28 degC leaves the cover as read (INCONCLUSIVE): compared with referred values it
    would be called; it is shown without a call instead."""
    accepted = _night("accepted", {"A001": 24.6, "A002": 25.3})
    hot_room = _night("hot-room", {"A001": 28.0, "A002": 28.3}, seed=10)
    assert _cover_call(hot_room, accepted) == "not called"


def test_judged_as_read_the_warm_night_is_called_a_regression():
    """Negative control: the raw values (what the nightly compared before) call the warm night."""
    accepted = _night("accepted", {"A001": 24.6, "A002": 25.3})
    warm = _night("warm", {"A001": 26.6, "A002": 27.0}, seed=10)
    for night in (accepted, warm):
        for test in night["tests"]:
            for v in test["verdicts"]:
                if v["name"] == "cover_temp_max":
                    v["value"] = v["extra"]["ambient"]["raw_value"]
    assert _cover_call(warm, accepted) == REGRESSED


# --- 3. an emulated room that moves -----------------------------------------------------------
def test_hvac_warm_night_and_door_move_the_air_as_stated():
    hvac = Room(RoomConfig(25.0, "hvac", hvac_amplitude_c=0.6, hvac_period_s=1200.0), t0=100.0)
    assert hvac.air_c(100.0) == pytest.approx(25.0)
    assert hvac.air_c(100.0 + 300.0) == pytest.approx(25.6)  # a quarter period: the top of the cycle
    assert hvac.air_c(100.0 + 900.0) == pytest.approx(24.4)
    warm = Room(RoomConfig(24.0, "warm-night", ramp_c=2.0, ramp_s=3600.0))
    assert [warm.air_c(t) for t in (0.0, 1800.0, 3600.0, 9000.0)] == pytest.approx([24.0, 25.0, 26.0, 26.0])
    door = Room(RoomConfig(25.0, door_open_at_s=600.0, door_open_for_s=120.0, door_delta_c=-3.0))
    assert [door.air_c(t) for t in (599.0, 600.0, 719.0, 720.0)] == pytest.approx([25.0, 22.0, 22.0, 25.0])


def test_the_world_heats_the_phone_from_the_rooms_air_and_its_probe_reads_it():
    clock = SimClock()
    world = World(clock=clock, room=RoomConfig(25.0, door_open_at_s=60.0, door_open_for_s=1200.0,
                                               door_delta_c=-4.0))
    cover_before = world.surface_temperatures()["cover_a"]
    assert world.air_c() == world.surface_temperatures()["ambient"] == 25.0
    clock.advance(1300.0)  # the door stood open 20 min: the idle phone cooled with its air
    assert world.air_c() == pytest.approx(25.0)
    assert world.air_c(clock.now() - 100.0) == pytest.approx(21.0)
    assert cover_before - world.surface_temperatures()["cover_a"] > 2.0

    class Chamber:  # a chamber's model answers the same question (World.set_air)
        def air_c(self, t: float) -> float:
            return 40.0

    world.set_air(Chamber())
    assert world.surface_temperatures()["ambient"] == 40.0


def test_the_station_files_room_round_trips_through_the_writer(tmp_path):
    rooms = Rooms(RoomConfig(24.6, "hvac", hvac_amplitude_c=0.4, hvac_period_s=900.0, door_open_at_s=1800.0,
                             door_open_for_s=240.0, door_delta_c=-2.5),
                  {"b2": {"ambient_c": 25.5, "profile": "warm-night", "ramp_c": 1.5, "ramp_s": 5400.0}})
    config = StationConfig(name="rack", source=None, results_dir=tmp_path,
                           duts=[DutConfig("p1", "127.0.0.1:5555"), DutConfig("p2", "127.0.0.1:5557")],
                           bays=[BayConfig("b1", ["p1"]), BayConfig("b2", ["p2"])], rooms=rooms)
    written = station_toml(config, "round trip")
    (tmp_path / "station.toml").write_text(written)
    parsed = load_station(tmp_path / "station.toml")
    assert parsed.rooms == rooms and station_toml(parsed, "round trip") == written
    assert parsed.rooms.for_bay("b2") == RoomConfig(25.5, "warm-night", hvac_amplitude_c=0.4, hvac_period_s=900.0,
                                                    ramp_c=1.5, ramp_s=5400.0, door_open_at_s=1800.0,
                                                    door_open_for_s=240.0, door_delta_c=-2.5)
    emulated = EmulatedConfig(bays=2)
    start = StationConfig(name="emu", source=None, emulated=emulated,
                          rooms=Rooms(RoomConfig(25.0), {"bay2": {"ambient_c": 26.0}}))
    (tmp_path / "emu.toml").write_text(emulated_station_toml(start, emulated))
    assert load_station(tmp_path / "emu.toml").rooms.for_bay("bay2").ambient_c == 26.0


@pytest.mark.parametrize("room, message", [
    ('profile = "tropical"', "profile"),
    ('ambient_c = 250.0', "ambient_c"),
    ('profile = "steady"\nhvac_period_s = 600.0', "not a parameter of profile 'steady'"),
    ('profile = "hvac"\nhvac_period_s = 0', "hvac_period_s"),
    ('[room.bay.bay9]\nambient_c = 24.0', "no bay named 'bay9'"),
    ('colour = "blue"', "unknown key"),
])
def test_a_wrong_room_is_one_clear_error_naming_the_file_and_key(tmp_path, room, message):
    path = tmp_path / "station.toml"
    path.write_text(f'[emulated]\nbays = 2\n\n[room]\n{room}\n')
    with pytest.raises(ConfigError, match=message) as caught:
        load_station(path)
    assert str(path) in str(caught.value)


def test_the_default_emulated_bays_sit_at_their_racks_ambients_and_say_so():
    from phonebench.emulation.station import EmulatedStation

    with EmulatedStation(EmulatedConfig(bays=2), only_bay="bay2") as station:
        world = station.duts[0].phone.world
        assert world.air_c() == RACK_AMBIENTS_C[1]
        stated = station.rooms_stated()
        assert stated.for_bay("bay2").ambient_c == RACK_AMBIENTS_C[1]
        assert "ambient_c = 25.3" in station_toml(station.merge_into(StationConfig(name="e", source=None)), "x")


def test_bench_trend_shows_each_nights_room_beside_the_cover_series():
    import datetime as dt

    from phonebench.bench.report.trend_page import render_page
    from phonebench.bench.results.trend import HistoryPoint, series_of

    points = [HistoryPoint(f"n{i}", dt.datetime(2026, 1, 1 + i), phone, "Model A", "3.4.0", "cover_temp_max", "max",
                           39.5, "degC", "<=", 7, ambient_c=room)
              for i in range(6) for phone, room in (("A001", 24.6 + 0.3 * i), ("A002", 25.0 + 0.3 * i))]
    points += [HistoryPoint(f"n{i}", dt.datetime(2026, 1, 1 + i), "A001", "Model A", "3.4.0", "first_token_p99",
                            "p99", 130.0, "ms", "<=", 3) for i in range(6)]
    series = {s.metric: s for s in series_of(points)}
    assert series["cover_temp_max"].ambients == pytest.approx([24.8 + 0.3 * i for i in range(6)])
    assert series["first_token_p99"].ambients is None  # a statistic stated at no ambient has none
    page = render_page(list(series.values()), "history", dt.datetime(2026, 1, 8))
    assert "ambient that night" in page and "at 26.3 °C ambient" in page
