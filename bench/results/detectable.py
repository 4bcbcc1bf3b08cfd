"""What a nightly gate could see on one comparison: the smallest change it calls with 95 % power (its
minimum detectable effect), and whether a change of its practical threshold's size passes most
nights unseen.

A gate calls a change *regressed* when Holm's corrected p is below α and the change reaches the
practical threshold. A lone change must clear Holm's first step, α/m over the night's m model-level
comparisons, so its two-sided z is z(1 − α/2m). With r the standard error of the difference
relative to the baseline's value, a true relative change δ is observed as ~N(δ, r); the call needs
the observation to reach the *bar*, max(threshold, z·r). The gate therefore detects, with power P,
every true change of at least bar + z(P)·r, and calls a change of exactly the threshold with
probability Φ((threshold − bar)/r). That is below one half when z·r (the test's *resolution*) is
above the threshold: there the night's noise, not the threshold, decides what the gate sees, and a
comparison with more samples (an A/B) would see what it cannot.

`benchmarks/bench_nightly_gates.py` simulates the same gates night by night; this is its closed
form for the one comparison at hand.
"""
from __future__ import annotations

from dataclasses import dataclass

from scipy import stats

POWER = 0.95


@dataclass(frozen=True)
class Detectable:
    """A gate's sight on one comparison; every figure is relative to the baseline's value."""

    threshold: float  # the change of interest: the profile's practical threshold
    resolution: float  # the smallest observed change Holm's first step calls real
    detects: float  # the smallest true change called with probability POWER
    power_at_threshold: float  # how often a true change of exactly the threshold is called
    power: float = POWER

    @property
    def sees_threshold(self) -> bool:
        """False when a threshold-sized change passes most nights unseen (its resolution is coarser)."""
        return self.resolution <= self.threshold


def detectable(se: float | None, baseline: float, threshold: float, family: int, alpha: float,
               power: float = POWER) -> Detectable | None:
    """None when the comparison states no uncertainty or has no baseline value to be relative to."""
    if se is None or se <= 0 or not baseline or family < 1:
        return None
    r = se / abs(baseline)
    resolution = float(stats.norm.isf(alpha / (2 * family))) * r
    bar = max(threshold, resolution)
    return Detectable(threshold, resolution, bar + float(stats.norm.ppf(power)) * r,
                      float(stats.norm.sf((bar - threshold) / r)), power)
