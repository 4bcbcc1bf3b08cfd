"""Statistics for verdicts: each one decides on a confidence bound, never on a bare estimate.

Decision rules (field notes, "Statistics for verdicts"):

- percentile: distribution-free order-statistic bound, the MLPerf LoadGen early-stopping rule.
  "p of the population meets the limit" holds at confidence c when the number of samples beyond
  the limit is at most t, the largest integer with P[Binomial(N, 1 - p) <= t] <= 1 - c.
- std: the largest of a studentized bootstrap bound of log s^2 over the independent units
  (samples, runs, or moving blocks of a data-driven length), a bulk + exponential-tail bound
  (the sampling spread of s is mostly rare stalls'), and the chi-square bound sigma <= s *
  sqrt((n-1) / chi2_{1-c, n-1}) with the effective n (exact for independent normal samples).
  The chi-square bound alone covered 58-73 % at nominal 95 % on the emulated runtime's skewed,
  stalling token latencies, the bootstrap alone 91-95 %, the three together >= 95 %
  (benchmarks/bench_coverage.py; docs/uncertainty.md).
- mean: one-sided Student-t bound.
- proportion: exact one-sided Clopper-Pearson bound.
- too few samples to ever pass at this confidence -> Outcome.INSUFFICIENT, never a pass.

Autocorrelated samples (token latencies within a run drift together) are not N independent
trials. Percentiles and means use an *effective sample size* from the measured autocorrelation
(a spread uses it for its chi-square floor): it is deterministic (a verdict recomputed from the
raw data is identical; the bootstrap is seeded for the same reason), it costs one FFT, it falls back to exactly the independent-sample rule on white noise, and the effective
count n_eff slots straight into the same chi-square / t / binomial rules, so "how sure" is
reported in one number a reader can check. For a mean n_eff = N / (1 + 2 sum rho_k); for a
percentile the same, with rho measured on the indicator "sample beyond the p-quantile" (what
the binomial rule counts); for a variance n_eff = N / (1 + 2 sum rho_k^2) (Bartlett's formula
for a Gaussian process); the sums run over the lags before the autocorrelation first drops
inside the white-noise band 2/sqrt(N). With ``independence="run"`` the samples come as a list
of runs: the autocorrelation is pooled within runs around the grand mean, so run-to-run level
shifts lower n_eff towards the number of runs; a mean uses the run means themselves (t over
runs, never narrower than Johnson's skew-corrected t). When runs differ (each its own level, a
drift inside each), the run is the unit of evidence: a percentile's effective size is also at
most N over the design effect of its exceedances between runs, and a spread's upper bound is
the between-run variance (chi-square over run means) plus the within-run variance (skew-corrected
t over runs), each at half the error; benchmarks/bench_run_coverage.py shows the coverage on
series built to break them (tests/run_series.py). On AR(1) series (tests/test_stats.py) the naive 95 % bounds cover the truth ~70 % of
the time, these ~92-96 %.
"""
from __future__ import annotations

import logging
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, TypedDict

import numpy as np
from numpy.typing import ArrayLike
from scipy import signal
from scipy import stats as sps

from phonebench.core import judge
from phonebench.core.verdict import COMPARATORS, Verdict

log = logging.getLogger(__name__)

Independence = Literal["sample", "block", "run"]
INDEPENDENCE: tuple[str, ...] = ("sample", "block", "run")
Samples = ArrayLike | Sequence[ArrayLike]  # one series, or a list of runs
MIN_RUNS = 5  # fewer runs cannot show run-to-run variation


class _Base(TypedDict):
    """The Verdict fields a statistic fixes before deciding (_decide, _invalid add the rest)."""

    name: str
    unit: str
    limit: float | None
    comparator: str
    statistic: str
    n: int


class _SampledBase(_Base):
    """A statistic decided on a confidence bound."""

    confidence: float


# --------------------------------------------------------------------------- sample counts

@lru_cache(maxsize=4096)
def max_exceedances(n: int, p: float, confidence: float) -> int:
    """Largest t with P[Binomial(n, 1 - p) <= t] <= 1 - confidence; -1 when even 0 is too many."""
    _check_fraction("p", p)
    _check_fraction("confidence", confidence)
    if n <= 0:
        return -1
    alpha = 1.0 - confidence
    k = int(sps.binom.ppf(alpha, n, 1.0 - p))  # smallest k with cdf(k) >= alpha
    while k >= 0 and sps.binom.cdf(k, n, 1.0 - p) > alpha:
        k -= 1
    while k + 1 <= n and sps.binom.cdf(k + 1, n, 1.0 - p) <= alpha:
        k += 1
    return k


