"""Run-level verdicts keep their coverage when runs differ (a small, seeded version of
benchmarks/bench_run_coverage.py): each run its own level, drifts, heavy tails, skewed levels."""
from __future__ import annotations

import numpy as np
import pytest

import run_series
from phonebench.bench.stats import verdicts as stats


@pytest.mark.parametrize("name", list(run_series.DISTRIBUTIONS))
def test_run_level_bounds_cover_the_population_value(name):
    found = run_series.coverage(name, reps=120, seed=11, truth_runs=50_000)
    for verdict, result in found.items():
        # 120 replications: binomial standard error 0.02 at 0.95 (the benchmark runs 2000)
        assert result["coverage"] >= 0.90, (name, verdict, result)


def test_runs_with_their_own_level_are_worth_fewer_samples_than_their_tokens():
    rng = np.random.default_rng(3)
    runs = list(run_series.run_offsets(rng, 20, 40))
    verdict = stats.percentile_verdict("p95", runs, p=0.95, limit=1e9, unit="ms", independence="run")
    assert verdict.extra["n_eff"] < 800 / 3
    assert stats.cluster_design_effect([np.ones(10), np.zeros(10)]) > 1.0
    assert stats.cluster_design_effect([np.r_[1.0, np.zeros(9)], np.r_[1.0, np.zeros(9)]]) == 1.0


def test_std_components_bound_adds_the_between_and_within_run_terms():
    runs = [np.array([1.0, 3.0, 1.0, 3.0]) + level for level in (0.0, 10.0, 20.0)]
    between, within, bound = stats.std_components_bound(runs, 0.95)
    assert between > np.var([2.0, 12.0, 22.0], ddof=1)  # an upper bound of the run means' variance
    assert within == pytest.approx(1.0)  # every run has the same within-run mean square
    assert bound == pytest.approx(np.sqrt(between + within))
