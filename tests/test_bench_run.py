"""`bench run` end to end against the embedded emulated station (real ADB on loopback), with the
faults that must turn its checks red."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from phonebench.core.exits import PHONES_UNREACHABLE

REPO = Path(__file__).resolve().parent.parent
IDENTITY_SUITE = str(REPO / "suites" / "test_identity.py")


def bench(tmp_path: Path, *args: str, timeout: float = 300) -> tuple[subprocess.CompletedProcess, dict | None]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PHONEBENCH_STATION", None)
    proc = subprocess.run([sys.executable, "-m", "phonebench.bench.cli", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=timeout)
    results = tmp_path / "reports" / "latest" / "results.json"
    return proc, (json.loads(results.read_text()) if results.exists() else None)


def one_phone_station(tmp_path: Path, faults: list[str] = (), name: str = "station.toml") -> str:
    path = tmp_path / name
    path.write_text("[emulated]\ninstruments = false\n[[emulated.phone]]\nserial = \"EMU-T1\"\n"
                    f"faults = {json.dumps(list(faults))}\n")
    return str(path)


def verdict(data: dict, name: str) -> dict:
    return next(v for t in data["tests"] for v in t["verdicts"] if v["name"] == name)


def test_identity_suite_passes_and_writes_the_run_folder(tmp_path):
    proc, data = bench(tmp_path, "run", "--station", one_phone_station(tmp_path), IDENTITY_SUITE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert data["status"] == "complete"
    assert data["duts"]["EMU-T1"]["serial"] == "EMU-T1"
    assert data["duts"]["EMU-T1"]["runtime_version"]
    assert all(t["outcome"] == "passed" for t in data["tests"])
    assert "passed=4" in proc.stdout
    run_dir = tmp_path / "reports" / data["run_id"]
    junit = ET.parse(run_dir / "junit.xml")
    props = {p.get("name"): p.get("value") for p in junit.iter("property")}
    assert props["dut.serial"] == "EMU-T1"
    assert " of " in props["verdicts.reported"]  # a passed test resting partly on the phone's word says so
    assert list((run_dir / "raw").rglob("*.json"))  # raw data kept beside results.json


@pytest.mark.parametrize("fault, failing", [
    ("no-runtime", "runtime_contract_supported"),
    ("skin-sensor-drift", "thermal_zone_vs_hal_max_diff"),
    ("low-battery", "battery_voltage_min"),
])
def test_faulty_phone_fails_the_matching_check(tmp_path, fault, failing):
    proc, data = bench(tmp_path, "run", "--station", one_phone_station(tmp_path, [fault]), IDENTITY_SUITE)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert verdict(data, failing)["outcome"] == "fail"
    assert "FAIL" in proc.stdout


def test_daemon_dying_mid_command_errors_that_test_and_keeps_the_rest(tmp_path):
    proc, data = bench(tmp_path, "run", "--station", one_phone_station(tmp_path, ["kill-on:dumpsys"]), IDENTITY_SUITE)
    assert proc.returncode == 1
    outcomes = {t["nodeid"].split("::")[-1].split("[")[0]: t for t in data["tests"]}
    dead = outcomes["test_thermal_zones_agree_with_thermal_service"]
    assert dead["outcome"] in ("failed", "error") and "EMU-T1" in dead["message"]
    assert outcomes["test_identity_is_complete"]["outcome"] == "passed"  # measured before the death: kept
    assert data["status"] == "complete" and len(data["tests"]) == 4


def test_unreachable_dut_is_a_clear_error(tmp_path):
    """A station whose only phone does not answer stops before its tests, once (exit 11), and the
    record keeps the phone's own error and says no test was reached."""
    station = tmp_path / "lab.toml"
    # direct: this test must not start (or use) the user's adb server
    station.write_text('[[dut]]\nname = "bay1"\nadb = "127.0.0.1:9"\ntransport = "direct"\n')
    proc, data = bench(tmp_path, "run", "--station", str(station), IDENTITY_SUITE)
    assert proc.returncode == PHONES_UNREACHABLE
    assert (proc.stdout + proc.stderr).count("no phone of this run can be reached") == 1
    assert "127.0.0.1:9" in data["duts"]["bay1"]["error"]
    assert data["status"] == "incomplete" and data["tests"] == []


