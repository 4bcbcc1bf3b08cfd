"""A killed run heals at the next start (bench/store/heal.py): marked incomplete in results.json
and the store, the store brought level with results.json. A recorder "dies" here by letting go of
its recording lock, as the system does for a killed process; whole killed `bench run` processes
are tests/test_killed_runs.py."""
from __future__ import annotations

import json
import os
from pathlib import Path

from phonebench.bench.cli import main
from phonebench.core.records import TestRecord
from phonebench.core.judge import compare
from phonebench.bench.results.run_record import RECORDING_LOCK, RunRecorder, recorder_alive
from phonebench.bench.store import StoreSink, open_store
from phonebench.bench.store.heal import KILLED_NOTE, heal_killed_runs


def _recording(folder: Path, run_id: str, tests: int) -> RunRecorder:
    rec = RunRecorder(folder, {"name": "rack"}, run_id=run_id, sinks=[StoreSink(folder / "results.sqlite", folder)])
    rec.add_dut("bay1", {"name": "bay1", "serial": "S1"})
    for i in range(tests):
        rec.add_test(TestRecord(f"t::{i}", "bay1", "passed", 0.1, verdicts=[compare("power_mean", 4.0, "W", 4.2)]))
    return rec


def _killed(rec: RunRecorder) -> None:
    """What the system does for a killed recorder: its lock goes; results.json stays as it was."""
    os.close(rec._lock)
    rec._lock = None


def _store_tests(folder: Path, run_id: str) -> tuple[str, list[str]]:
    with open_store(folder / "results.sqlite") as store:
        data = store.load_run(run_id).data
    return data["status"], [t["nodeid"] for t in data["tests"]]


def test_a_killed_run_is_marked_incomplete_and_its_store_brought_level(tmp_path: Path) -> None:
    rec = _recording(tmp_path, "killed", tests=3)
    rec.record.tests.append(TestRecord("t::3", "bay1", "passed", 0.1))  # on disk, killed before the store took it
    rec.data = rec.record.to_dict()
    rec._write_file()
    assert recorder_alive(rec.run_dir) is True
    with open_store(tmp_path / "results.sqlite") as store:
        assert heal_killed_runs(store, tmp_path) == []  # control: a live recorder is left alone
    _killed(rec)
    assert recorder_alive(rec.run_dir) is False
    with open_store(tmp_path / "results.sqlite") as store:
        healed = heal_killed_runs(store, tmp_path)
        assert heal_killed_runs(store, tmp_path) == []  # once
    assert [(h.run_id, h.tests_stored, h.tests_added) for h in healed] == [("killed", 4, 1)]
    assert "was killed: marked incomplete" in str(healed[0]) and "4 tests" in str(healed[0])
    on_disk = json.loads(rec.results_path.read_text())
    assert on_disk["status"] == "incomplete" and KILLED_NOTE in on_disk["problems"]
    assert _store_tests(tmp_path, "killed") == ("incomplete", [t["nodeid"] for t in on_disk["tests"]])
    assert not (rec.run_dir / RECORDING_LOCK).exists()


def test_a_run_killed_before_the_store_knew_it_is_imported(tmp_path: Path) -> None:
    rec = RunRecorder(tmp_path, {"name": "rack"}, run_id="unstored")  # no sink: as if killed inside the first commit
    rec.add_test(TestRecord("t::0", None, "passed", 0.1))
    _killed(rec)
    with open_store(tmp_path / "results.sqlite") as store:
        healed = heal_killed_runs(store, tmp_path)
    assert [(h.run_id, h.tests_stored) for h in healed] == [("unstored", 1)]
    assert _store_tests(tmp_path, "unstored") == ("incomplete", ["t::0"])


def test_a_finished_run_leaves_no_lock_and_is_never_touched(tmp_path: Path) -> None:
    rec = _recording(tmp_path, "done", tests=2)
    rec.finish()
    before = rec.results_path.read_text()
    assert not (rec.run_dir / RECORDING_LOCK).exists() and recorder_alive(rec.run_dir) is None
    with open_store(tmp_path / "results.sqlite") as store:
        assert heal_killed_runs(store, tmp_path) == []
    assert rec.results_path.read_text() == before
    assert _store_tests(tmp_path, "done")[0] == "complete"


def test_the_next_recording_run_heals_and_bench_runs_says_so(tmp_path: Path, capsys) -> None:
    first = _recording(tmp_path, "first", tests=1)
    _killed(first)
    second = _recording(tmp_path, "second", tests=1)  # its store sink heals before its own first record
    assert [str(h) for h in second.sinks[0].healed] and second.sinks[0].healed[0].run_id == "first"
    assert _store_tests(tmp_path, "first")[0] == "incomplete"
    _killed(second)
    assert main(["runs", "--results-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "healed: run second was killed: marked incomplete" in out
    assert [line.split()[4] for line in out.splitlines() if line.startswith(("first", "second"))] == \
        ["incomplete", "incomplete"]
