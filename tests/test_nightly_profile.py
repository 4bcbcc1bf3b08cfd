"""The nightly profile: a regression profile whose sizes are its gates', whose medians are never
compared with a release run's p99, and which a misspelt name cannot start (docs/nightly.md)."""
from __future__ import annotations

import json
import logging

import pytest

from phonebench.bench.cli import main
from phonebench.bench.results.compare import compare_runs, label
from phonebench.bench.specs.sla import load_profile
from phonebench.core.errors import ConfigError
from phonebench.fixtures.collection import run_after


def test_the_nightly_is_a_regression_profile_with_its_gates_sizes_and_thresholds(caplog):
    with caplog.at_level(logging.INFO, logger="phonebench.bench.specs.sla"):
        nightly = load_profile("nightly")
    assert nightly.purpose == "regression" and load_profile("default").purpose == "demonstration"
    assert nightly.loosened and not [r for r in caplog.records if r.levelno >= logging.WARNING]
    first = nightly.get("first_token_p99")
    assert (first.p, first.n_required, first.limit) == (0.5, 120, 300)  # the claim's limit, the gate's size
    assert first.parameters["regression"] == "5 %"
    assert nightly.get("long_dialog_success").n_required == 60
    assert nightly.get("token_latency_std").parameters["consecutive_inferences"] == 300
    assert load_profile("default").get("first_token_p99").n_required == 299  # the release is unchanged


def test_an_unknown_purpose_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "lab.toml"
    path.write_text('extends = "default"\npurpose = "vibes"\n')
    with pytest.raises(ConfigError, match="purpose.*demonstration, regression"):
        load_profile(path)


def test_a_nightly_median_is_never_compared_with_a_release_p99():
    def run(statistic: str, value: float) -> dict:
        v = {"name": "first_token_p99", "statistic": statistic, "value": value, "comparator": "<",
             "evidence": "measured", "bound": value + 1.6, "confidence": 0.95, "unit": "ms"}
        return {"tests": [{"dut": "P1", "verdicts": [v]}], "duts": {"P1": {"product_model": "M"}}}

    assert label({"name": "first_token_p99", "statistic": "p50"}) == "first_token_p99 (p50)"
    assert label({"name": "first_token_p99", "statistic": "p99"}) == "first_token_p99"
    assert compare_runs(run("p50", 100.0), run("p99", 130.0)).comparisons == []
    assert len(compare_runs(run("p50", 100.0), run("p50", 101.0)).comparisons) == 2  # the phone and the model


def test_bench_run_refuses_a_misspelt_profile_before_anything_starts(capsys):
    assert main(["run", "--sla-profile", "nightlyy", "--no-preflight"]) == 2
    err = capsys.readouterr().err
    assert "nightlyy" in err and "Traceback" not in err


def test_the_nightly_leaves_the_line_checks_out_and_the_release_keeps_them(capsys):
    """A production-line check (@pytest.mark.line: bench accept's short passes) asks whether one
    unit is good; a regression profile's run, and its plan, leave it out. Every claim's own check,
    and the line's identity and numerics tests that are claims too, stay."""
    def planned(*options: str) -> set[str]:
        assert main(["plan", "--json", "--dut", "EMU0001", *options]) == 0
        return {t["test"].split("::")[-1] for p in json.loads(capsys.readouterr().out)["phones"] for t in p["tests"]}

    nightly, release, line = planned("--sla-profile", "nightly"), planned(), planned("-m", "line")
    assert {"test_voice_and_power_sanity", "test_voice_latency_sanity", "test_power_sanity"} <= line <= release
    assert nightly == release - line
    assert {"test_sustained_use", "test_microcode_fingerprint", "test_tokens_bit_exact_after_adapter"} <= nightly


def test_the_nightly_runs_its_heat_in_order_and_the_release_keeps_its_own(capsys):
    """The nightly's `run_after`: each phone's sustained-use study follows the token checks (their
    heat shortens its cover loop's warm-up) and the soak stays last; the release's order is the
    suites' own, and the two runs hold the same tests otherwise."""
    def planned(*options: str) -> list[str]:
        assert main(["plan", "--json", "--dut", "EMU0001", *options]) == 0
        return [t["test"].split("::")[-1].split("[")[0]
                for p in json.loads(capsys.readouterr().out)["phones"] for t in p["tests"]]

    nightly, release = planned("--sla-profile", "nightly"), planned()
    assert dict(load_profile("nightly").run_after) == {"test_sustained_use": "test_token_latency_under_gpu_load"}
    assert not load_profile("default").run_after
    at = nightly.index("test_token_latency_under_gpu_load")
    assert nightly[at + 1] == "test_sustained_use" and nightly[-1] == release[-1] == "test_npu_thermal_trip_soak"
    assert release.index("test_sustained_use") < release.index("test_first_token")
    assert [t for t in release if t in nightly and t != "test_sustained_use"] == \
        [t for t in nightly if t != "test_sustained_use"]


def test_run_after_moves_a_test_after_another_and_must_name_test_functions(tmp_path):
    class Item:
        def __init__(self, name: str) -> None:
            self.name = self.originalname = name

    items = [Item(n) for n in ("a", "b", "c", "d")]
    assert [i.name for i in run_after(items, {"b": "c"})] == ["a", "c", "b", "d"]
    assert [i.name for i in run_after(items, {"b": "nowhere"})] == ["a", "b", "c", "d"]
    path = tmp_path / "lab.toml"
    path.write_text('extends = "nightly"\nrun_after = ["test_sustained_use"]\n')
    with pytest.raises(ConfigError, match="run_after.*test function names"):
        load_profile(path)
    path.write_text('extends = "nightly"\n')
    assert dict(load_profile(path).run_after) == {"test_sustained_use": "test_token_latency_under_gpu_load"}
