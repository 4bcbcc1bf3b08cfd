"""The lab's path, end to end: an emulated station started on its own (`bench emulate
--write-station`), a station file of addresses, the default adb-server transport, several phones,
and `bench run --station` in another folder. Every phone gets every claim it is wired for."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from phonebench.core.station import load_station

REPO = Path(__file__).resolve().parent.parent
SUITES = REPO / "suites"
TWO_PHONES = """[station]
name = "two-phones"

[emulated]

[[emulated.phone]]
serial = "EMU-L1"
npu_persona = "SM8650-MP"

[[emulated.phone]]
serial = "EMU-L2"
npu_persona = "MT6989-MP"
seed = 5
"""


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PHONEBENCH_STATION", None)
    return env


@pytest.fixture
def emulated_station(tmp_path: Path):
    """`bench emulate` in its own process; yields the station file it writes."""
    wanted, live = tmp_path / "emulated.toml", tmp_path / "live.toml"
    wanted.write_text(TWO_PHONES)
    proc = subprocess.Popen([sys.executable, "-m", "phonebench.bench.cli", "emulate", "--station", str(wanted),
                             "--write-station", str(live)], cwd=tmp_path, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while not live.exists():
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, "bench emulate wrote no station file"
            time.sleep(0.1)
        yield live
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0  # SIGTERM stops the station cleanly


def test_the_written_station_file_is_a_bay_per_phone_reached_through_the_adb_server(emulated_station):
    station = load_station(emulated_station)
    assert [d.transport for d in station.duts] == ["server", "server"]
    assert [b.name for b in station.bays] == ["bay1", "bay2"]
    for bay in station.bays:
        assert set(bay.wiring) == {"scope", "supply", "thermal", "stimulus", "clock", "fixture"}
    clocks = [station.inventory[b.wiring["clock"].instrument] for b in station.bays]
    assert {c.family for c in clocks} == {"phonebench-clock"} and len({c.address for c in clocks}) == 2
    assert not any(i.shared for i in station.inventory.values())  # nothing shared unless the file says so
    from phonebench.bench.station.owner import open_configured

    serials = set()
    for bay in station.bays:  # each bay's unit is an instrument of its own, with its own identity
        driver = open_configured(station.inventory[bay.wiring["thermal"].instrument])
        try:
            serials.add(driver.identity.serial)
        finally:
            driver.close()
    assert len(serials) == 2


def test_every_phone_runs_the_instrument_and_the_token_claims_through_the_station_file(tmp_path, emulated_station):
    lab = tmp_path / "lab"
    lab.mkdir()
    proc = subprocess.run([sys.executable, "-m", "phonebench.bench.cli", "run", "--station", str(emulated_station), "-q",
                           str(SUITES / "test_sla_instruments.py"), str(SUITES / "test_sla_runtime.py"),
                           "-k", "sustained_and_peak_power or first_token"],
                          cwd=lab, env=_env(), capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads((lab / "reports" / "latest" / "results.json").read_text())  # where the lab ran it
    assert data["status"] == "complete"
    verdicts = {(t["dut"], v["name"]): v for t in data["tests"] for v in t["verdicts"]}
    for dut in ("EMU-L1", "EMU-L2"):
        for name in ("power_sustained_mean", "first_token_p99"):
            verdict = verdicts.get((dut, name))
            assert verdict is not None, f"{dut}: no {name} verdict"
            assert (verdict["outcome"], verdict["evidence"]) == ("pass", "measured"), verdict


def test_plain_pytest_over_every_bay_times_each_phone_on_its_bays_clock(tmp_path, emulated_station):
    """The lab's own pytest in another folder, a relative station path, no --bay: every phone's
    token claims are timed on its own bay's clock (an emulated bay's world keeps its own time;
    the host's clock would leave them INVALID) and each phone records its lab time. The station
    file the emulator wrote names no results folder, so the run lands in the lab's own folder."""
    lab = tmp_path / "lab"
    lab.mkdir()
    relative = os.path.relpath(emulated_station, lab)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--station", relative,
                           str(SUITES / "test_sla_runtime.py"), "-k", "first_token"],
                          cwd=lab, env=_env(), capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(next((lab / "reports").glob("*/results.json")).read_text())
    assert not (emulated_station.parent / "reports").exists()  # nothing in the emulator's folder
    verdicts = {t["dut"]: v for t in data["tests"] for v in t["verdicts"] if v["name"] == "first_token_p99"}
    assert set(verdicts) == {"EMU-L1", "EMU-L2"}
    for dut, verdict in verdicts.items():
        assert (verdict["outcome"], verdict["evidence"]) == ("pass", "measured"), (dut, verdict)
        assert data["lab_time_s"][dut] > 0
