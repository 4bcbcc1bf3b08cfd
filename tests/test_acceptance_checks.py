"""Negative controls of the acceptance profile and suite: its statistics never pass on too few
samples and fail beyond their limits; its checks fail on a unit with the matching fault."""
from __future__ import annotations

import json

import numpy as np
import pytest

from phonebench.core.paths import SOURCE_ROOT as REPO
from phonebench.bench.specs.sla import load_profile
from phonebench.core.verdict import Outcome
from phonebench.emulation.device import PhoneSpec
from tests.production_helpers import calibrate, line_station


@pytest.fixture(scope="module")
def profile():
    return load_profile("acceptance")


def test_the_acceptance_statistics_hold_at_their_small_counts(profile):
    voice = profile.get("acceptance_voice_latency_max")
    assert voice.evaluate(np.full(4, 200.0)).outcome is Outcome.INSUFFICIENT  # never a pass before the first look
    assert voice.evaluate(np.full(5, 200.0)).outcome is Outcome.PASS
    assert voice.evaluate(np.r_[np.full(7, 200.0), 411.0]).outcome is Outcome.FAIL
    power = profile.get("acceptance_power_mean")
    rng = np.random.default_rng(1)
    runs = [4.0 + rng.normal(0, 0.05, 500) for _ in range(3)]
    assert power.evaluate(runs[:1], sample_rate_hz=6000).outcome is Outcome.INSUFFICIENT
    assert power.evaluate(runs, sample_rate_hz=6000).outcome is Outcome.PASS
    assert power.evaluate([r + 0.5 for r in runs], sample_rate_hz=6000).outcome is Outcome.FAIL
    assert power.evaluate(runs, sample_rate_hz=1000).outcome is Outcome.INVALID  # digitized too slowly
    assert profile.get("acceptance_redundancy_mismatches").evaluate(1).outcome is Outcome.FAIL
    assert profile.get("acceptance_redundancy_off_mismatches").evaluate(0).outcome is Outcome.FAIL
    assert profile.get("acceptance_weight_page_errors").evaluate(1).outcome is Outcome.FAIL


@pytest.fixture(scope="module")
def fixture(tmp_path_factory):
    with line_station(tmp_path_factory.mktemp("checks")) as (line, station_file, results):
        calibrate(line, station_file)
        yield line, station_file, results


def suite_run(fixture, spec: PhoneSpec, select: str, scanned: str) -> dict[str, dict]:
    """The acceptance suite's selected tests on a unit; verdicts by name."""
    line, station_file, results = fixture
    line.load(spec)
    run_id = f"neg-{spec.serial}"
    code = pytest.main([str(REPO / "suites" / "test_acceptance.py"), "-p", "phonebench", "--rootdir", str(REPO),
                        "-p", "no:cacheprovider", "-q", "-k", select, "--station", str(station_file),
                        "--results-dir", str(results), "--run-id", run_id, "--scanned-serial", scanned])
    assert code == pytest.ExitCode.TESTS_FAILED
    data = json.loads((results / run_id / "results.json").read_text())
    return {v["name"]: v for t in data["tests"] for v in t["verdicts"]}


def test_redundancy_and_serial_checks_fail_on_a_unit_without_redundancy_scanned_wrong(fixture):
    verdicts = suite_run(fixture, PhoneSpec(serial="NORED001", seed=51, sla_persona="no-redundancy"),
                         "serial or redundancy", scanned="NORED002")
    assert verdicts["unit_serial_matches_scan"]["outcome"] == "fail"
    assert verdicts["acceptance_redundancy_engaged"]["outcome"] == "fail"
    assert verdicts["redundancy_token_mismatches"]["outcome"] == "fail"  # the ripple corrupted its tokens
    assert verdicts["redundancy_off_token_mismatches"]["outcome"] == "pass"  # the stress did take


def test_the_weight_spot_check_fails_on_a_corrupted_page(fixture):
    verdicts = suite_run(fixture, PhoneSpec(serial="BADWT001", seed=52, sla_persona="corrupt-weights"),
                         "weight", scanned="BADWT001")
    errors = verdicts["acceptance_weight_page_errors"]
    assert errors["outcome"] == "fail" and errors["value"] >= 1 and "device CRC: 1 of" in errors["detail"]
    assert verdicts["acceptance_weight_manifest_signed"]["outcome"] == "pass"
