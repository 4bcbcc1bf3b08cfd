"""Nights differ (issue 51): each run of the emulated world draws its own noise from a seed the run
records, `--seed` replays one, and a unit keeps its own silicon whatever the night."""
from __future__ import annotations

import json

import pytest

from phonebench.bench.cli import main
from phonebench.core.errors import ConfigError
from phonebench.core.station import EmulatedConfig, EmulatedPhoneConfig, StationConfig, load_station, parse_station
from phonebench.core.station_writer import emulated_station_toml, station_toml
from phonebench.emulation.station import EmulatedStation
from phonebench.emulation.unit_variation import night_seed
from phonebench.fixtures.session import station_record

PHONES = [EmulatedPhoneConfig("EMU0001", npu_persona="SM8650-MP"), EmulatedPhoneConfig("EMU0002", npu_persona="SM8650-MP")]


def night(seed: int | None) -> tuple[int, dict[str, tuple]]:
    """One emulated night of two phones: its seed, and per phone its silicon and ten first tokens (ms)."""
    out = {}
    with EmulatedStation(EmulatedConfig(phones=PHONES, instruments=False, seed=seed)) as station:
        for dut in station.duts:
            phone, runtime = dut.phone, dut.phone.shell.commands["llmrt"]
            firsts = []
            for _ in range(10):
                lines = phone.shell.execute("llmrt generate --max-tokens 2 --prompt-tokens 32").stdout.splitlines()
                start, first = json.loads(lines[0]), json.loads(lines[1])
                firsts.append(1000 * (first["t"] - start["t"]))
            silicon = (phone.world.variation, runtime.onset_mv, phone.spec.serial, phone.props["ro.soc.model"])
            out[dut.name] = (silicon, firsts)
        assert station.seed is not None
        return station.seed, out


def test_two_nights_differ_in_noise_and_not_in_silicon_and_a_seed_replays_its_night():
    seed_a, a = night(20261206)
    _, replay = night(20261206)
    seed_b, b = night(7)
    assert (seed_a, seed_b) == (20261206, 7)
    assert replay == a  # the same seed: the same night, to the last digit
    for serial in a:
        assert a[serial][0] == b[serial][0]  # the unit's own silicon, whatever the night
        assert all(x != y for x, y in zip(a[serial][1], b[serial][1]))  # its noise, the night's
    assert a["EMU0001"][1] != a["EMU0002"][1]  # two units of one night do not share their noise


def test_a_night_nobody_seeded_draws_its_own_and_keeps_it_for_the_record(tmp_path):
    seeds = {night(None)[0] for _ in range(2)}
    assert len(seeds) == 2  # a fresh seed each night
    with EmulatedStation(EmulatedConfig(phones=PHONES[:1], instruments=False)) as station:
        merged = station.merge_into(StationConfig(name="emu", source=None))
    assert merged.emulated_seed == station.seed
    written = tmp_path / "live.toml"  # what `bench emulate --write-station` hands the run
    written.write_text(station_toml(merged, "a running station"))
    assert f"emulated_seed = {station.seed}" in written.read_text()
    parsed = load_station(written)
    assert parsed.emulated_seed == station.seed and station_record(parsed, "default")["seed"] == station.seed
    assert "seed" not in station_record(parse_station({"dut": [{"name": "p", "adb": "127.0.0.1:5555"}]}), "default")


def test_each_unit_derives_its_night_from_the_run_seed_and_its_serial():
    assert night_seed(5, 0, "EMU0001") == night_seed(5, 0, "EMU0001")  # another process derives the same
    assert len({night_seed(5, 0, "EMU0001"), night_seed(5, 0, "EMU0002"), night_seed(6, 0, "EMU0001"),
                night_seed(5, 1, "EMU0001")}) == 4
    assert night_seed(None, 3, "EMU0001") == 3  # a phone built on its own: its station seed alone


def test_the_station_file_states_a_seed_and_refuses_a_bad_one(tmp_path):
    start = StationConfig(name="emu", source=None)
    path = tmp_path / "emu.toml"
    path.write_text(emulated_station_toml(start, EmulatedConfig(phones=PHONES[:1]).for_night(42)))
    assert load_station(path).emulated.seed == 42
    assert EmulatedConfig(seed=3).for_night(None).seed == 3 and EmulatedConfig(seed=3).for_night(9).seed == 9
    assert EmulatedConfig().for_night(None).seed is not None
    path.write_text("[emulated]\nseed = -1\n")
    with pytest.raises(ConfigError, match=r"\[emulated\]\.seed: expected a seed from 0"):
        load_station(path)


def test_seed_with_a_station_of_hardware_is_one_line_and_exit_4(tmp_path, capsys):
    station = tmp_path / "lab.toml"
    station.write_text('[[dut]]\nname = "bay1"\nadb = "127.0.0.1:9"\ntransport = "direct"\n')
    assert main(["run", "--station", str(station), "--seed", "3", "--results-dir", str(tmp_path / "r")]) == 4
    err = capsys.readouterr().err.strip()
    assert err == f"bench: error: --seed sets an emulated station's noise; {station} has real phones (leave it out)"
    assert not (tmp_path / "r").exists()
