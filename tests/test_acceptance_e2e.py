"""`bench accept` end to end on an emulated fixture: what stops a unit before testing (wrong or
unreadable serial, a calibration that expired), the faults mid-test (phone removed, instrument
lost, the bench killed), retests — and that every attempt is stored and never a PASS by mistake.
A PASS and a FAIL with its reason are shown by the line test (tests/test_line.py)."""
from __future__ import annotations

import datetime as dt
import json
import signal
import subprocess
import sys
import time
from dataclasses import replace

import pytest

from phonebench.bench.procedures.acceptance.attempts import KILLED_REASON, AttemptBook
from phonebench.bench.procedures.acceptance.runner import AcceptanceStation
from phonebench.bench.procedures.calibration.book import CalibrationBook
from phonebench.core.paths import SOURCE_ROOT as REPO
from phonebench.core.station import load_station
from phonebench.core.station_writer import write_station
from phonebench.bench.store import open_store
from phonebench.emulation.device import PhoneSpec
from tests.production_helpers import calibrate, line_station


@pytest.fixture(scope="module")
def fixture(tmp_path_factory):
    """A calibrated emulated fixture (holding unit LN070001) and its station file."""
    with line_station(tmp_path_factory.mktemp("accept")) as (line, station_file, results):
        records = calibrate(line, station_file)
        yield line, station_file, results, records


def attempts(results, serial):
    with open_store(results / "results.sqlite") as store:
        return AttemptBook(store).attempts(serial=serial)


def run_folders(results):
    return {p.name for p in results.iterdir() if p.is_dir()} if results.exists() else set()


def test_a_wrong_or_unreadable_serial_stops_before_any_test(fixture):
    line, station_file, results, _ = fixture
    line.load(line.units[0])
    before = run_folders(results)
    with AcceptanceStation(station_file) as station:
        wrong = station.accept("LN079999")
        assert (wrong.outcome, wrong.exit_code) == ("wrong-unit", 3)
        assert "phone on the fixture is LN070001, not the scanned LN079999" in wrong.reason
        for scanned in ("", "LN07 0001", "x"):
            garbled = station.accept(scanned)
            assert (garbled.outcome, garbled.exit_code) == ("incomplete", 4) and "unreadable" in garbled.reason
    assert run_folders(results) == before  # nothing was tested
    stored = attempts(results, "LN079999")
    assert [(a.attempt, a.outcome, a.read_serial) for a in stored] == [(1, "wrong-unit", "LN070001")]


def test_a_phone_whose_serial_cannot_be_read_is_incomplete(fixture):
    line, station_file, _results, _ = fixture
    line.unload()  # the fixture is empty: nothing answers on its ADB address
    try:
        with AcceptanceStation(station_file) as station:
            result = station.accept("LN070001")
        assert result.outcome == "incomplete" and result.reason.startswith("serial unreadable")
    finally:
        line.load(line.units[0])


def test_an_expired_calibration_blocks_acceptance(fixture):
    _line, station_file, results, records = fixture
    zero = next(r for r in records if r.procedure == "supply-zero")
    with open_store(results / "results.sqlite") as store:
        aged = CalibrationBook(store).set_due(zero.id, dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1),
                                              by="test", reason="age the record past its due date")
    try:
        with AcceptanceStation(station_file) as station:
            result = station.accept("LN070001")
        assert (result.outcome, result.exit_code) == ("refused", 5)
        assert "supply-zero calibration" in result.reason and "expired" in result.reason
        assert attempts(results, "LN070001")[-1].outcome == "refused"
    finally:
        with open_store(results / "results.sqlite") as store:
            CalibrationBook(store).set_due(aged.id, zero.due, by="test", reason="restore the due date")


def test_a_phone_removed_mid_test_is_incomplete_and_its_finished_results_are_kept(fixture, tmp_path):
    line, station_file, results, _ = fixture
    # The phone's adbd dies the first time a check idles it (`sleep`: the fingerprint's pause that
    # times the station clock against the phone's): pulled off the fixture mid-test. The fixture's
    # phone gets the station file's recovery_timeout_s of 5 s: the bench waits that long for it to
    # come back (180 s by default), then stops the unit the same way.
    config = load_station(station_file)
    short_wait = write_station(tmp_path / "station.toml", replace(
        config, duts=[replace(d, recovery_timeout_s=5.0) for d in config.duts]), "a phone that is not coming back")
    line.load(PhoneSpec(serial="GONE0001", seed=41, faults=["kill-on:sleep"]))
    try:
        with AcceptanceStation(short_wait) as station:
            result = station.accept("GONE0001")
    finally:
        line.load(line.units[0])
    assert (result.outcome, result.exit_code) == ("incomplete", 4)
    assert result.reason.startswith("Overflow adapter installed") and "connect" in result.reason
    data = json.loads((result.attempts[0].run_dir / "results.json").read_text())
    assert data["status"] == "incomplete"
    finished = [t["nodeid"] for t in data["tests"] if t["outcome"] == "passed"]
    assert any("test_identity" in n for n in finished), finished  # what ran before it died is kept
    assert not any("test_power" in t["nodeid"] or "test_voice" in t["nodeid"]
                   for t in data["tests"])  # stopped: nothing waited on a gone phone
    with open_store(results / "results.sqlite") as store:
        stored = store.load_run(result.attempts[0].run_id).data
        assert stored["status"] == "incomplete" and len(stored["tests"]) == len(data["tests"])
    assert [a.outcome for a in attempts(results, "GONE0001")] == ["incomplete"]