def test_malformed_station_file_gives_no_traceback(tmp_path):
    station = tmp_path / "bad.toml"
    station.write_text('[[dut]]\nname = "bay1"\nadb = "nowhere"\n')
    proc, _ = bench(tmp_path, "run", "--station", str(station), IDENTITY_SUITE)
    assert proc.returncode == 2
    assert "bad.toml: [[dut]] #1.adb: expected" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def test_unknown_persona_or_fault_is_named_with_the_known_ones(tmp_path):
    proc, _ = bench(tmp_path, "run", "--persona", "grumpy", IDENTITY_SUITE)
    assert proc.returncode == 4
    assert "--persona grumpy: not a persona" in proc.stdout + proc.stderr and "jittery" in proc.stdout + proc.stderr
    proc, _ = bench(tmp_path, "run", "--station", one_phone_station(tmp_path, ["melted"]), IDENTITY_SUITE)
    assert "unknown fault(s) ['melted']" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


def test_each_run_is_its_own_night_and_its_seed_replays_it(tmp_path):
    """Two runs of one build differ as two nights do; the record keeps each run's noise seed, and
    `--seed` gives the same figures again (issue 51)."""
    station = one_phone_station(tmp_path)
    suite = [str(REPO / "suites" / "test_sla_runtime.py"), "-k", "first_token", "--sla-profile", "nightly", "-q"]

    def first_token(run_id: str, *seed: str) -> tuple[float, dict]:
        proc, data = bench(tmp_path, "run", "--station", station, "--run-id", run_id, *seed, *suite)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        verdict = next(v for t in data["tests"] for v in t["verdicts"] if v["name"].startswith("first_token"))
        return verdict["value"], data

    fresh, night = first_token("fresh")
    seed = night["station"]["seed"]
    replayed, again = first_token("replayed", "--seed", str(seed))
    other, _ = first_token("other", "--seed", str(seed + 1))
    assert again["station"]["seed"] == seed and replayed == fresh  # the same night, to the last digit
    assert other != fresh  # another night: other noise
    assert again["duts"]["EMU-T1"]["serial"] == night["duts"]["EMU-T1"]["serial"]
    assert f"bench run --seed {seed}" in (tmp_path / "reports" / "replayed" / "report.html").read_text()


def test_bench_run_is_pytest_given_the_request_it_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """`bench run` builds the request once and hands it whole to one pytest.main with the bench's
    run plugin; the plugin claims the run, launches the emulated station and hands the session over
    to pytest's own, which runs that request: the record names its profile and its one test."""
    import phonebench.bench.cli.run as cli_run
    from phonebench.bench.cli import build_parser, main
    from phonebench.bench.cli.request import from_cli

    calls: list[tuple[list[str], list[object]]] = []
    real_main = pytest.main

    def one_pytest(args: list[str], plugins: list[object]) -> int | pytest.ExitCode:
        calls.append((list(args), list(plugins)))
        return real_main(args, plugins=plugins)

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PHONEBENCH_STATION", raising=False)
    monkeypatch.setattr(cli_run.pytest, "main", one_pytest)
    argv = [IDENTITY_SUITE, "-k", "identity_is_complete", "--station", one_phone_station(tmp_path),
            "--run-id", "night-1", "--sla-profile", "nightly"]
    assert main(["run", "-q", "--no-preflight", *argv]) == 0
    expected = from_cli(build_parser().parse_args(["run", *argv]))
    [(args, plugins)] = calls
    [bench_run] = plugins
    assert isinstance(bench_run, cli_run.BenchRun) and bench_run.request == expected
    assert args[:len(expected.pytest_argv())] == expected.pytest_argv()
    record = json.loads((tmp_path / "reports" / "night-1" / "results.json").read_text())
    assert record["status"] == "complete" and record["station"]["sla_profile"] == "nightly"
    assert [t["nodeid"].split("::")[-1] for t in record["tests"]] == ["test_identity_is_complete[EMU-T1]"]
    assert "next: open the report" in capsys.readouterr().out


def test_tests_of_no_phone_are_said_to_have_run_and_recorded_nothing(tmp_path: Path) -> None:
    """A lab's own test that uses no phone or instrument is not a bench test: the run says it ran
    and that nothing was recorded, not that no test ran."""
    (tmp_path / "test_mine.py").write_text("def test_no_phone():\n    pass\n")
    proc, data = bench(tmp_path, "run", "-q", "--no-preflight", "--station", one_phone_station(tmp_path),
                       str(tmp_path / "test_mine.py"))
    assert proc.returncode == 1 and data is None, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "the selected tests ran, but none used the station's phones or instruments" in proc.stderr
    assert "no test ran" not in proc.stderr
