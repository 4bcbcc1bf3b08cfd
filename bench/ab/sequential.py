"""The A/B's sequential rule: two builds' paired block differences on the same units, pooled per
phone model, decided look by look into *regressed*, *improved* or *no change beyond the threshold*.

The data of one gate on one model: for each unit, one number per ABBA block, the log of the ratio
B/A (the block's two B segments against its two A segments: a linear drift inside the block cancels,
bench/ab/schedule.py). Units are pooled with each block weighted alike and each unit's own
variance (stratified: a unit's level never counts as noise; a noisy unit widens the interval
instead of being averaged away), Student's t with Welch-Satterthwaite degrees of freedom.

Three one-sided questions are asked at every look of a fixed plan (block counts):

- R: is B worse than A at all?     rejects "change <= 0"          -> regressed
- I: is B better than A at all?    rejects "change >= 0"          -> improved
- E: is the change inside +-margin? rejects "|change| >= margin"  -> no change beyond the threshold
  (two one-sided tests, TOST)

R and I share `alpha` (alpha / 2 each: the false-alarm rate on two identical builds); E gets
`beta` (the rate of calling "no change" on a change of the threshold's size, so the power at the
threshold is at least 1 - beta less the chance of ending undecided). Each error is spent over the
looks by a power spending function, share(t) = t ** rho with t the look's share of the last
look's blocks, and each look tests at its increment (Bonferroni over the looks: the errors of
all looks together stay within what was stated, whatever the correlation between looks).
`family` divides alpha among comparisons decided together (gates x models of one A/B).
The rule stops at the first look where E, R or I decides, E asked first: a change shown inside
the threshold is *no change beyond the threshold* even when it is real (its estimate and interval
say how big), so *regressed* means worse and not shown within the threshold. At the last look an
undecided gate is *undecided*, with its interval. Operating characteristics: bench/ab/operating.py runs this code.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats as sps

Call = Literal["regressed", "improved", "no change", "undecided", "continue"]
REGRESSED: Call = "regressed"
IMPROVED: Call = "improved"
NO_CHANGE: Call = "no change"
UNDECIDED: Call = "undecided"
CONTINUE: Call = "continue"
SETTLED: frozenset[Call] = frozenset({REGRESSED, IMPROVED, NO_CHANGE})


@dataclass(frozen=True)
class AbPlan:
    """When the rule may decide (blocks per unit) and which errors it promises."""

    looks: tuple[int, ...]
    threshold: float = 0.03  # relative change that matters (the equivalence margin)
    alpha: float = 0.05  # false alarm (regressed or improved) on identical builds, over all looks and the family
    beta: float = 0.05  # "no change" called on a change of the threshold's size, over all looks
    rho: float = 2.0  # error spending: share spent by a look = (its blocks / the last look's) ** rho
    family: int = 1  # comparisons decided together; alpha is shared among them (Bonferroni)

    def __post_init__(self) -> None:
        if not self.looks or self.looks[0] < 2 or list(self.looks) != sorted(set(self.looks)):
            raise ValueError(f"looks must be increasing block counts >= 2, got {self.looks}")
        if not 0.0 < self.threshold < 1.0:
            raise ValueError(f"threshold must be a relative change in (0, 1), got {self.threshold}")
        if not (0.0 < self.alpha < 0.5 and 0.0 < self.beta < 0.5):
            raise ValueError(f"alpha and beta must be in (0, 0.5), got {self.alpha}, {self.beta}")
        if self.rho <= 0 or self.family < 1:
            raise ValueError(f"rho must be > 0 and family >= 1, got {self.rho}, {self.family}")

    @classmethod
    def spaced(cls, first: int, last: int, *, threshold: float = 0.03, alpha: float = 0.05, beta: float = 0.05,
               rho: float = 2.0, family: int = 1) -> AbPlan:
        """A look after every block from `first` to `last`."""
        return cls(tuple(range(first, last + 1)), threshold, alpha, beta, rho, family)

    @property
    def max_blocks(self) -> int:
        return self.looks[-1]

    @property
    def margin(self) -> float:
        """The threshold on the log-ratio scale the rule works on."""
        return math.log1p(self.threshold)

    def _spent(self, index: int, total: float) -> float:
        share = lambda i: (self.looks[i] / self.max_blocks) ** self.rho if i >= 0 else 0.0  # noqa: E731
        return total * (share(index) - share(index - 1))

    def alpha_at(self, index: int) -> float:
        """One-sided level of R (and of I) at the look `index`."""
        return self._spent(index, self.alpha / (2.0 * self.family))

    def beta_at(self, index: int) -> float:
        """Level of each of E's two one-sided tests at the look `index`."""
        return self._spent(index, self.beta)

    def describe(self) -> str:
        return (f"looks after {', '.join(map(str, self.looks))} blocks; false alarm <= {self.alpha:.0%}"
                + (f" over {self.family} comparisons" if self.family > 1 else "")
                + f"; 'no change' on a ±{self.threshold:.0%} change <= {self.beta:.0%}; spent as t^{self.rho:g}")