@lru_cache(maxsize=256)
def min_samples_percentile(p: float, confidence: float, exceedances: int = 0) -> int:
    """Smallest N at which a percentile claim can pass with `exceedances` samples beyond the limit."""
    _check_fraction("p", p)
    _check_fraction("confidence", confidence)
    lo, hi = 0, 1  # max_exceedances is non-decreasing in n: bracket, then bisect
    while max_exceedances(hi, p, confidence) < exceedances:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if max_exceedances(mid, p, confidence) >= exceedances else (mid, hi)
    return hi


def std_bound_factor(n: float, confidence: float, side: Literal["upper", "lower"] = "upper") -> float:
    """sigma bound / s for n (effective) samples: sqrt((n-1) / chi2 quantile); 1.134 at n=100, 95 %."""
    _check_fraction("confidence", confidence)
    if n < 2:
        return math.inf if side == "upper" else 0.0
    q = 1.0 - confidence if side == "upper" else confidence
    return math.sqrt((n - 1) / sps.chi2.ppf(q, n - 1))


def min_samples_std(ratio: float, confidence: float) -> int:
    """Smallest n whose upper std bound factor is <= ratio (= limit / the sigma you expect)."""
    if ratio <= 1.0:
        raise ValueError(f"ratio must be > 1 (limit / expected sigma), got {ratio}")
    n = 2
    while std_bound_factor(n * 2, confidence) > ratio:
        n *= 2
    lo, hi = n, n * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if std_bound_factor(mid, confidence) <= ratio else (mid, hi)
    return hi if std_bound_factor(lo, confidence) > ratio else lo


def clopper_pearson(successes: int, n: int, confidence: float,
                    side: Literal["lower", "upper"] = "lower") -> float:
    """Exact one-sided Clopper-Pearson bound on a success probability."""
    _check_fraction("confidence", confidence)
    if n <= 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n and n > 0, got {successes}/{n}")
    alpha = 1.0 - confidence
    if side == "lower":
        return 0.0 if successes == 0 else float(sps.beta.ppf(alpha, successes, n - successes + 1))
    return 1.0 if successes == n else float(sps.beta.ppf(confidence, successes + 1, n - successes))


@lru_cache(maxsize=256)
def min_samples_proportion(limit: float, confidence: float, comparator: str = ">=") -> int:
    """Smallest n at which a flawless record (all successes, or no failures) passes."""
    _check_fraction("limit", limit)
    side = _side(comparator)
    n = max(1, math.floor(math.log(1.0 - confidence) / math.log(limit if side == "lower" else 1.0 - limit)) - 1)
    while True:
        bound = clopper_pearson(n if side == "lower" else 0, n, confidence, side)
        if COMPARATORS[comparator](bound, limit):
            return n
        n += 1


# --------------------------------------------------------------------------- independence

@dataclass(frozen=True)
class EffectiveSize:
    """How many independent samples a series is worth."""

    n: int  # samples given
    n_eff: float  # independent samples they are worth
    tau: float  # n / n_eff (1 for independent samples)
    lags: int  # autocorrelation lags summed
    runs: int  # runs given (1 for a single series)
    method: str


def effective_sample_size(samples: Samples, kind: Literal["mean", "variance"] = "mean",
                          independence: Independence = "block") -> EffectiveSize:
    """Effective sample size of one series ("block") or of a list of runs ("run").

    kind="mean" applies to means and exceedance fractions, kind="variance" to a standard
    deviation. independence="sample" trusts the samples as independent (n_eff = n).
    """
    flat, runs = _normalise(samples)
    n = flat.size
    if independence == "sample" or n < 3:
        return EffectiveSize(n, float(n), 1.0, 0, len(runs), "independent samples")
    if independence not in INDEPENDENCE:
        raise ValueError(f"independence must be one of {INDEPENDENCE}, got {independence!r}")
    if independence == "block":
        runs = [flat]
    grand = flat.mean()
    longest = max(r.size for r in runs)
    acov = np.zeros(longest)
    for r in runs:
        rc = r - grand
        acov[:r.size] += signal.correlate(rc, rc, mode="full", method="fft")[r.size - 1:]
    if acov[0] <= 0:  # constant data: nothing to correlate
        return EffectiveSize(n, float(n), 1.0, 0, len(runs), "constant samples")
    rho = acov[1:] / acov[0]
    inside = np.nonzero(rho < 2.0 / math.sqrt(n))[0]  # first lag inside the white-noise band
    lags = int(inside[0]) if inside.size else rho.size
    head = rho[:lags]
    tau = 1.0 + 2.0 * float(np.sum(head if kind == "mean" else head * head))
    method = f"autocorrelation over {lags} lags"
    if independence == "run":
        method += f", pooled within {len(runs)} runs"
    return EffectiveSize(n, max(1.0, n / tau), max(1.0, tau), lags, len(runs), method)


