"""Sequential acceptance decisions: take samples one at a time and stop as soon as PASS or FAIL
is decided at the stated confidence, instead of always taking a fixed n (production takt).

Two rules, both with a fixed plan of "looks" (the sample counts at which a decision may be
taken) and the error spread over the looks by Bonferroni (each look at alpha / looks), so the
chance of a wrong early decision over the whole sequence stays within the stated level:

- `tolerance_rule` for "every sample within the limit" checks (a latency limit): FAIL at the
  first sample past the limit (the census rule fails it already); PASS early once a one-sided
  normal tolerance bound -- mean + k*s covering a fraction p of the unit's population at the
  look's confidence -- is within the limit; at the last look the fixed-n census decides
  (max <= limit), exactly as the non-sequential check would. An early PASS is therefore a
  stronger statement than the census (a population claim, under a normal model), never weaker.
- `mean_rule` for a mean against a limit (sustained power): Student-t bound over the run means;
  PASS once the one-sided bound is within the limit, FAIL once the opposite bound is past it;
  undecided at the last look (the caller's SLA entry then gives its own verdict).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

Decision = Literal["pass", "fail", "continue"]


@dataclass(frozen=True)
class SequentialPlan:
    """When to look (sample counts, increasing) and how sure each decision must be."""

    looks: tuple[int, ...]
    confidence: float = 0.95  # over all looks together

    def __post_init__(self) -> None:
        if not self.looks or any(n < 2 for n in self.looks) or list(self.looks) != sorted(set(self.looks)):
            raise ValueError(f"looks must be increasing sample counts >= 2, got {self.looks}")
        if not 0.5 < self.confidence < 1.0:
            raise ValueError(f"confidence must be in (0.5, 1), got {self.confidence}")

    @property
    def n_max(self) -> int:
        return self.looks[-1]

    @property
    def per_look_confidence(self) -> float:
        return 1.0 - (1.0 - self.confidence) / len(self.looks)

    @classmethod
    def spaced(cls, n_min: int, n_max: int, step: int = 1, confidence: float = 0.95) -> SequentialPlan:
        looks = tuple(range(n_min, n_max, step)) + (n_max,)
        return cls(tuple(sorted(set(looks))), confidence)


@dataclass(frozen=True)
class SequentialResult:
    decision: Decision
    n: int
    bound: float | None  # the bound the decision rests on (None: decided by a single sample)
    detail: str


def tolerance_factor(n: int, p: float, confidence: float) -> float:
    """One-sided normal tolerance factor k: mean + k*s exceeds a fraction p of the population
    with the given confidence (exact, from the noncentral t distribution)."""
    if n < 2:
        raise ValueError(f"a tolerance bound needs n >= 2, got {n}")
    return float(sps.nct.ppf(confidence, n - 1, sps.norm.ppf(p) * math.sqrt(n)) / math.sqrt(n))


def tolerance_rule(samples: ArrayLike, limit: float, plan: SequentialPlan, p: float = 0.99) -> SequentialResult:
    """The decision after the samples so far for "every sample <= limit" (see the module doc)."""
    x = np.asarray(samples, dtype=float)
    n = int(x.size)
    if n and float(x.max()) > limit:
        return SequentialResult("fail", n, None, f"sample {float(x.max()):.4g} past the limit {limit:g} "
                                                 f"(at sample {int(np.argmax(x > limit)) + 1} of {n})")
    if n not in plan.looks:
        return SequentialResult("continue", n, None, f"{n} samples, next look at "
                                                     f"{next((m for m in plan.looks if m > n), plan.n_max)}")
    k = tolerance_factor(n, p, plan.per_look_confidence)
    bound = float(x.mean() + k * x.std(ddof=1))
    how = (f"{p:.0%} of the unit's population <= {bound:.4g} at {plan.per_look_confidence:.2%} "
           f"(k = {k:.2f}, n = {n}, {len(plan.looks)} looks, {plan.confidence:.0%} overall)")
    if bound <= limit:
        return SequentialResult("pass", n, bound, f"stopped early: {how}")
    if n >= plan.n_max:
        return SequentialResult("pass", n, float(x.max()), f"all {n} samples within the limit (census at the "
                                                           f"last look; tolerance bound {bound:.4g} undecided)")
    return SequentialResult("continue", n, bound, f"undecided: {how}")


def mean_rule(run_means: ArrayLike, limit: float, plan: SequentialPlan,
              comparator: Literal["<=", ">="] = "<=") -> SequentialResult:
    """The decision after the runs so far for "mean <= limit" (or ">="), t over run means."""
    x = np.asarray(run_means, dtype=float)
    n = int(x.size)
    if n not in plan.looks:
        return SequentialResult("continue", n, None, f"{n} runs, next look at "
                                                     f"{next((m for m in plan.looks if m > n), plan.n_max)}")
    mean = float(x.mean())
    half = float(sps.t.ppf(plan.per_look_confidence, n - 1)) * float(x.std(ddof=1)) / math.sqrt(n)
    good, bad = (mean + half, mean - half) if comparator == "<=" else (mean - half, mean + half)
    passes = good <= limit if comparator == "<=" else good >= limit
    fails = bad > limit if comparator == "<=" else bad < limit
    how = (f"mean {mean:.4g}, {plan.per_look_confidence:.2%} bounds {mean - half:.4g} .. {mean + half:.4g} "
           f"over {n} runs ({len(plan.looks)} looks, {plan.confidence:.0%} overall)")
    if passes:
        return SequentialResult("pass", n, good, how)
    if fails:
        return SequentialResult("fail", n, bad, how)
    return SequentialResult("continue", n, good, f"undecided: {how}")
