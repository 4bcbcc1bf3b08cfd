"""`bench run --place` without a coordinator: the station file a place's run is given outlives the
run (its record and messages name it), shared instruments are waited for as long as the place, and
a plan against a coordinator nobody answers at says so."""
from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from phonebench.core.station import load_station
from phonebench.bench.lab import run as lab_run
from phonebench.bench.lab.resources import INSTRUMENT, PHONE
from phonebench.bench.station.request import LabPlaces, RunRequest, Selection, StationRef, build_request
from phonebench.drivers.locks import ENV_WAIT

REPO = Path(__file__).resolve().parent.parent

RESOURCES = {
    "phone": {"cls": PHONE, "params": {"name": "phone1", "adb": "127.0.0.1:5555", "expected_serial": "EMU0001"}},
    "thermal": {"cls": INSTRUMENT, "params": {"role": "thermal", "name": "probes", "family": "generic-ascii",
                                             "address": "socket://127.0.0.1:7000", "channel": "1", "shared": True}},
}


class FakeLab:
    def __init__(self) -> None:
        self.released = False

    @contextlib.contextmanager
    def held(self, place: str, wait_s: float):
        try:
            yield RESOURCES
        finally:
            self.released = True


def place_request(tmp_path: Path, **places: object) -> RunRequest:
    """`bench run --place rack7-a --results-dir OUT --place-wait 900` as its request."""
    given = {"coordinator": "lab:20408", "place": "rack7-a", "pattern": None, "wait_s": 900.0, **places}
    return build_request(StationRef(places=LabPlaces(**given)), Selection(),
                         results_dir=str(tmp_path / "out"))


def test_the_place_station_file_outlives_the_run_and_shared_instruments_wait_as_long_as_the_place(
        tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_WAIT, raising=False)
    request = place_request(tmp_path)
    lab = FakeLab()
    with lab_run.place_held(request, request.station.places, lab) as on_place:
        assert not lab.released
        assert os.environ.get(ENV_WAIT) == "900"
    assert lab.released and ENV_WAIT not in os.environ  # waited for during the run only
    station = load_station(on_place.station.file)  # still there after the run, for messages and the record
    assert on_place.station.file == (tmp_path / "out").resolve() / "places" / "rack7-a.toml"
    assert station.instruments["thermal"].shared and station.duts[0].address == "127.0.0.1:5555"
    assert on_place.results == request.results and on_place.profile == request.profile


def test_a_lab_set_lock_wait_is_kept(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_WAIT, "5")
    request = place_request(tmp_path)
    with lab_run.place_held(request, request.station.places, FakeLab()):
        assert os.environ[ENV_WAIT] == "5"
    assert os.environ[ENV_WAIT] == "5"


@pytest.mark.skipif(not (Path(sys.executable).parent / "labgrid-client").exists(), reason="labgrid not installed (lab extra)")
@pytest.mark.slow  # whole bench processes waiting out a coordinator that never answers
@pytest.mark.parametrize("command", [["plan", "--places", "rack7-*"], ["run", "--plan", "--place", "rack7-a"]])
def test_a_plan_against_an_unreachable_coordinator_names_it_and_exits_2(tmp_path, command):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    done = subprocess.run([sys.executable, "-m", "phonebench.bench.cli", *command, "--coordinator", address],
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [f"bench: error: cannot reach the labgrid coordinator at {address}",
                                        "  hint: start labgrid-coordinator there, or pass --coordinator HOST:PORT "
                                        "(or set LG_COORDINATOR)"]


def test_places_run_at_once_up_to_jobs(tmp_path, monkeypatch, capsys):
    running, most = set(), []

    class Child:
        def __init__(self, command: list[str]) -> None:
            self.place, self.polls, self.returncode = command[-1], 0, None
            running.add(self.place)
            most.append(len(running))

        def poll(self) -> int | None:
            self.polls += 1
            if self.polls == 2:
                running.discard(self.place)
                self.returncode = 1 if self.place == "rack7-b" else 0
            return self.returncode

    class Places:
        def select(self, pattern: str) -> list[str]:
            return ["rack7-a", "rack7-b", "rack7-c"]

    monkeypatch.setattr(lab_run.subprocess, "Popen", Child)
    monkeypatch.setattr(lab_run.time, "sleep", lambda s: None)
    request = dataclasses.replace(place_request(tmp_path, place=None, pattern="rack7-*", wait_s=60.0), jobs=2)
    assert lab_run.run_each_place(request, request.station.places, Places()) == 1  # the worst exit code
    assert max(most) == 2 and len(most) == 3
    assert capsys.readouterr().out.splitlines() == [
        "place rack7-a: exit code 0", "place rack7-b: exit code 1", "place rack7-c: exit code 0"]