def cluster_design_effect(indicator: Sequence[np.ndarray]) -> float:
    """Design effect of an exceedance fraction over runs: its between-run (cluster-robust) variance
    over the binomial variance of the same count of independent samples, at least 1.

    Runs with their own level put the exceedances of a high quantile into a few runs; the
    autocorrelation pooled within runs sees little of that when runs are short, the run-level
    variance of the count sees all of it (Kish's design effect, sandwich estimate over runs)."""
    k = np.array([float(r.sum()) for r in indicator])
    n = np.array([float(r.size) for r in indicator])
    total, runs = float(n.sum()), k.size
    e = float(k.sum()) / total
    if runs < 2 or not 0.0 < e < 1.0:
        return 1.0
    between = runs / (runs - 1.0) * float(np.sum((k - e * n) ** 2))
    return max(1.0, between / (total * e * (1.0 - e)))


def _at_least_design_effect(eff: EffectiveSize, indicator: Sequence[np.ndarray]) -> EffectiveSize:
    deff = cluster_design_effect(indicator)
    if deff <= eff.tau:
        return eff
    return EffectiveSize(eff.n, max(1.0, eff.n / deff), deff, eff.lags, eff.runs,
                         f"design effect {deff:.1f} of {eff.runs} runs (exceedances cluster by run)")


# --------------------------------------------------------------------------- verdicts

def percentile_verdict(name: str, samples: Samples, *, p: float, limit: float | None, unit: str,
                       confidence: float = 0.95, comparator: str = "<=", min_samples: int = 0,
                       independence: Independence = "sample", min_runs: int = MIN_RUNS) -> Verdict:
    """Fraction p of the population meets the limit: for "<=" the p-quantile is <= limit.

    For ">=" / ">" the (1 - p)-quantile is >= limit (p of the samples are at least the limit).
    +inf (a timeout) counts as beyond an upper limit; NaN makes the verdict INVALID.
    """
    side = _side(comparator)
    statistic = _percentile_label(p)
    flat, runs = _normalise(samples)
    base = _SampledBase(name=name, unit=unit, limit=limit, comparator=comparator, statistic=statistic,
                        confidence=confidence, n=int(flat.size))
    if np.isnan(flat).any():
        return _invalid(base, f"{int(np.isnan(flat).sum())} NaN samples")
    if side == "upper" and np.isneginf(flat).any() or side == "lower" and np.isposinf(flat).any():
        return _invalid(base, "infinite samples on the good side of the limit")
    if flat.size == 0:  # nothing measured: no quantile exists, never a pass
        return _decide(base, None, None, min_samples_percentile(p, confidence), "no samples", {})
    # Mirror a lower-side claim onto the upper side: the rule then reads the same for both.
    sign = 1.0 if side == "upper" else -1.0
    ordered = np.sort(sign * flat)
    q = float(np.quantile(ordered, p, method="inverted_cdf"))
    # Independence that matters here is that of "beyond the p-quantile" events, so the
    # autocorrelation is measured on that indicator (it works for timeouts, too).
    indicator = [(sign * r > q).astype(float) for r in runs]
    eff = effective_sample_size(indicator if len(runs) > 1 else indicator[0], "mean", independence)
    if independence == "run" and len(runs) > 1:  # runs that differ: the run is the unit of evidence
        eff = _at_least_design_effect(eff, indicator)
    n_min = min_samples_percentile(p, confidence)
    n_required = max(min_samples, math.ceil(n_min * eff.tau))
    value = sign * q
    n_eff = int(math.floor(eff.n_eff))
    t_eff = max_exceedances(n_eff, p, confidence)
    allowed = -1 if t_eff < 0 else int(math.floor(t_eff * eff.tau + 1e-9))
    bound = None
    if 0 <= allowed < flat.size:
        bound = sign * float(ordered[flat.size - 1 - allowed])
    beyond = None if limit is None else int(np.sum(~COMPARATORS[comparator](flat, limit)))
    extra = {"p": p, "exceedances": beyond, "allowed_exceedances": allowed, "n_eff": eff.n_eff,
             "independence": independence, "runs": eff.runs}
    detail = (f"{statistic} {comparator} {limit} {unit} at {confidence:.0%} confidence: "
              f"{beyond} of {flat.size} samples beyond the limit, at most {allowed} allowed")
    if eff.tau > 1.0:
        detail += f" (autocorrelated: worth {eff.n_eff:.0f} independent samples, {eff.method})"
    return _decide(base, value, bound, n_required, detail, extra, runs=eff.runs,
                   min_runs=min_runs if independence == "run" else 0)


