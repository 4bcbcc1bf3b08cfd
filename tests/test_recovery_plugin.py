"""The bench's DUT recovery and failure evidence, run as a bench would run them: a small suite
against an emulated station of two phones, one of which never comes back from a reboot."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SUITE = '''
import pytest

pytestmark = pytest.mark.evidence("self-reported")  # what the phone answers over ADB


def test_a0_before(dut, record):
    dut.run("llmrt status")
    dut.run("sleep 5")  # the phone's clock moves on: what this test logged is before the next one
    record.check("status_read", 1, "bool", 1, "==")


def test_a_fails(dut):
    dut.run("llmrt identity")
    assert False, "deliberate failure"


def test_b_reboot(dut, reboot_dut, record):
    reboot_dut()
    record.check("boot_completed", int(dut.getprop("sys.boot_completed") == "1"), "bool", 1, "==")


def test_c_after(dut, record):
    record.check("alive", int(dut.run("echo alive") == "alive\\n"), "bool", 1, "==")
'''

STATION = '''
[emulated]
instruments = false
[[emulated.phone]]
serial = "EMU-OK"
[[emulated.phone]]
serial = "EMU-GONE"
faults = ["no-return-after-reboot"]
'''


def run_suite(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    (tmp_path / "test_suite.py").write_text(SUITE)
    (tmp_path / "station.toml").write_text(STATION)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PHONEBENCH_STATION", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "phonebench", "-p", "no:cacheprovider",
                           "--rootdir", str(tmp_path), "--station", str(tmp_path / "station.toml"),
                           "--results-dir", str(tmp_path / "reports"), "--run-id", "r1", *args, "test_suite.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    return proc, json.loads((tmp_path / "reports" / "r1" / "results.json").read_text())


def test_broken_phone_errors_its_remaining_tests_and_failures_keep_evidence(tmp_path: Path) -> None:
    proc, data = run_suite(tmp_path, "--recovery-timeout", "3", "--bugreport")
    outcomes = {t["nodeid"].split("::")[-1]: t for t in data["tests"]}
    # The phone that returns: rebooted and carried on.
    assert outcomes["test_b_reboot[EMU-OK]"]["outcome"] == "passed", proc.stdout
    assert outcomes["test_c_after[EMU-OK]"]["outcome"] == "passed"
    # The phone that does not: its reboot test fails with the reason, its later tests error with it.
    gone = outcomes["test_b_reboot[EMU-GONE]"]
    assert gone["outcome"] == "failed" and "did not come back on ADB within 3 s" in gone["message"]
    after = outcomes["test_c_after[EMU-GONE]"]
    assert after["outcome"] == "error" and "EMU-GONE: did not come back" in after["message"]
    assert data["status"] == "complete"
    # A failed test's raw data: logcat since it started, the state dump and the bugreport.
    raw = tmp_path / "reports" / "r1" / "raw"
    folder = next(p.parent for p in raw.rglob("failure-evidence.json") if "test_a_fails" in str(p) and "EMU-OK" in str(p))
    logcat = (folder / "logcat.txt").read_text()
    assert "llmrt identity: start" in logcat and "llmrt identity: exit 0" in logcat
    assert "llmrt status" not in logcat and "System now ready" not in logcat  # since the test started
    assert "Thermal Status:" in (folder / "thermalservice.txt").read_text()
    assert "voltage:" in (folder / "battery.txt").read_text()
    assert (folder / "runtime-status.txt").read_text().strip()
    assert "SYSTEM PROPERTIES" in (folder / "bugreport.txt").read_text()
    index = json.loads((folder / "failure-evidence.json").read_text())
    assert index["missing"] == {} and index["logcat_since"].startswith("-T ")


def test_passing_tests_keep_no_evidence(tmp_path: Path) -> None:
    proc, data = run_suite(tmp_path, "--recovery-timeout", "3", "-k", "test_c_after")
    assert all(t["outcome"] == "passed" for t in data["tests"]), proc.stdout
    assert not list((tmp_path / "reports" / "r1").rglob("failure-evidence.json"))
