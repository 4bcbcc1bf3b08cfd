"""User errors that need the suites collected: -k / -m selecting nothing says so and lists what
exists (exit 5), and plain pytest with an unknown --dut is one usage line (exit 4); neither leaves
a run folder holding only junit.xml."""
from __future__ import annotations

import subprocess
import sys

from phonebench.bench.cli import main
from phonebench.core.exits import NO_TESTS, USAGE
from phonebench.core.paths import SOURCE_ROOT


def test_a_keyword_selecting_nothing_lists_the_tests(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "-q", "-k", "no_such_test"]) == NO_TESTS == 5
    out, err = capsys.readouterr()
    text = (out + err).strip()
    assert "Traceback" not in text
    line = text.splitlines()[-1]
    assert line.startswith("bench run: -k 'no_such_test' selected none of ")
    assert "test_identity_is_complete" in line and "markers (-m): acceptance" in line
    assert not any((tmp_path / "reports").glob("*/junit.xml"))


def test_a_marker_selecting_nothing_lists_the_markers(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "-q", "-m", "nosuchmarker"]) == NO_TESTS
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "-m 'nosuchmarker' selected none of" in line and "calibration" in line
    assert not [p for p in (tmp_path / "reports").iterdir() if p.is_dir()]


def test_plain_pytest_with_an_unknown_dut_is_one_usage_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "phonebench", str(SOURCE_ROOT / "suites"),
                           "--dut", "EMU0009", "-p", "no:cacheprovider", "--junitxml", str(tmp_path / "j.xml")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    text = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == USAGE, text
    assert "Traceback" not in text and len(text.splitlines()) == 1, text
    assert "--dut EMU0009: not a DUT of station 'emulated'" in text
    assert not (tmp_path / "j.xml").exists()