def std_verdict(name: str, samples: Samples, *, limit: float | None, unit: str, confidence: float = 0.95,
                comparator: str = "<=", min_samples: int = 0, independence: Independence = "sample",
                min_runs: int = MIN_RUNS) -> Verdict:
    """Standard deviation against a limit, decided on the most cautious of three bounds.

    A studentized bootstrap whose units follow `independence`: single samples ("sample"), whole
    runs ("run", or "block" given a list of runs), or moving blocks of a data-driven length
    ("block"); see std_bootstrap_bound. For an upper bound, the bulk + exponential-tail bound
    (std_tail_bound) where the sample has a far tail. The chi-square bound with the effective
    sample size (exact for independent normal samples), so the verdict is never less cautious
    than the normal theory.
    """
    side = _side(comparator)
    flat, runs = _normalise(samples)
    base = _SampledBase(name=name, unit=unit, limit=limit, comparator=comparator, statistic="std",
                        confidence=confidence, n=int(flat.size))
    if not np.isfinite(flat).all():
        return _invalid(base, f"{int((~np.isfinite(flat)).sum())} non-finite samples")
    n_required = max(min_samples, 2)
    if flat.size < 2:
        return _decide(base, None, None, n_required, "fewer than 2 samples", {})
    s = float(np.std(flat, ddof=1))
    eff = effective_sample_size(samples, "variance", independence)
    tau_mean = effective_sample_size(samples, "mean", independence).tau if eff.tau > 1.0 else 1.0
    # s^2 is biased low by the mean's own correlation: E[s^2] = sigma^2 (N - tau) / (N - 1).
    s_unbiased = s * math.sqrt((flat.size - 1) / max(flat.size - tau_mean, 1.0))
    chi2 = s_unbiased * std_bound_factor(eff.n_eff, confidence, side)
    if independence == "run" and side == "upper" and len(runs) >= 3:
        between, within, components = std_components_bound(runs, confidence)
        bound = max(chi2, components)
        extra: dict[str, float | str | None] = {
            "n_eff": eff.n_eff, "bound_factor": bound / s if s > 0 else None, "independence": independence,
            "runs": eff.runs, "chi_square_bound": chi2, "components_bound": components,
            "between_run_variance_bound": between, "within_run_variance_bound": within}
        detail = (f"s = {s:.4g} {unit}, {confidence:.0%} upper bound {bound:.4g} {unit}: between-run variance "
                  f"<= {between:.4g} (chi-square over {len(runs)} run means) plus within-run variance <= "
                  f"{within:.4g} (skew-corrected t over runs), chi-square from {eff.n_eff:.0f} effective "
                  f"samples {chi2:.4g}")
        return _decide(base, s, bound, max(n_required, math.ceil(2 * eff.tau)), detail, extra, runs=eff.runs,
                       min_runs=min_runs)
    # Runs given as a list are the natural units (a run starts afresh); a single series is cut in blocks.
    boot = std_bootstrap_bound(runs if len(runs) > 1 and independence != "sample" else flat, confidence, side,
                               independence)
    tail = std_tail_bound(flat, runs, confidence, independence, boot.block) if side == "upper" else None
    candidates = [b for b in (chi2, boot.bound, tail) if b is not None]
    bound = (max if side == "upper" else min)(candidates)
    extra = {"n_eff": eff.n_eff, "bound_factor": bound / s if s > 0 else None,
             "independence": independence, "runs": eff.runs, "chi_square_bound": chi2,
             "bootstrap_bound": boot.bound, "bootstrap_units": boot.units, "block_length": boot.block,
             "tail_bound": tail}
    detail = (f"s = {s:.4g} {unit}, {confidence:.0%} {side} bound {bound:.4g} {unit}: studentized bootstrap "
              f"over {boot.how} {_fmt(boot.bound)}, chi-square from {eff.n_eff:.0f} effective samples {chi2:.4g}, "
              f"bulk + exponential tail {_fmt(tail)}")
    if eff.tau > 1.0:
        detail += f" ({eff.method})"
        n_required = max(n_required, math.ceil(2 * eff.tau))
    return _decide(base, s, bound, n_required, detail, extra, runs=eff.runs,
                   min_runs=min_runs if independence == "run" else 0)


# --------------------------------------------------------------------------- runs that differ

def skew_corrected_upper(units: np.ndarray, confidence: float) -> float:
    """Upper confidence bound on the mean of iid units, Johnson's (1978) skewness-corrected t:
    the Student-t bound moved by the sample's third moment (a right-skewed mean is bounded wider)."""
    r = units.size
    m, sd = float(units.mean()), float(units.std(ddof=1))
    t = float(sps.t.ppf(confidence, r - 1))
    if sd <= 0 or r < 3:
        return m + t * sd / math.sqrt(r)
    m3 = float(np.mean((units - m) ** 3)) * r * r / ((r - 1.0) * (r - 2.0))
    return m + m3 / (6.0 * sd * sd * r) + t * sd / math.sqrt(r) + m3 * t * t / (3.0 * sd * sd * r)


