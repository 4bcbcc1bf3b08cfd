"""The run folder: results.json rewritten atomically after each test, raw data kept, latest link."""
from __future__ import annotations

import json

import numpy as np

from phonebench.core.records import TestRecord
from phonebench.bench.results.run_record import RunRecorder
from phonebench.core.verdict import Outcome
from phonebench.core.judge import compare


def test_every_test_is_on_disk_before_the_next(tmp_path):
    rec = RunRecorder(tmp_path, {"name": "s"}, run_id="r1")
    assert json.loads(rec.results_path.read_text())["status"] == "running"
    rec.add_dut("bay1", {"serial": "X"})
    rec.add_test(TestRecord("t::a", "bay1", "passed", 0.1, verdicts=[compare("v", 1.0, "ms", 2.0)]))
    on_disk = json.loads(rec.results_path.read_text())  # as a killed run would leave it
    assert on_disk["status"] == "running"
    assert on_disk["tests"][0]["verdicts"][0]["outcome"] == "pass"
    assert on_disk["duts"]["bay1"]["serial"] == "X"
    rec.add_test(TestRecord("t::b", "bay1", "failed", 0.1, verdicts=[compare("v", 3.0, "ms", 2.0)]))
    rec.finish()
    data = json.loads(rec.results_path.read_text())
    assert data["status"] == "complete" and data["finished"]
    assert data["summary"] == {"passed": 1, "failed": 1, "verdicts_failed": 1}
    assert (tmp_path / "latest").resolve() == rec.run_dir.resolve()
    assert not list(rec.run_dir.glob(".results-*"))  # no temp files left behind


def test_raw_data_is_kept_and_reloadable(tmp_path):
    rec = RunRecorder(tmp_path, {"name": "s"}, run_id="r2")
    path = rec.save_raw("suites/test_x.py::test_y[bay1]", "trace", {"t": np.arange(3.0), "i": np.ones(3)})
    assert path.endswith(".npz")
    loaded = np.load(rec.run_dir / path)
    assert loaded["t"].tolist() == [0.0, 1.0, 2.0]
    json_path = rec.save_raw("suites/test_x.py::test_y[bay1]", "zones", {"skin": 30.5})
    assert json.loads((rec.run_dir / json_path).read_text()) == {"skin": 30.5}


def test_verdicts_store_non_finite_values_as_null():
    verdict = compare("temp", float("nan"), "degC", 41.7)
    assert verdict.outcome is Outcome.INVALID
    assert verdict.to_dict()["value"] is None


def test_disk_full_keeps_measuring_and_says_what_was_saved(tmp_path, monkeypatch):
    rec = RunRecorder(tmp_path, {"name": "s"}, run_id="r3")
    rec.add_test(TestRecord("t::a", None, "passed", 0.1))

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("phonebench.core.files.tempfile.mkstemp", full)
    rec.add_test(TestRecord("t::b", None, "passed", 0.1))  # must not raise into the test run
    assert len(rec.data["tests"]) == 2
    monkeypatch.undo()
    rec.finish()
    data = json.loads(rec.results_path.read_text())
    assert len(data["tests"]) == 2
    assert "No space left on device" in data["problems"][0]
