"""Calibration in bench runs: every result carries its instruments' calibration state and the
corrections applied; lab runs on an uncalibrated or expired station warn and say so; runs with
--require-calibration (acceptance) refuse to start."""
from __future__ import annotations

import datetime as dt
import json

import pytest

from phonebench.bench.procedures.calibration.book import CalibrationBook
from phonebench.bench.procedures.calibration.state import REFUSED_EXIT
from phonebench.core.paths import SOURCE_ROOT as REPO
from phonebench.bench.store import open_store
from tests.production_helpers import calibrate, line_station

TEST = "suites/test_instruments.py::test_instrument_identifies_itself"


def bench_run(station_file, results, run_id, *extra: str) -> tuple[int, dict | None]:
    code = pytest.main([str(REPO / TEST), "-p", "phonebench", "--rootdir", str(REPO), "-p", "no:cacheprovider",
                        "-q", "--station", str(station_file), "--results-dir", str(results), "--run-id", run_id,
                        *extra])
    path = results / run_id / "results.json"
    return int(code), json.loads(path.read_text()) if path.exists() else None


@pytest.fixture(scope="module")
def line(tmp_path_factory):
    with line_station(tmp_path_factory.mktemp("cal-plugin")) as found:
        yield found


def test_an_uncalibrated_station_runs_lab_tests_marked_uncalibrated_and_refuses_acceptance(line, capsys):
    _line, station_file, results = line
    code, data = bench_run(station_file, results, "lab-uncalibrated")
    assert code == 0
    scope = data["instruments"]["scope"]["calibration"]
    assert scope["state"] == "uncalibrated" and scope["corrections"] == {}
    assert any("never calibrated (scope-deskew)" in p for p in scope["problems"])
    assert data["instruments"]["stimulus"]["calibration"]["state"] == "not-required"
    verdict_cal = [t for t in data["tests"] if "[scope]" in t["nodeid"]][0]
    assert "WARNING scope is uncalibrated" in capsys.readouterr().out
    code, data = bench_run(station_file, results, "acceptance-uncalibrated", "--require-calibration")
    assert code == REFUSED_EXIT and data["tests"] == [] and data["status"] == "incomplete"
    assert verdict_cal["outcome"] == "passed"


def test_a_calibrated_station_applies_and_records_its_corrections_and_expiry_blocks_acceptance(line):
    emulated, station_file, results = line
    records = calibrate(emulated, station_file)
    assert all(r.passed for r in records)
    code, data = bench_run(station_file, results, "acceptance-calibrated", "--require-calibration")
    assert code == 0
    supply = data["instruments"]["supply"]["calibration"]
    assert supply["state"] == "calibrated" and supply["corrections"]["current_zero_a"] == pytest.approx(1.8e-3,
                                                                                                       abs=1e-4)
    scope = data["instruments"]["scope"]["calibration"]
    assert set(scope["corrections"]) == {"ch2_deskew_s", "fixture_delay_s"} and len(scope["certificates"]) == 2
    # The store keeps the same calibration entry with the run.
    with open_store(results / "results.sqlite") as store:
        stored = store.load_run("acceptance-calibrated").data
        assert stored["instruments"]["supply"]["calibration"] == supply
        book = CalibrationBook(store)
        zero = next(r for r in records if r.procedure == "supply-zero")
        book.set_due(zero.id, dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=1), by="test",
                     reason="age the record past its due date")
    code, data = bench_run(station_file, results, "acceptance-expired", "--require-calibration")
    assert code == REFUSED_EXIT and data["tests"] == []
    code, data = bench_run(station_file, results, "lab-expired")
    assert code == 0 and data["instruments"]["supply"]["calibration"]["state"] == "expired"
    assert data["instruments"]["supply"]["calibration"]["corrections"]  # still corrected, marked expired


def test_a_session_parses_its_station_file_once(line, monkeypatch):
    """Collection's plan, the opened station and the run record all read one parse of --station
    (issue 34): a file parsed twice can be read differently if it changes mid-session."""
    import phonebench.core.station as station_module

    parses = []
    parse = station_module.parse_station
    monkeypatch.setattr(station_module, "parse_station", lambda *a, **k: parses.append(a[1]) or parse(*a, **k))
    _line, station_file, results = line
    code, data = bench_run(station_file, results, "one-parse")
    assert code == 0 and data["status"] == "complete"
    assert parses == [str(station_file)]
