"""Latency series whose runs differ, designed to break run-level verdicts: each run has its own
level, latencies drift together inside a run, tails are heavy, runs drift. Not the emulator's
model: written to hurt the rules in bench/stats/verdicts.py with independence "run".

Shared by tests/test_run_coverage.py (small, fast) and benchmarks/bench_run_coverage.py.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import numpy as np

from phonebench.bench.stats import verdicts as stats

Generator = Callable[[np.random.Generator, int, int], np.ndarray]  # (rng, runs, tokens) -> (runs, tokens) ms


def _ar1(rng: np.random.Generator, runs: int, tokens: int, phi: float, sigma: float) -> np.ndarray:
    """Stationary AR(1) noise with marginal sd sigma, one series per run."""
    out = np.empty((runs, tokens))
    x = rng.normal(0.0, sigma, runs)
    innovation = sigma * np.sqrt(1.0 - phi * phi)
    for k in range(tokens):
        x = phi * x + rng.normal(0.0, innovation, runs)
        out[:, k] = x
    return out


def run_offsets(rng: np.random.Generator, runs: int, tokens: int) -> np.ndarray:
    """Each run its own mean (GPU phase, prompt, cache state), AR(1) 0.9 inside the run."""
    return 100.0 + rng.normal(0.0, 15.0, (runs, 1)) + _ar1(rng, runs, tokens, 0.9, 8.0)


def heavy_tails(rng: np.random.Generator, runs: int, tokens: int) -> np.ndarray:
    """Run levels, AR(1) 0.7 jitter and Pareto stalls (shape 4.5: a finite fourth moment, which any std bound needs) in 4 % of tokens, more in some runs."""
    stall_rate = 0.04 * rng.gamma(2.0, 0.5, (runs, 1))
    stalls = np.where(rng.random((runs, tokens)) < stall_rate, 30.0 * rng.pareto(4.5, (runs, tokens)), 0.0)
    return 100.0 + rng.normal(0.0, 10.0, (runs, 1)) + _ar1(rng, runs, tokens, 0.7, 6.0) + stalls


def drifts(rng: np.random.Generator, runs: int, tokens: int) -> np.ndarray:
    """A thermal drift inside each run (its own slope), run offsets, AR(1) 0.8 jitter."""
    slope = rng.gamma(2.0, 0.4, (runs, 1))  # ms per token, always upwards, of different size per run
    return 90.0 + rng.normal(0.0, 6.0, (runs, 1)) + slope * np.arange(tokens) + _ar1(rng, runs, tokens, 0.8, 5.0)


def skewed_levels(rng: np.random.Generator, runs: int, tokens: int) -> np.ndarray:
    """Multiplicative run levels (log-normal) on gamma-distributed, autocorrelated latencies."""
    level = np.exp(rng.normal(0.0, 0.2, (runs, 1)))
    log_noise = _ar1(rng, runs, tokens, 0.85, 0.15)
    return 80.0 * level * np.exp(log_noise) * rng.gamma(8.0, 1.0 / 8.0, (runs, tokens))


DISTRIBUTIONS: dict[str, Generator] = {"run-offsets": run_offsets, "heavy-tails": heavy_tails,
                                       "drifts": drifts, "skewed-levels": skewed_levels}
VERDICTS = ("p95", "std", "mean")


@lru_cache(maxsize=None)
def truth(name: str, tokens: int, runs: int = 200_000, seed: int = 99) -> dict[str, float]:
    """The population's p95, std and mean (the mixture over runs), from a large seeded sample."""
    x = DISTRIBUTIONS[name](np.random.default_rng(seed), runs, tokens).ravel()
    return {"p95": float(np.quantile(x, 0.95)), "std": float(np.std(x)), "mean": float(np.mean(x))}


def bounds(runs: np.ndarray, confidence: float = 0.95) -> dict[str, float | None]:
    """The 95 % upper bound each verdict decides on, with independence "run" (limit: none)."""
    series = list(runs)
    return {"p95": stats.percentile_verdict("p95", series, p=0.95, limit=1e9, unit="ms", confidence=confidence,
                                            independence="run").bound,
            "std": stats.std_verdict("std", series, limit=1e9, unit="ms", confidence=confidence,
                                     independence="run").bound,
            "mean": stats.mean_verdict("mean", series, limit=1e9, unit="ms", confidence=confidence,
                                       independence="run").bound}


def coverage(name: str, reps: int, runs: int = 20, tokens: int = 40, seed: int = 1,
             truth_runs: int = 200_000) -> dict[str, dict[str, float]]:
    """Per verdict: coverage (the fraction of replications whose 95 % upper bound is at least the
    truth; a verdict without a bound is insufficient, never a pass, so it counts as covering), the
    fraction decided (with a bound), and the median bound / truth of those."""
    true = truth(name, tokens, truth_runs)
    rng = np.random.default_rng(seed)
    found: dict[str, list[float]] = {v: [] for v in VERDICTS}
    for _ in range(reps):
        for v, bound in bounds(DISTRIBUTIONS[name](rng, runs, tokens)).items():
            found[v].append(np.inf if bound is None else bound / true[v])
    out = {}
    for v in VERDICTS:
        ratio = np.array(found[v])
        decided = ratio[np.isfinite(ratio)]
        out[v] = {"coverage": float(np.mean(ratio >= 1.0)), "decided": decided.size / ratio.size,
                  "width": float(np.median(decided)) if decided.size else float("nan")}
    return out
