"""First contact (issue 30): a fresh machine with no Android platform tools, no adb server and no
root runs the bench with the adb it carries; with no way at all to reach a phone a run stops once,
before its tests, with one line and exit 11; a station file the emulator writes leaves the results
folder to whoever runs against it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from phonebench.bench.station.reach import Reach
from phonebench.core.errors import DeviceUnreachable
from phonebench.core.exits import PHONES_UNREACHABLE
from phonebench.core.station import StationConfig, load_station, parse_station
from phonebench.core.station_writer import station_toml
from phonebench.drivers.adb_binary import BUNDLED, ENV_ADB, bundled_adb, find_adb
from tests.adb_helpers import free_port

VENV_BIN = Path(sys.executable).parent


def test_with_no_adb_on_path_the_bundled_one_is_found(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv(ENV_ADB, raising=False)
    found = find_adb()
    if bundled_adb() is None:
        pytest.skip("adbutils carries no adb for this platform")
    assert found is not None and found.source == BUNDLED and os.access(found.path, os.X_OK)
    assert "bundled adb" in found.describe()


def test_phonebench_adb_none_forbids_starting_a_server(monkeypatch):
    monkeypatch.setenv(ENV_ADB, "none")
    assert find_adb() is None


def test_a_station_none_of_whose_phones_answers_is_one_line_with_its_cause_and_fix():
    error = DeviceUnreachable("adb server 127.0.0.1:5037 is down and there is no `adb` binary to start it",
                              hint="start an adb server")
    reach = Reach(unreachable={"EMU0001": error, "EMU0002": error})
    line = reach.stop_line()
    assert reach.none_reached and "\n" not in line
    assert line.count("is down") == 1 and line.endswith("fix: start an adb server")
    assert "EMU0001, EMU0002" in line
    assert not Reach(reached=["EMU0003"], unreachable={"EMU0001": error}).none_reached


def test_a_written_station_file_names_a_results_dir_only_when_its_source_did(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    written = station_toml(StationConfig(name="emulated", source=None, results_dir=tmp_path / "emu"), "test")
    assert "results_dir" not in written
    lab = tmp_path / "lab"
    lab.mkdir()
    monkeypatch.chdir(lab)  # a lab's pytest run in its own folder: its results go there
    assert parse_station({"station": {"name": "x"}, "emulated": {}}, source=tmp_path / "emu.toml").results_dir == lab / "reports"
    explicit = tmp_path / "lab.toml"
    explicit.write_text('[station]\nname = "lab"\nresults_dir = "out"\n[emulated]\n')
    config = load_station(explicit)
    assert config.results_dir == tmp_path / "out" and config.results_dir_given
    assert f'results_dir = "{tmp_path / "out"}"' in station_toml(config, "again")


def _bare_env(port: int, **extra: str) -> dict[str, str]:
    """A fresh machine's view: no adb on PATH (only the venv's scripts), nothing on the adb port."""
    env = {k: v for k, v in os.environ.items() if k not in ("ADB_SERVER_SOCKET", ENV_ADB, "PHONEBENCH_STATION")}
    env.update(PATH=str(VENV_BIN), ANDROID_ADB_SERVER_PORT=str(port), ADB_MDNS="0", **extra)
    return env


@pytest.mark.skipif(bundled_adb() is None, reason="adbutils carries no adb for this platform")
def test_bench_run_with_no_adb_on_path_starts_the_bundled_one_and_passes(tmp_path):
    port = free_port()
    env = _bare_env(port, HOME=str(tmp_path))
    try:
        done = subprocess.run([str(VENV_BIN / "bench"), "run", "--dut", "EMU0001", "-k", "identity", "-q"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    finally:
        subprocess.run([bundled_adb().path, "-P", str(port), "kill-server"], env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the bench starts one with the bundled adb" in done.stdout + done.stderr
    record = json.loads(next((tmp_path / "reports").glob("*/results.json")).read_text())
    assert record["duts"]["EMU0001"]["lock"].endswith(".lock")  # the lock that held the phone for the whole run


@pytest.mark.parametrize("bays", [[], ["--bays", "1"]], ids=["fleet", "one-bay"])
def test_no_way_to_reach_a_phone_stops_the_run_once_before_its_tests(tmp_path, bays):
    """The fleet's bays are checked before their workers start; one bay's pytest run checks its
    phone itself: either way one plain line (with its fix) and the adb notice once."""
    port = free_port()
    done = subprocess.run([str(VENV_BIN / "bench"), "run", "-k", "identity", "-q", *bays], cwd=tmp_path,
                          env=_bare_env(port, **{ENV_ADB: "none"}), capture_output=True, text=True, timeout=900)
    output = done.stdout + done.stderr
    assert done.returncode == PHONES_UNREACHABLE, output
    assert output.count("no phone of this run can be reached") == 1, output
    assert output.count(f"adb: no server on 127.0.0.1:{port} and no adb binary to start one") == 1, output
    assert "Traceback" not in output and "_pytest.outcomes.Exit" not in output and "WARNING" not in output, output
    record = json.loads(next((tmp_path / "reports").glob("*/results.json")).read_text())
    assert record["status"] == "incomplete" and record["tests"] == []
    assert any("stopped before any test" in p for p in record["problems"])


def test_plain_pytest_of_one_phone_with_no_way_to_reach_it_exits_11(tmp_path):
    station = tmp_path / "lab.toml"
    station.write_text('[station]\nname = "lab"\n[[dut]]\nname = "phone1"\nadb = "127.0.0.1:9"\n')
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--station", str(station),
                           str(Path(__file__).resolve().parent.parent / "suites" / "test_identity.py")],
                          cwd=tmp_path, env=_bare_env(free_port(), **{ENV_ADB: "none"}), capture_output=True,
                          text=True, timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == PHONES_UNREACHABLE, output
    assert output.count("no phone of this run can be reached") == 1, output
    record = json.loads(next((tmp_path / "reports").glob("*/results.json")).read_text())
    assert record["status"] == "incomplete" and not record["tests"]