def std_components_bound(runs: Sequence[np.ndarray], confidence: float) -> tuple[float, float, float]:
    """(between-run variance bound, within-run variance bound, std bound) with the run as the unit.

    The population's variance is the run means' variance plus the mean within-run variance around
    each run's own mean (E[w_j] + Var(m_j): the autocorrelation inside a run moves variance from
    one term to the other and cancels). Each term is bounded at half the error (Bonferroni): the
    between-run term by chi-square over the run means, the within-run term by a skew-corrected t
    over the runs' mean squares. Run lengths weight their mean squares (a short run says less)."""
    alpha = (1.0 - confidence) / 2.0
    means = np.array([float(r.mean()) for r in runs])
    sizes = np.array([float(r.size) for r in runs])
    within = np.array([float(np.mean((r - r.mean()) ** 2)) for r in runs]) * sizes / sizes.mean()
    count = means.size
    between = (count - 1) * float(np.var(means, ddof=1)) / float(sps.chi2.ppf(alpha, count - 1))
    within_upper = skew_corrected_upper(within, 1.0 - alpha)
    return between, within_upper, math.sqrt(max(between + within_upper, 0.0))


# --------------------------------------------------------------------------- bootstrap std

BOOTSTRAP_REPLICATES = 999
BOOTSTRAP_SEED = 0x5EED  # fixed: a verdict recomputed from its raw data is identical
MIN_UNITS = 10  # fewer resampling units cannot show a spread's sampling distribution
MAX_UNITS = 1000


@dataclass(frozen=True)
class BootstrapBound:
    bound: float | None  # None: too few units to resample
    units: int  # independent units resampled (samples, runs or blocks)
    block: int  # samples per unit (1 for single samples; 0 for runs of their own lengths)
    how: str


def std_bootstrap_bound(samples: np.ndarray | list[np.ndarray], confidence: float,
                        side: Literal["upper", "lower"] = "upper", independence: Independence = "sample",
                        replicates: int = BOOTSTRAP_REPLICATES) -> BootstrapBound:
    """One-sided bound on sigma by a studentized (bootstrap-t) bootstrap of log s^2.

    Units: single samples (independent), whole runs (a list of arrays), or moving blocks of a
    series whose length is chosen from the data (Politis-White, circular-block rule, on the
    squared deviations whose mean s^2 is). Each replicate draws units with replacement and the
    statistic is studentized by its own cluster (sandwich) standard error, so skewed and
    heavy-tailed samples (stalls) widen the bound as they should; the log keeps the bound of a
    positive quantity positive. Everything works on per-unit sums, so 999 replicates of 10^5
    samples cost a few matrix products.
    """
    _check_fraction("confidence", confidence)
    if isinstance(samples, list):
        sums = np.array([[r.size, r.sum(), np.dot(r, r)] for r in samples if r.size], dtype=float)
        block, how = 0, f"{len(sums)} runs"
        starts = None
    else:
        x = np.asarray(samples, dtype=float)
        block = 1 if independence == "sample" else optimal_block_length((x - x.mean()) ** 2)
        # At most MAX_UNITS units: blocks of consecutive samples are as independent as the samples
        # (or as the blocks they group), and resampling them costs B x MAX_UNITS, not B x N.
        block = max(block, math.ceil(x.size / MAX_UNITS))
        c1 = np.concatenate(([0.0], np.cumsum(x)))
        c2 = np.concatenate(([0.0], np.cumsum(x * x)))
        if block == 1:
            sums = np.column_stack((np.ones(x.size), x, x * x))
            starts, how = None, f"{x.size} samples"
        elif independence == "sample":  # non-overlapping groups of independent samples
            lo = np.arange(0, x.size - block + 1, block)
            sums = np.column_stack((np.full(lo.size, float(block)), c1[lo + block] - c1[lo], c2[lo + block] - c2[lo]))
            starts, how = None, f"{lo.size} groups of {block} independent samples"
        else:  # every moving block of `block` samples; a replicate strings ceil(N / block) together
            lo = np.arange(x.size - block + 1)
            sums = np.column_stack((np.full(lo.size, float(block)), c1[lo + block] - c1[lo], c2[lo + block] - c2[lo]))
            starts = np.arange(0, x.size - block + 1, block)  # non-overlapping: the original's units
            how = f"moving blocks of {block} samples"
    units = len(sums) if starts is None else len(starts)
    if units < MIN_UNITS:
        return BootstrapBound(None, units, block, how + f" (fewer than {MIN_UNITS} units: none)")
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    original = sums if starts is None else sums[starts]
    v_hat, se_hat = _log_variance_and_se(original[None, :, :])
    draws = rng.integers(0, len(sums), size=(replicates, units))
    v_star, se_star = _log_variance_and_se(sums[draws])
    ok = np.isfinite(v_star) & (se_star > 0)
    if not np.isfinite(v_hat[0]) or se_hat[0] <= 0 or ok.sum() < replicates // 2:
        return BootstrapBound(None, units, block, how + " (no spread to resample)")
    t = (v_star[ok] - v_hat[0]) / se_star[ok]
    q = float(np.quantile(t, 1.0 - confidence if side == "upper" else confidence))
    log_bound = 0.5 * (v_hat[0] - q * se_hat[0])
    # past the largest float (samples near 1e154 and beyond): a bound that large is no bound
    bound = math.exp(log_bound) if log_bound < _LOG_MAX_FLOAT else math.inf
    return BootstrapBound(bound, units, block, how)


