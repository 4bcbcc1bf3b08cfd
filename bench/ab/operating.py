"""Operating characteristics of the A/B rule, by Monte-Carlo through the rule's own code.

Block log-ratios are drawn for each unit (normal around the true change, each unit its own
spread: a noisy unit is a larger sigma) and handed to `sequential.decide` look by look exactly
as the A/B runner hands it measured blocks. What comes out is the share of each call and the
blocks it took: the false-alarm rate at no change, the power at a change, and the smallest change
called *regressed* with the stated power (`detectable_change`). The sigma of a gate is the
spread of one block's log-ratio on one unit (bench/ab/measure.py's segments on the emulated
station: benchmarks/bench_bisect.py measures it).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .sequential import CONTINUE, IMPROVED, NO_CHANGE, REGRESSED, UNDECIDED, AbPlan, decide


@dataclass(frozen=True)
class Operating:
    """Shares of each call over `reps` simulated A/Bs at one true change."""

    change: float  # true relative change (B / A - 1)
    reps: int
    regressed: float
    improved: float
    no_change: float
    undecided: float
    mean_blocks: float  # blocks per unit when the rule stopped

    @property
    def false_alarm(self) -> float:
        """Share called a change at all (the false-alarm rate when `change` is 0)."""
        return self.regressed + self.improved


def simulate(plan: AbPlan, *, change: float, sigma: float | Sequence[float], reps: int,
             rng: np.random.Generator, tails: float | None = None) -> Operating:
    """`reps` A/Bs of a gate whose true relative change is `change`; `sigma`: each unit's spread of
    one block's log-ratio (one number: one unit). `tails`: Student-t noise with this many degrees
    of freedom (scaled to the same sigma) instead of normal, to see the rule off its model."""
    sigmas = np.atleast_1d(np.asarray(sigma, dtype=float))
    counts = {REGRESSED: 0, IMPROVED: 0, NO_CHANGE: 0, UNDECIDED: 0}
    blocks_used = 0
    shape = (reps, sigmas.size, plan.max_blocks)
    if tails is None:
        noise = rng.standard_normal(shape)
    else:
        noise = rng.standard_t(tails, shape) * math.sqrt((tails - 2.0) / tails)
    draws = math.log1p(change) + noise * sigmas[None, :, None]
    names = [f"unit{u}" for u in range(sigmas.size)]
    for rep in range(reps):
        for look in plan.looks:
            decision = decide({n: draws[rep, u, :look] for u, n in enumerate(names)}, plan, look)
            if decision.call != CONTINUE:
                counts[decision.call] += 1
                blocks_used += look
                break
    share = {call: n / reps for call, n in counts.items()}
    return Operating(change, reps, share[REGRESSED], share[IMPROVED], share[NO_CHANGE], share[UNDECIDED],
                     blocks_used / reps)


def detectable_change(plan: AbPlan, *, sigma: float | Sequence[float], power: float = 0.95, reps: int = 400,
                      rng: np.random.Generator, step: float = 0.005, ceiling: float = 0.5) -> float:
    """The smallest relative change (on a `step` grid, up to `ceiling`) called *regressed* with at
    least `power`, found by bisection (power grows with the change); `ceiling` when none is."""
    def powered(k: int) -> bool:
        return simulate(plan, change=k * step, sigma=sigma, reps=reps, rng=rng).regressed >= power

    lo, hi = 0, int(round(ceiling / step))
    if not powered(hi):
        return ceiling
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if powered(mid) else (mid, hi)
    return hi * step


def what_gates_detect(plan: AbPlan, blocks: Mapping[tuple[str, str], Mapping[str, Sequence[float]]], *,
                      rng: np.random.Generator, power: float = 0.95, reps: int = 200) -> dict[tuple[str, str], float]:
    """(model, metric) -> the change that gate detects with `power` in `plan`, at the spread its
    units' blocks showed (each unit its own; a unit with fewer than two blocks is left out)."""
    out = {}
    for key, units in blocks.items():
        sigmas = [float(np.std(d, ddof=1)) for d in units.values() if len(d) >= 2]
        if sigmas:
            out[key] = detectable_change(plan, sigma=sigmas, power=power, reps=reps, rng=rng)
    return out


def stated_power(plan: AbPlan, spread: float, units: int, *, rng: np.random.Generator,
                 reps: int = 200) -> tuple[float, float]:
    """Before a run: (the change a gate of this spread detects with 95 % power, its power at the
    plan's threshold) on a model of `units` phones."""
    sigma = [spread] * units
    return (detectable_change(plan, sigma=sigma, reps=reps, rng=rng),
            simulate(plan, change=plan.threshold, sigma=sigma, reps=reps, rng=rng).regressed)
