"""`bench run --place` without a coordinator: the station file a place's run is given outlives the
run (its record and messages name it), and shared instruments are waited for as long as the place."""
from __future__ import annotations

import argparse
import contextlib
import os

from phonebench.core.station import load_station
from phonebench.bench.lab import run as lab_run
from phonebench.bench.lab.resources import INSTRUMENT, PHONE
from phonebench.drivers.locks import ENV_WAIT

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


def place_args(tmp_path, **kw) -> argparse.Namespace:
    return argparse.Namespace(place="rack7-a", places=None, place_wait=900.0, results_dir=str(tmp_path / "out"),
                              station=None, **kw)


def test_the_place_station_file_outlives_the_run_and_shared_instruments_wait_as_long_as_the_place(
        tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_WAIT, raising=False)
    seen = {}

    def run_station(args: argparse.Namespace) -> int:
        seen["station"], seen["wait"], seen["results_dir"] = args.station, os.environ.get(ENV_WAIT), args.results_dir
        return 0

    lab = FakeLab()
    assert lab_run._one_place(place_args(tmp_path), lab, run_station) == 0
    assert lab.released
    station = load_station(seen["station"])  # still there after the run, for messages and the record
    assert seen["station"] == str(tmp_path / "out" / "places" / "rack7-a.toml")
    assert station.instruments["thermal"].shared and station.duts[0].address == "127.0.0.1:5555"
    assert seen["wait"] == "900" and ENV_WAIT not in os.environ  # during the run only
    assert seen["results_dir"] == str((tmp_path / "out").resolve())


def test_a_lab_set_lock_wait_is_kept(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_WAIT, "5")
    seen = []
    lab_run._one_place(place_args(tmp_path), FakeLab(), lambda args: seen.append(os.environ[ENV_WAIT]) or 0)
    assert seen == ["5"] and os.environ[ENV_WAIT] == "5"