def test_an_instrument_lost_mid_test_is_incomplete(tmp_path):
    with line_station(tmp_path) as (line, station_file, results):
        calibrate(line, station_file)
        sleep = line.phone.shell.commands["sleep"]

        def supply_dies_then_sleep(argv, ctx):  # the power analyzer drops off the network mid-check
            line.stop_instrument("supply")
            return sleep(argv, ctx)

        line.phone.shell.register("sleep", supply_dies_then_sleep)
        with AcceptanceStation(station_file) as station:
            result = station.accept("LN070001")
    assert (result.outcome, result.exit_code) == ("incomplete", 4)
    assert "InstrumentError" in result.reason and "supply keysight-n6705c" in result.reason


def test_a_power_cut_mid_run_leaves_the_unit_incomplete_with_its_finished_results(fixture):
    line, station_file, results, _ = fixture
    line.load(line.units[0])
    bench = subprocess.Popen([sys.executable, "-m", "phonebench.bench.cli", "accept", "--station", str(station_file),
                              "--serial", "LN070001"], cwd=REPO, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        run_dir = _wait_for_tests(results, bench, tests=3)
    finally:
        bench.send_signal(signal.SIGKILL)  # the power cut
        bench.wait()
    data = json.loads((run_dir / "results.json").read_text())
    assert data["status"] == "running" and len(data["tests"]) >= 3  # as it was when the power went
    last = attempts(results, "LN070001")[-1]
    assert last.outcome == "incomplete" and last.reason == KILLED_REASON and last.run_id == run_dir.name
    with open_store(results / "results.sqlite") as store:
        stored = store.load_run(run_dir.name).data
        # The store follows results.json test by test: a kill between the file and the store's
        # commit leaves it one test behind, never more, and store-import makes them equal.
        assert stored["status"] == "incomplete" and len(stored["tests"]) >= len(data["tests"]) - 1
        store.import_folder(run_dir)
        assert [t["nodeid"] for t in store.load_run(run_dir.name).data["tests"]] == \
            [t["nodeid"] for t in data["tests"]]


def _wait_for_tests(results, process, tests: int, limit_s: float = 120.0):
    """The run folder of the bench process once its results.json holds `tests` tests (a poll
    with a generous limit, not a timing assertion)."""
    deadline = time.monotonic() + limit_s
    known = run_folders(results)
    while time.monotonic() < deadline:
        assert process.poll() is None, "the bench finished before it could be cut off"
        for name in run_folders(results) - known:
            path = results / name / "results.json"
            try:
                if len(json.loads(path.read_text())["tests"]) >= tests:
                    return results / name
            except (OSError, ValueError, KeyError):
                pass  # not written yet, or mid-rename
        time.sleep(0.05)
    raise AssertionError(f"no run reached {tests} tests within {limit_s} s")


def test_a_retestable_failure_is_retested_and_every_attempt_is_stored(fixture):
    line, station_file, results, _ = fixture
    line.load(PhoneSpec(serial="SLOW0001", seed=43, sla_persona="slow"))  # answers too late
    try:
        with AcceptanceStation(station_file) as station:
            result = station.accept("SLOW0001")
    finally:
        line.load(line.units[0])
    assert (result.outcome, result.exit_code) == ("fail", 1)
    assert result.reason.startswith("Voice latency sanity check: acceptance_voice_latency_max")
    assert len(result.attempts) == 2 and not result.first_pass
    retest = result.attempts[1]
    # The first attempt stopped at the late answer; the retest runs it and what it did not reach.
    assert "test_voice_latency_sanity" in retest.tests[0] and "test_power_sanity" in retest.tests[1]
    assert result.attempts[0].not_run == retest.tests[1:]
    stored = attempts(results, "SLOW0001")
    assert [(a.attempt, a.outcome, a.retest_of) for a in stored] == [(1, "fail", None), (2, "fail", 1)]
    assert stored[0].run_id != stored[1].run_id and stored[1].details["tests"] == retest.tests


def test_an_unreadable_store_holds_the_unit_instead_of_refusing_it_as_uncalibrated(fixture, monkeypatch):
    """The calibration book cannot be read (a store that is truly unreachable): the unit is held
    with one reason an operator can act on, never refused as uncalibrated."""
    from phonebench.bench.store import StoreError

    line, station_file, _results, _ = fixture
    line.load(line.units[0])

    def unreachable(*args, **kwargs):
        raise StoreError("cannot use PostgreSQL results store postgresql://db/line: connection refused")

    with AcceptanceStation(station_file) as station:
        monkeypatch.setattr(CalibrationBook, "latest", unreachable)
        result = station.accept("LN070001")
    assert (result.outcome, result.exit_code) == ("incomplete", 4)
    assert result.reason.startswith("held, not tested") and "connection refused" in result.reason
    assert "uncalibrated" not in result.reason and "refused" != result.outcome
