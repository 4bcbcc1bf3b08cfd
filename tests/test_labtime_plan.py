"""`bench plan` before a run predicts the lab time the run then records, on the emulated station
through the lab's path (`bench run`, station clock, results store), within 10 %."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SUITE = str(REPO / "suites" / "test_instruments.py")  # the probes' warm-up and rest: minutes of lab time


def bench(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PHONEBENCH_STATION", None)
    env.pop("PHONEBENCH_DATABASE", None)
    return subprocess.run([sys.executable, "-m", "phonebench.bench.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def test_plan_then_run_records_the_planned_lab_time(tmp_path):
    first = bench(tmp_path, "run", "--dut", "EMU0001", "--run-id", "first", "--seed", "1", "-q", SUITE)
    assert first.returncode == 0, first.stdout + first.stderr
    planned = bench(tmp_path, "plan", "--dut", "EMU0001", "--json", SUITE)
    assert planned.returncode == 0, planned.stdout + planned.stderr
    plan = json.loads(planned.stdout)
    (phone,) = plan["phones"]
    assert phone["model"] and all(t["source"].startswith("store") for t in phone["tests"])
    second = bench(tmp_path, "run", "--dut", "EMU0001", "--run-id", "second", "--seed", "2", "-q", SUITE)  # another night
    assert second.returncode == 0, second.stdout + second.stderr
    recorded = json.loads((tmp_path / "reports" / "second" / "results.json").read_text())["lab_time_s"]["EMU0001"]
    assert recorded > 60.0  # minutes of lab time, not a rounding of nothing
    assert abs(recorded - phone["lab_time_s"]) <= 0.10 * phone["lab_time_s"], (recorded, phone)
    assert "lab time EMU0001" in second.stdout
    junit = ET.parse(tmp_path / "reports" / "second" / "junit.xml")
    lab = [float(p.get("value")) for p in junit.iter("property") if p.get("name") == "lab_time_s"]
    assert sum(lab) == pytest.approx(recorded, abs=0.01 * len(lab))
