"""Plain pytest as a lab runs it: `python -m pytest --station station.toml` in the lab's own folder
(a relative station path), the bench plugin loaded from the installed package. A planted failure
that keeps raw data is recorded as failed; a session that fails is never stored complete;
pytest-xdist is refused with one line."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lab_helpers import ONE_PHONE_STATION

TESTS = """\
import pytest


@pytest.mark.evidence("measured")
def test_planted(dut, record):
    record.raw("trace", {"ms": [1, 2, 3]})  # raw data kept before the failing verdict
    record.check("planted", 2.0, "s", 1.0)


@pytest.mark.evidence("measured")
def test_fine(dut, record):
    record.check("fine", 0.5, "s", 1.0)
"""


def lab_folder(root: Path, conftest: str | None = None) -> Path:
    folder = root / "lab"
    folder.mkdir()
    (folder / "station.toml").write_text(ONE_PHONE_STATION)
    (folder / "test_lab.py").write_text(TESTS)
    if conftest is not None:
        (folder / "conftest.py").write_text(conftest)
    return folder


def plain_pytest(folder: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PHONEBENCH_STATION"}
    env["PHONEBENCH_LOCK_DIR"] = str(folder.parent / "locks")
    return subprocess.run([sys.executable, "-m", "pytest", "--station", "station.toml", "-p", "no:cacheprovider",
                           *extra], cwd=folder, env=env, capture_output=True, text=True, timeout=300)


def stored(folder: Path) -> tuple[dict, dict[str, str], dict[str, str]]:
    """results.json of the latest run, and the store's run status and test outcomes."""
    data = json.loads((folder / "reports" / "latest" / "results.json").read_text())
    with sqlite3.connect(folder / "reports" / "results.sqlite") as db:
        runs = dict(db.execute("select run_id, status from runs"))
        tests = dict(db.execute("select nodeid, outcome from tests"))
    return data, runs, tests


def test_a_planted_failure_with_raw_data_is_recorded_as_failed(tmp_path):
    folder = lab_folder(tmp_path)
    proc = plain_pytest(folder)
    assert "INTERNALERROR" not in proc.stdout + proc.stderr
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "PytestAssertRewriteWarning" not in proc.stdout + proc.stderr  # the plugin's modules load cleanly
    data, runs, tests = stored(folder)
    outcomes = {t["nodeid"]: t["outcome"] for t in data["tests"]}
    assert outcomes == {"test_lab.py::test_planted[EMU0001]": "failed", "test_lab.py::test_fine[EMU0001]": "passed"}
    assert data["status"] == "complete"  # every test ran and is recorded: a complete run with a failure
    assert runs == {data["run_id"]: "complete"} and tests == outcomes
    run_dir = folder / "reports" / data["run_id"]
    raw = run_dir / "raw" / "test_lab.py_test_planted_EMU0001"
    assert (raw / "trace.json").exists() and (raw / "failure-evidence.json").exists()
    assert data["station"]["file"] == str((folder / "station.toml").resolve())  # absolute, not the cwd's


CRASHES = {
    "a crashing hook": ("def pytest_runtest_logfinish(nodeid, location):\n"
                        "    if 'test_planted' in nodeid:\n"
                        "        raise RuntimeError('planted hook crash')\n", 3, "INTERNALERROR RuntimeError"),
    "a plugin's exit": ("import pytest\n\n"
                        "def pytest_runtest_logfinish(nodeid, location):\n"
                        "    if 'test_planted' in nodeid:\n"
                        "        pytest.exit('planted exit', returncode=7)\n", 7, "exit status 7"),
}


@pytest.mark.parametrize("crash", CRASHES)
def test_a_failed_session_is_stored_incomplete_with_what_it_had(tmp_path, crash):
    conftest, code, why = CRASHES[crash]
    folder = lab_folder(tmp_path, conftest)
    proc = plain_pytest(folder)
    assert proc.returncode == code, proc.stdout[-3000:] + proc.stderr[-3000:]
    data, runs, tests = stored(folder)
    assert data["status"] == "incomplete"
    assert runs == {data["run_id"]: "incomplete"}
    assert any(why in p for p in data["problems"]), data.get("problems")
    assert tests == {"test_lab.py::test_planted[EMU0001]": "failed"}  # what it had is kept


def test_pytest_xdist_is_refused_with_one_line(tmp_path):
    pytest.importorskip("xdist")
    folder = lab_folder(tmp_path)
    proc = plain_pytest(folder, "-n", "2")
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR
    message = proc.stderr.strip()
    assert message.startswith("ERROR: phonebench does not run under pytest-xdist") and "bench run" in message
    assert len(message.splitlines()) == 1 and "Traceback" not in proc.stdout + proc.stderr
    assert not (folder / "reports").exists()  # refused before any run folder or phone
