"""`bench compare`: one run's statistics against a baseline's, per model and phone, with Holm's
correction over the night's model-level comparisons and each entry's practical threshold."""
from __future__ import annotations

import pytest

from phonebench.bench.results.compare import (IMPROVED, NOT_CALLED, REGRESSED, UNCHANGED, Comparison, compare_runs,
                                              parse_threshold, verdict_se)


def _run(values: dict[str, dict[str, float]], se: float = 1.0, comparator: str = "<=") -> dict:
    """A results.json shape: {phone: {metric: value}}, each verdict with a 95 % bound se * 1.645 above."""
    tests = []
    for phone, metrics in values.items():
        verdicts = [{"name": m, "value": v, "unit": "ms", "comparator": comparator, "evidence": "measured",
                     "bound": v + 1.6448536 * se, "confidence": 0.95} for m, v in metrics.items()]
        tests.append({"dut": phone, "verdicts": verdicts})
    return {"tests": tests, "duts": {p: {"product_model": "Model A"} for p in values}}


def test_a_real_change_beyond_the_threshold_is_a_regression_and_the_family_is_corrected():
    base = _run({"P1": {"first_token_p99": 100.0, "std": 5.0}, "P2": {"first_token_p99": 102.0, "std": 5.0}})
    slow = _run({"P1": {"first_token_p99": 110.0, "std": 5.1}, "P2": {"first_token_p99": 112.0, "std": 4.9}})
    night = compare_runs(slow, base)
    pooled = {c.metric: c for c in night.comparisons if c.phone is None}
    assert pooled["first_token_p99"].call == REGRESSED
    assert pooled["std"].call == UNCHANGED
    assert [c.metric for c in night.regressions] == ["first_token_p99"]
    p, holm = pooled["first_token_p99"].p, pooled["first_token_p99"].p_holm
    assert holm >= p  # Holm never makes a p-value smaller


def test_a_real_change_under_the_practical_threshold_is_unchanged():
    base = _run({"P1": {"m": 100.0}}, se=0.1)
    tonight = _run({"P1": {"m": 103.0}}, se=0.1)  # certainly different, but only 3 %
    assert compare_runs(tonight, base).comparisons[-1].call == UNCHANGED
    assert compare_runs(tonight, base, {"m": 0.02}).comparisons[-1].call == REGRESSED


def test_the_limits_direction_says_which_way_is_worse():
    base = _run({"P1": {"util": 0.90}}, se=0.001, comparator=">=")
    lower = _run({"P1": {"util": 0.80}}, se=0.001, comparator=">=")
    higher = _run({"P1": {"util": 0.99}}, se=0.001, comparator=">=")
    assert compare_runs(lower, base).comparisons[-1].call == REGRESSED
    assert compare_runs(higher, base).comparisons[-1].call == IMPROVED


def test_a_statistic_without_uncertainty_is_listed_not_called():
    base, tonight = _run({"P1": {"m": 1.0}}), _run({"P1": {"m": 2.0}})
    for run in (base, tonight):
        for t in run["tests"]:
            for v in t["verdicts"]:
                v.pop("bound"), v.pop("confidence")
    assert compare_runs(tonight, base).comparisons[-1].call == NOT_CALLED


def test_standard_errors_and_thresholds_are_read_as_stated():
    assert abs(verdict_se({"value": 10.0, "bound": 11.6448536, "confidence": 0.95}) - 1.0) < 1e-6
    assert verdict_se({"value": 10.0, "uncertainty": {"expanded": 0.4}}) == 0.2
    assert parse_threshold("5 %") == 0.05 and parse_threshold("12%") == 0.12 and parse_threshold(0.03) == 0.03


