"""Merging bay workers' folders into one run: a test that takes no DUT (a bay's own instrument
check) has the same id in every bay, and each bay's verdicts must still point at its own raw data."""
from __future__ import annotations

import json
from pathlib import Path

from phonebench.bench.results.aggregate import BayOutcome, bay_folder, merge_bays
from phonebench.core.records import RunRecord, TestRecord
from phonebench.core.judge import compare

NODE = "suites/test_instruments.py::test_instrument_identifies_itself[scope]"
RAW = "raw/suites_test_instruments.py_test_instrument_identifies_itself_scope/identity.json"


def _bay(run_dir: Path, bay: str) -> None:
    folder = bay_folder(run_dir, bay)
    (folder / Path(RAW).parent).mkdir(parents=True)
    (folder / RAW).write_text(json.dumps({"serial": f"SN-{bay}"}))
    verdict = compare("scope_identity", 1, "bool", 1, "==", raw=(RAW,))
    record = RunRecord(run_id=bay, started="2026-12-01T00:00:00+00:00", station={"name": "s"}, status="complete",
                       finished="2026-12-01T00:10:00+00:00",
                       tests=[TestRecord(NODE, None, "passed", 1.0, verdicts=[verdict], bay=bay)])
    (folder / "results.json").write_text(json.dumps(record.to_dict()))


def test_each_bays_verdicts_keep_pointing_at_its_own_raw_data(tmp_path):
    for bay in ("bay1", "bay2"):
        _bay(tmp_path, bay)
    data = merge_bays(tmp_path, {"name": "s"}, [BayOutcome("bay1", 0), BayOutcome("bay2", 0)])
    assert data["status"] == "complete"
    seen = {}
    for test in data["tests"]:
        (path,) = test["verdicts"][0]["raw"]
        seen[test["bay"]] = json.loads((tmp_path / path).read_text())["serial"]
    assert seen == {"bay1": "SN-bay1", "bay2": "SN-bay2"}


def test_a_bay_whose_worker_never_finished_leaves_the_run_incomplete_not_a_crash(tmp_path):
    _bay(tmp_path, "bay1")
    folder = bay_folder(tmp_path, "bay1")
    data = json.loads((folder / "results.json").read_text())
    (folder / "results.json").write_text(json.dumps({**data, "status": "running", "finished": None}))
    merged = merge_bays(tmp_path, {"name": "s"}, [BayOutcome("bay1", -9)])
    assert merged["status"] == "incomplete" and len(merged["tests"]) == 1