@dataclass(frozen=True)
class Estimate:
    """The pooled change of one gate on one model: mean log-ratio B/A and its standard error."""

    effect: float
    se: float
    df: float
    blocks: int  # block differences pooled (over the units)
    units: int

    @property
    def relative(self) -> float:
        return math.expm1(self.effect)

    def bounds(self, one_sided: float) -> tuple[float, float]:
        """(lower, upper) log-ratio bounds, each one-sided at level `one_sided`."""
        half = _t(one_sided, self.df) * self.se if self.se > 0 else 0.0
        return self.effect - half, self.effect + half

    def interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """The two-sided interval of the relative change (not adjusted for the looks)."""
        lo, hi = self.bounds((1.0 - confidence) / 2.0)
        return math.expm1(lo), math.expm1(hi)


@dataclass(frozen=True)
class Decision:
    call: Call
    look: int  # blocks per unit when it was taken
    estimate: Estimate | None
    bounds: tuple[float, float] | None  # the relative bounds the call rests on
    level: float | None  # one-sided level of each of those bounds
    detail: str

    @property
    def settled(self) -> bool:
        return self.call in SETTLED


def pooled(blocks: Mapping[str, Sequence[float]]) -> Estimate | None:
    """Each unit's block log-ratios pooled: every block weighs alike, each unit's variance its own
    (Welch-Satterthwaite df). None until some unit has two blocks."""
    used = {u: np.asarray(d, dtype=float) for u, d in blocks.items() if len(d) >= 2}
    if not used:
        return None
    total = sum(d.size for d in used.values())
    effect = float(sum(d.sum() for d in used.values())) / total
    parts = [(d.size * float(np.var(d, ddof=1)) / total ** 2, d.size - 1) for d in used.values()]
    var = sum(a for a, _ in parts)
    df = var ** 2 / sum(a * a / dof for a, dof in parts) if var > 0 else float(total - len(used))
    return Estimate(effect, math.sqrt(var), df, total, len(used))


def decide(blocks: Mapping[str, Sequence[float]], plan: AbPlan, look: int, *,
           higher_is_worse: bool = True) -> Decision:
    """The rule's call after `look` blocks per unit (a block count not in the plan: continue)."""
    if look not in plan.looks:
        following = next((k for k in plan.looks if k > look), None)
        return Decision(CONTINUE if following else UNDECIDED, look, pooled(blocks), None, None,
                        f"{look} blocks, next look at {following}" if following else f"{look} blocks: past the plan")
    index = plan.looks.index(look)
    last = index == len(plan.looks) - 1
    estimate = pooled(blocks)
    if estimate is None:
        return Decision(UNDECIDED if last else CONTINUE, look, None, None, None, "fewer than two blocks on every unit")
    a, b = plan.alpha_at(index), plan.beta_at(index)
    worse, better = (REGRESSED, IMPROVED) if higher_is_worse else (IMPROVED, REGRESSED)
    what = (f"{100 * estimate.relative:+.2f} % over {estimate.blocks} blocks on {estimate.units} unit(s) "
            f"(s.e. {100 * estimate.se:.2f} %, df {estimate.df:.1f})")
    # E first: a change shown inside the threshold is no change beyond it, even when it is real
    # (a +0.5 % with a tight interval is not what a regression call is for).
    elo, ehi = estimate.bounds(b)
    if -plan.margin < elo and ehi < plan.margin:
        return Decision(NO_CHANGE, look, estimate, (math.expm1(elo), math.expm1(ehi)), b,
                        f"{what}: within ±{plan.threshold:.0%} ({100 * math.expm1(elo):+.2f} .. "
                        f"{100 * math.expm1(ehi):+.2f} % at {1 - b:.4%} each side)")
    lo, hi = estimate.bounds(a)
    if lo > 0:
        return Decision(worse, look, estimate, (math.expm1(lo), math.expm1(hi)), a,
                        f"{what}: higher, lower bound {100 * math.expm1(lo):+.2f} % at {1 - a:.4%}")
    if hi < 0:
        return Decision(better, look, estimate, (math.expm1(lo), math.expm1(hi)), a,
                        f"{what}: lower, upper bound {100 * math.expm1(hi):+.2f} % at {1 - a:.4%}")
    return Decision(UNDECIDED if last else CONTINUE, look, estimate, (math.expm1(elo), math.expm1(ehi)), b,
                    f"{what}: neither a change nor within ±{plan.threshold:.0%} yet")


@functools.lru_cache(maxsize=4096)
def _t_cached(level: float, df: float) -> float:
    return float(sps.t.isf(level, df))


def _t(level: float, df: float) -> float:
    """Student's one-sided critical value (df rounded to a tenth: the cache stays small)."""
    return _t_cached(level, round(max(df, 1.0), 1))