_LOG_MAX_FLOAT = math.log(sys.float_info.max)


def _log_variance_and_se(units: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log of the pooled variance (ddof 1) and its cluster standard error, per replicate.

    units[b, j] = (count, sum, sum of squares) of the j-th unit replicate b drew. The influence of
    unit j on the pooled variance V is (Q_j - 2 m S_j + (m^2 - V) n_j) / N; the sum of its squares
    is the sandwich variance of V, and se(log V) = se(V) / V.
    """
    n, s1, s2 = units[..., 0], units[..., 1], units[..., 2]
    total = n.sum(-1)
    m = s1.sum(-1) / total
    v = s2.sum(-1) / total - m * m
    influence = s2 - 2.0 * m[:, None] * s1 + (m * m - v)[:, None] * n
    with np.errstate(divide="ignore", invalid="ignore"):
        se = np.sqrt(np.einsum("bj,bj->b", influence, influence)) / total / v
        return np.log(v * total / np.maximum(total - 1.0, 1.0)), se


def optimal_block_length(y: np.ndarray) -> int:
    """Politis-White (2004) block length for a circular/moving block bootstrap of the mean of y,
    with the Patton-Politis-White (2009) correction: flat-top lag window, bandwidth from the
    first run of insignificant autocorrelations. 1 for a series without autocorrelation."""
    y = np.asarray(y, dtype=float)
    n = y.size
    if n < 16:
        return 1
    yc = y - y.mean()
    scale = float(np.max(np.abs(yc))) if np.all(np.isfinite(yc)) else 0.0
    if not 0.0 < scale < math.inf:
        return 1
    yc = yc / scale  # the block length does not depend on scale; 1e100 squared would overflow to NaN
    acov = signal.correlate(yc, yc, mode="full", method="fft")[n - 1:] / n
    if acov[0] <= 0:
        return 1
    rho = acov / acov[0]
    k_n = max(5, int(math.sqrt(math.log10(n))))
    band = 2.0 * math.sqrt(math.log10(n) / n)
    max_lag = min(n // 2, int(math.ceil(math.sqrt(n))) + k_n)
    small = np.abs(rho[1:max_lag + k_n + 1]) < band
    m_hat = next((m for m in range(0, max_lag) if small[m:m + k_n].all()), max_lag)
    if m_hat == 0:
        return 1
    big_m = min(2 * m_hat, max_lag)
    lags = np.arange(-big_m, big_m + 1)
    u = np.abs(lags) / big_m
    window = np.where(u <= 0.5, 1.0, np.where(u <= 1.0, 2.0 * (1.0 - u), 0.0))
    r = acov[np.abs(lags)]
    g = float(np.sum(window * np.abs(lags) * r))
    spectrum0 = float(np.sum(window * r))
    if spectrum0 <= 0:
        return 1
    b = (2.0 * g * g / ((4.0 / 3.0) * spectrum0 * spectrum0)) ** (1.0 / 3.0) * n ** (1.0 / 3.0)
    if not math.isfinite(b):
        return 1
    return int(min(max(1, math.ceil(b)), n // MIN_UNITS))


MIN_TAIL_EXCEEDANCES = 5  # fewer points beyond the fence say nothing about the tail's scale


def std_tail_bound(flat: np.ndarray, runs: list[np.ndarray], confidence: float, independence: Independence,
                   block: int) -> float | None:
    """Upper bound on sigma from the bulk and the far tail separately (None: no far tail to model).

    Rare stalls dominate the sampling spread of s through their fourth moment, which a sample of a
    few dozen stalls estimates too low more often than not; no resampling of the sample can show
    stalls it does not hold. So sigma^2 = E[(x - m)^2; bulk] + E[(x - m)^2; tail] is bounded term
    by term, each at confidence 1 - alpha/3 (Bonferroni): the bulk (x up to Tukey's far-out fence
    Q3 + 3 IQR) by a t bound over independent units (runs, blocks or samples); the tail by the
    exact Poisson (Garwood) bound on the number of points beyond the fence times the mean square
    of an exponential excess whose mean has its exact chi-square bound: the generalised Pareto
    tail with shape 0 (peaks over a high threshold), which a stall or pause tail heavier than
    exponential would break (docs/uncertainty.md).
    """
    alpha = (1.0 - confidence) / 3.0
    n = flat.size
    q1, q3 = np.quantile(flat, (0.25, 0.75))
    fence = q3 + 3.0 * (q3 - q1)
    excess = flat[flat > fence] - fence
    k = excess.size
    if k < MIN_TAIL_EXCEEDANCES:
        return None
    m = float(flat.mean())
    if len(runs) > 1 and independence != "sample":
        units = runs
    else:
        size = max(block, math.ceil(n / MAX_UNITS), 1)
        units = [flat[i:i + size] for i in range(0, n, size)]
    bulk = np.array([float(np.sum(np.where(u <= fence, (u - m) ** 2, 0.0))) for u in units])
    if bulk.size < MIN_UNITS:
        return None
    bulk_upper = (bulk.sum() + sps.t.ppf(1.0 - alpha, bulk.size - 1) * bulk.std(ddof=1) * math.sqrt(bulk.size)) / n
    count_upper = sps.chi2.ppf(1.0 - alpha, 2 * k + 2) / 2.0
    scale_upper = 2.0 * k * float(excess.mean()) / sps.chi2.ppf(alpha, 2 * k)
    c = fence - m  # E[(fence + Y - m)^2] for Y exponential with mean b: c^2 + 2 c b + 2 b^2
    tail_upper = count_upper / n * (c * c + 2.0 * c * scale_upper + 2.0 * scale_upper ** 2)
    return math.sqrt(bulk_upper + tail_upper)


def _fmt(x: float | None) -> str:
    return "none" if x is None else f"{x:.4g}"


def mean_verdict(name: str, samples: Samples, *, limit: float | None, unit: str, confidence: float = 0.95,
                 comparator: str = "<=", min_samples: int = 0, independence: Independence = "sample",
                 min_runs: int = MIN_RUNS) -> Verdict:
    """Mean against a limit, decided on a one-sided Student-t bound.

    independence="run": the run means are the samples (t over runs); "block": the standard
    error uses the effective sample size of the series.
    """
    side = _side(comparator)
    flat, runs = _normalise(samples)
    base = _SampledBase(name=name, unit=unit, limit=limit, comparator=comparator, statistic="mean",
                        confidence=confidence, n=int(flat.size))
    if not np.isfinite(flat).all():
        return _invalid(base, f"{int((~np.isfinite(flat)).sum())} non-finite samples")
    n_required = max(min_samples, 2)
    if independence == "run":
        units = np.array([r.mean() for r in runs if r.size])
        n_eff = float(units.size)
        spread = float(np.std(units, ddof=1)) if units.size > 1 else math.nan
        how = f"t over {units.size} run means"
    else:
        eff = effective_sample_size(samples, "mean", independence)
        n_eff = eff.n_eff
        spread = float(np.std(flat, ddof=1)) if flat.size > 1 else math.nan
        how = f"t over {n_eff:.0f} effective samples" + (f" ({eff.method})" if eff.tau > 1 else "")
    if flat.size < 2 or n_eff < 2:
        return _decide(base, float(flat.mean()) if flat.size else None, None, n_required,
                       "fewer than 2 independent units", {"n_eff": n_eff}, runs=len(runs),
                       min_runs=min_runs if independence == "run" else 0)
    mean = float(flat.mean()) if independence != "run" else float(units.mean())
    t = float(sps.t.ppf(confidence, n_eff - 1))
    half = t * spread / math.sqrt(n_eff)
    bound = mean + half if side == "upper" else mean - half
    if independence == "run" and units.size >= 3:  # skewed run means: never narrower than Johnson's bound
        sign = 1.0 if side == "upper" else -1.0
        bound = sign * max(sign * bound, skew_corrected_upper(sign * units, confidence))
    detail = f"mean {mean:.4g} {unit}, {confidence:.0%} {side} bound {bound:.4g} {unit}, {how}"
    return _decide(base, mean, bound, n_required, detail,
                   {"n_eff": n_eff, "independence": independence, "runs": len(runs)}, runs=len(runs),
                   min_runs=min_runs if independence == "run" else 0)


def proportion_verdict(name: str, successes: int, n: int, *, limit: float | None, confidence: float = 0.95,
                       comparator: str = ">=", min_samples: int = 0, unit: str = "fraction") -> Verdict:
    """Success (or failure) rate against a limit, decided on the exact Clopper-Pearson bound."""
    side = _side(comparator)
    base = _SampledBase(name=name, unit=unit, limit=limit, comparator=comparator, statistic="rate",
                        confidence=confidence, n=int(n))
    if n < 0 or not 0 <= successes <= max(n, 0):
        return _invalid(base, f"impossible count {successes} of {n}")
    n_required = max(min_samples, 1)
    if limit is not None and 0.0 < limit < 1.0:
        n_required = max(n_required, min_samples_proportion(limit, confidence, comparator))
    if n == 0:
        return _decide(base, None, None, n_required, "no trials", {})
    bound = clopper_pearson(successes, n, confidence, side)
    detail = (f"{successes}/{n} = {successes / n:.4%}, exact {confidence:.0%} {side} bound {bound:.4%}")
    return _decide(base, successes / n, bound, n_required, detail, {"successes": int(successes)})


def extreme_verdict(name: str, samples: ArrayLike, *, limit: float | None, unit: str, comparator: str = "<=",
                    min_samples: int = 0, statistic: Literal["max", "min"] = "max") -> Verdict:
    """Every sample within the limit (max <= limit, or min >= limit). No confidence: it is a census."""
    flat, _ = _normalise(samples)
    base = _Base(name=name, unit=unit, limit=limit, comparator=comparator, statistic=statistic,
                 n=int(flat.size))
    if np.isnan(flat).any():
        return _invalid(base, f"{int(np.isnan(flat).sum())} NaN samples")
    if flat.size == 0:
        return _decide(base, None, None, max(min_samples, 1), "no samples", {})
    value = float(flat.max() if statistic == "max" else flat.min())
    return _decide(base, value, value, max(min_samples, 1), f"{statistic} of {flat.size} samples", {})


def count_verdict(name: str, count: int | ArrayLike, *, limit: float | None, unit: str = "events",
                  comparator: str = "<=", min_samples: int = 0, trials: int | None = None) -> Verdict:
    """A number of events (errors, kills) against a limit; an array is summed (one count per trial)."""
    counts = np.asarray(count, dtype=float).ravel()
    n = int(trials if trials is not None else counts.size)
    base = _Base(name=name, unit=unit, limit=limit, comparator=comparator, statistic="count", n=n)
    if np.isnan(counts).any():
        return _invalid(base, "NaN counts")
    total = float(counts.sum())
    return _decide(base, total, total, max(min_samples, 1), f"{total:g} {unit} in {n} trials", {})


def value_verdict(name: str, value: float | None, *, limit: float | None, unit: str, comparator: str = "<=",
                  tolerance: float | None = None, statistic: str = "value") -> Verdict:
    """One measured value; with comparator "==" a tolerance makes it |value - limit| <= tolerance."""
    base = _Base(name=name, unit=unit, limit=limit, comparator=comparator, statistic=statistic, n=1)
    if value is None or not math.isfinite(value):
        return _invalid(base, f"no valid value ({value})")
    if comparator == "==" and tolerance is not None and limit is not None:
        return judge.decide_statistic(**base, value=value, bound=value, n_required=1, tolerance=tolerance,
                                      extra={"tolerance": tolerance})
    return _decide(base, value, value, 1, "", {})


# --------------------------------------------------------------------------- helpers

def _decide(base: _Base, value: float | None, bound: float | None, n_required: int, detail: str,
            extra: Mapping[str, object], runs: int = 1, min_runs: int = 0) -> Verdict:
    return judge.decide_statistic(**base, value=value, bound=bound, n_required=n_required, detail=detail,
                                  extra=extra, runs=runs, min_runs=min_runs)


def _invalid(base: _Base, why: str) -> Verdict:
    return judge.invalid_statistic(**base, why=why)


def _normalise(samples: Samples) -> tuple[np.ndarray, list[np.ndarray]]:
    """(all samples flat, list of runs): a 1-D array is one run; a 2-D array or list of arrays, runs."""
    if isinstance(samples, np.ndarray):
        if samples.ndim <= 1:
            flat = samples.astype(float, copy=False).ravel()
            return flat, [flat]
        runs = [np.asarray(r, dtype=float).ravel() for r in samples]
    elif isinstance(samples, Sequence) and samples and all(np.ndim(r) >= 1 for r in samples):
        runs = [np.asarray(r, dtype=float).ravel() for r in samples]
    else:
        flat = np.asarray(samples, dtype=float).ravel()
        return flat, [flat]
    runs = [r for r in runs if r.size] or [np.empty(0)]  # a run that measured nothing is no evidence
    flat = np.concatenate(runs)
    return flat, runs


def _side(comparator: str) -> Literal["upper", "lower"]:
    if comparator in ("<=", "<"):
        return "upper"
    if comparator in (">=", ">"):
        return "lower"
    raise ValueError(f"a sampled statistic needs a one-sided comparator (<=, <, >=, >), got {comparator!r}")


def _percentile_label(p: float) -> str:
    return f"p{100 * p:.10g}"


def _check_fraction(what: str, x: float) -> None:
    if not 0.0 < x < 1.0:
        raise ValueError(f"{what} must be strictly between 0 and 1, got {x}")