@pytest.mark.slow  # twenty seeded nights: a Monte-Carlo of the gate (make test runs it)
def test_twenty_honest_nights_raise_no_more_false_alarms_than_stated():
    """Seeded: 100 pairs of honest nights, 8 statistics x 4 models each, measured with their stated
    uncertainty; the share of nights with any false alarm stays under the 5 % Holm controls."""
    import numpy as np

    rng = np.random.default_rng(7)
    nights_with_alarm = 0
    for _ in range(100):
        def night() -> dict:
            tests = []
            for model in range(4):
                verdicts = [{"name": f"s{k}", "value": float(100 + rng.normal(0, 1.0)), "unit": "ms",
                             "comparator": "<=", "evidence": "measured", "bound": 0.0, "confidence": 0.95}
                            for k in range(8)]
                for v in verdicts:
                    v["bound"] = v["value"] + 1.6448536
                tests.append({"dut": f"P{model}", "verdicts": verdicts})
            return {"tests": tests, "duts": {f"P{m}": {"product_model": f"M{m}"} for m in range(4)}}
        result = compare_runs(night(), night(), {f"s{k}": 0.0 for k in range(8)})  # no practical threshold at all
        nights_with_alarm += bool([c for c in result.comparisons if c.phone is None and c.call != UNCHANGED])
    assert nights_with_alarm / 100 <= 0.10  # 5 % nominal, with the binomial spread of 100 nights


# --- the handover: build range, bisect command, what each gate could see -----------------------------
def _night_of(run_id: str, build: str, values: dict[str, float], rel_se: dict[str, float]) -> dict:
    """One phone of Model A on `build`, each statistic stated with its relative s.e."""
    verdicts = [{"name": m, "value": v, "unit": "ms", "comparator": "<=", "evidence": "measured",
                 "bound": v * (1 + 1.6448536 * rel_se[m]), "confidence": 0.95} for m, v in values.items()]
    return {"run_id": run_id, "tests": [{"dut": "P1", "verdicts": verdicts}],
            "duts": {"P1": {"product_model": "Model A", "runtime_version": build}}}


SE = {"first_token_p99": 0.005, "energy_per_dialog": 0.04}


def test_a_planted_regression_names_its_build_range_and_the_bisect_command_in_text_and_json():
    import json

    from phonebench.bench.cli.compare import render
    from phonebench.bench.results.compare_record import night_record

    base = _night_of("night-7", "3.4.0", {"first_token_p99": 100.0, "energy_per_dialog": 5.0}, SE)
    slow = _night_of("night-8", "3.4.1", {"first_token_p99": 109.0, "energy_per_dialog": 5.0}, SE)
    night = compare_runs(slow, base)
    command = "bench bisect --good 3.4.0 --bad 3.4.1 --metric first_token --model 'Model A' --catalogue PATH"
    text = "\n".join(render(night, "night-8", "night-7"))
    assert "first_token_p99 on Model A moved: build 3.4.0 (run night-7) → 3.4.1 (run night-8)" in text
    assert f"    {command}" in text.splitlines()
    record = json.loads(json.dumps(night_record(night, "night-8", "night-7").as_json()))
    assert record["regressions"] == [{"metric": "first_token_p99", "claim": 3, "model": "Model A",
                                      "build_range": "build 3.4.0 (run night-7) → 3.4.1 (run night-8)",
                                      "bisect": command, "why_no_bisect": None}]
    pooled = next(g for g in record["comparisons"] if g["metric"] == "first_token_p99" and g["phone"] is None)
    assert pooled["baseline"]["builds"] == ["3.4.0"] and pooled["tonight"]["run"] == "night-8"
    assert pooled["call"] == REGRESSED and pooled["sight"]["sees_threshold"] is True


