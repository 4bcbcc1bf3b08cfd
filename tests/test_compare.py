"""`bench compare`: one run's statistics against a baseline's, per model and phone, with Holm's
correction over the night's model-level comparisons and each entry's practical threshold."""
from __future__ import annotations

import pytest

from phonebench.bench.results.compare import (IMPROVED, NOT_CALLED, REGRESSED, UNCHANGED, compare_runs,
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
