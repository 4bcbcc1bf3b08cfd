"""The first-test guide's lab repository (docs/example-lab, walked through in docs/writing-tests.md)
runs as a lab runs it: a copy in its own folder, plain pytest with the installed package's plugin,
a relative station path. Its verdicts, raw data, report and junit.xml are what the guide says; a
tightened limit in the lab's profile fails (the negative control)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from phonebench.core.paths import SOURCE_ROOT

EXAMPLE = SOURCE_ROOT / "docs" / "example-lab"


def run_lab(folder: Path) -> tuple[subprocess.CompletedProcess, dict, ET.ElementTree]:
    proc = subprocess.run([sys.executable, "-m", "pytest", "--station", "station.toml", "tests",
                           "-p", "no:cacheprovider", "--junitxml", "junit.xml"],
                          cwd=folder, capture_output=True, text=True, timeout=900)
    results = json.loads((folder / "reports" / "latest" / "results.json").read_text())
    return proc, results, ET.parse(folder / "junit.xml")


def verdicts(results: dict) -> dict[str, dict]:
    return {v["name"]: v for t in results["tests"] for v in t["verdicts"]}


def test_the_example_lab_runs_as_a_lab_runs_it(tmp_path):
    lab = tmp_path / "lab"
    shutil.copytree(EXAMPLE, lab)
    proc, results, junit = run_lab(lab)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert results["status"] == "complete" and results["station"]["name"] == "example-lab"
    found = verdicts(results)
    build = found["build_fingerprint_present"]
    assert build["outcome"] == "info" and build["evidence"] == "reported"  # the phone's word: shown, never a pass
    idle = found["idle_power_max"]
    assert idle["outcome"] == "pass" and idle["evidence"] == "measured" and idle["profile"] == "lab"
    assert idle["n"] == 2000 and idle["limit"] == 1.5
    assert (lab / "reports" / "latest" / idle["raw"][0]).is_file()  # raw data beside results.json
    assert found["idle_power_mean"]["outcome"] == "info"
    assert (lab / "reports" / "latest" / "report.html").is_file()
    suite = {p.get("name"): p.get("value") for p in junit.getroot().iter("property")}
    assert suite["phonebench.station"] == "example-lab" and suite["phonebench.sla_profile"] == "lab"
    assert suite["phonebench.run_id"] == results["run_id"] and suite["phonebench.code_version"]
    assert suite["verdict.idle_power_max.n"] == "2000" and "verdict.idle_power_max.bound" in suite
    assert suite["verdict.idle_power_max.calibration"] == "supply=uncalibrated"
    assert "verdict.idle_power_max.uncertainty" in suite


def test_a_tightened_lab_limit_fails(tmp_path):
    lab = tmp_path / "lab"
    shutil.copytree(EXAMPLE, lab)
    profile = lab / "lab.toml"
    profile.write_text(profile.read_text().replace("limit = 1.5", "limit = 0.1"))
    proc, results, _ = run_lab(lab)
    assert proc.returncode == 1
    assert verdicts(results)["idle_power_max"]["outcome"] == "fail"