def test_a_gate_too_coarse_for_its_threshold_says_so_and_names_the_ab_that_would_see_it():
    import json

    from phonebench.bench.cli.compare import render
    from phonebench.bench.results.compare_record import night_record

    base = _night_of("night-7", "3.4.0", {"first_token_p99": 100.0, "energy_per_dialog": 5.0}, SE)
    tonight = _night_of("night-8", "3.4.1", {"first_token_p99": 100.0, "energy_per_dialog": 5.3}, SE)
    night = compare_runs(tonight, base)
    energy = next(c for c in night.comparisons if c.metric == "energy_per_dialog" and c.phone is None)
    first = next(c for c in night.comparisons if c.metric == "first_token_p99" and c.phone is None)
    assert energy.call == UNCHANGED  # +6 %, unseen: its noise (4 % s.e. a side) hides a 5 % change
    assert energy.detectable.detects > 0.15 and energy.detectable.power_at_threshold < 0.5
    assert first.detectable.sees_threshold and first.detectable.detects < 0.07
    assert [c.metric for c in night.blind] == ["energy_per_dialog"]
    text = "\n".join(render(night, "night-8", "night-7"))
    ab = "bench ab 3.4.0 3.4.1 --metric energy_per_dialog --model 'Model A' --catalogue PATH"
    assert f"energy_per_dialog on Model A: could not see a 5 % change" in text and f"an A/B would: {ab}" in text
    assert "first_token_p99 on Model A: could not see" not in text
    blind = json.loads(json.dumps(night_record(night, "night-8", "night-7").as_json()))["blind"]
    assert [(b["metric"], b["threshold"], b["ab"]) for b in blind] == [("energy_per_dialog", 0.05, ab)]

    same_build = compare_runs(_night_of("night-9", "3.4.0", {"energy_per_dialog": 5.0}, SE),
                              _night_of("night-7", "3.4.0", {"energy_per_dialog": 5.0}, SE))
    assert "an A/B needs two builds: both sides ran the same build" in "\n".join(render(same_build, "n9", "n7"))


@pytest.mark.slow  # 900 seeded nights through the gate (make test runs it)
def test_the_detectable_change_is_called_with_95_percent_power_and_the_threshold_as_stated():
    """Seeded: nights of one model's two statistics at their stated s.e.; a change planted at what
    the gate says it detects is called regressed on about 95 % of them, a change of exactly the
    threshold as often as the gate says."""
    import numpy as np

    rng = np.random.default_rng(51)

    def night(planted: float, metric: str) -> Comparison:
        then = {m: 100.0 * (1 + rng.normal(0, SE[m])) for m in SE}
        now = {m: 100.0 * (1 + (planted if m == metric else 0.0)) * (1 + rng.normal(0, SE[m])) for m in SE}
        return next(c for c in compare_runs(_night_of("b", "1", now, SE), _night_of("a", "0", then, SE)).comparisons
                    if c.metric == metric and c.phone is None)

    for metric in SE:
        detects = night(0.0, metric).detectable.detects
        detects = night(detects, metric).detectable.detects  # as a night with that change states its s.e.
        power = sum(night(detects, metric).call == REGRESSED for _ in range(300)) / 300
        assert 0.90 <= power <= 0.99, (metric, detects, power)
    stated = night(0.05, "energy_per_dialog").detectable.power_at_threshold
    at_threshold = sum(night(0.05, "energy_per_dialog").call == REGRESSED for _ in range(300)) / 300
    assert stated < 0.5 and abs(at_threshold - stated) < 0.07, (stated, at_threshold)


def test_the_commands_are_quoted_for_a_shell():
    import shlex

    from phonebench.bench.results.handover import BuildRange, ab_command, bisect_command

    model = "Pixel 9 'Pro'; rm -rf ~"
    assert shlex.split(bisect_command("3.4.0", "3.4.1 $(x)", "first_token_p99 (p50)", model)) == \
        ["bench", "bisect", "--good", "3.4.0", "--bad", "3.4.1 $(x)", "--metric", "first_token", "--model", model,
         "--catalogue", "PATH"]  # the A/B gate measuring the statistic, which is what bench bisect takes
    assert shlex.split(ab_command("a", "b", "m", model))[-3] == model  # no gate measures "m": every default one
    assert BuildRange(("3.4.0", "3.4.1"), ("3.4.2",)).bisect("m", "M") is None  # which good build? none offered
    assert BuildRange(("3.4.0",), ("3.4.0",)).why_not_searchable == "both sides ran the same build"
