"""Per-token latency series drawn from the emulated runtime's timing profiles, many at once.

The same model as phonebench.emulation.runtime_timing.TokenTimer.decode (log-time AR(1) jitter, a per-run
level, stalls, GPU contention), vectorised over replications and runs so a Monte-Carlo coverage
check draws 10^7 tokens in seconds. Shared by tests/test_stats.py and benchmarks/bench_coverage.py.
"""
from __future__ import annotations

import math

import numpy as np

from phonebench.emulation.runtime_timing import PROFILES, TimingProfile

# name -> (runtime timing profile, GPU busy fraction): nominal, jittery, and stall-heavy (the
# contention-sensitive unit under a 80 % GPU load: 3 % stalls of 120 ms on top of the jitter).
DISTRIBUTIONS: dict[str, tuple[TimingProfile, float]] = {
    "nominal": (PROFILES["nominal"], 0.0),
    "jittery": (PROFILES["jittery"], 0.0),
    "stall-heavy": (PROFILES["contention-sensitive"], 0.8),
}


def token_latencies_ms(profile: TimingProfile, gpu_busy: float, reps: int, runs: int, tokens: int,
                       rng: np.random.Generator) -> np.ndarray:
    """(reps, runs, tokens) decode-step latencies in ms, each run started as TokenTimer.start_run does."""
    p = profile
    shape = (reps, runs)
    level = rng.normal(0.0, p.run_sigma, shape)
    ar = rng.normal(0.0, p.decode_sigma, shape)
    scale = 1.0 + p.contention_gain * gpu_busy
    out = np.empty((reps, runs, tokens))
    for k in range(tokens):
        ar = p.decode_phi * ar + rng.normal(0.0, p.decode_sigma * math.sqrt(1.0 - p.decode_phi ** 2), shape)
        log_time = ar + level
        if gpu_busy > 0.0:
            log_time = log_time + rng.normal(0.0, p.contention_sigma * gpu_busy, shape)
        seconds = p.decode_s * np.exp(log_time)
        seconds += np.where(rng.random(shape) < p.stall_probability, rng.exponential(p.stall_s, shape), 0.0)
        if gpu_busy > 0.0:
            stall = rng.random(shape) < p.contention_stall_probability * gpu_busy
            seconds += np.where(stall, rng.exponential(p.contention_stall_s, shape), 0.0)
        out[:, :, k] = 1000.0 * seconds * scale
    return out


def population_std_ms(name: str, runs: int = 400_000, tokens: int = 15, seed: int = 99) -> float:
    """The generating process's std, from one very long sample (6 M tokens: std known to ~0.1 %)."""
    profile, gpu = DISTRIBUTIONS[name]
    return float(token_latencies_ms(profile, gpu, 1, runs, tokens, np.random.default_rng(seed)).std())


def coverage(name: str, reps: int, runs: int, tokens: int = 15, confidence: float = 0.95, seed: int = 1,
             independence: str = "block") -> dict[str, float]:
    """Share of `reps` seeded replications whose upper std bound covers the population std: the
    chi-square bound with the effective sample size (the old method), the studentized bootstrap
    alone, and the verdict's bound (the largest of those and the bulk + tail bound)."""
    from phonebench.bench.stats import verdicts as stats

    truth = population_std_ms(name, tokens=tokens)
    profile, gpu = DISTRIBUTIONS[name]
    data = token_latencies_ms(profile, gpu, reps, runs, tokens, np.random.default_rng(seed))
    covered = {"chi-square": 0, "bootstrap": 0, "verdict": 0}
    for series in data:
        verdict = stats.std_verdict("s", list(series), limit=truth, unit="ms", confidence=confidence,
                                    independence=independence)
        covered["chi-square"] += verdict.extra["chi_square_bound"] >= truth
        covered["bootstrap"] += (verdict.extra["bootstrap_bound"] or 0.0) >= truth
        covered["verdict"] += verdict.bound >= truth
    return {method: count / reps for method, count in covered.items()}
