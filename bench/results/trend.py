"""A statistic's history per phone model across nights, and where it changed (`bench trend`).

Each night (run) gives one value per model: the mean of its phones' values, as `bench compare`
pools them. Change points are found by ruptures' PELT search (exact optimal segmentation of the
series into constant-mean pieces, l2 cost) with the BIC penalty 2·σ²·ln(n), σ the night-to-night noise
estimated robustly from the series itself (the median absolute first difference, so a step does
not inflate it). PELT proposes; the bench decides: a proposed change stands only when Welch's test
between the segments on either side says it is real (Bonferroni over the series' proposals, at
ALPHA) and it is at least the entry's practical threshold (`parameters.regression`, 5 % when
unstated). Each standing change names the build range it falls in: the last night before it and
the first night after, with the builds their phones ran.

Why ruptures and not Apache Otava (MongoDB's E-divisive with significance): Otava pins one NumPy
patch release and pulls BigQuery, Slack and Graphite clients; ruptures is the maintained
segmentation library with a small footprint, and the significance test here is a few lines of
SciPy.
"""
from __future__ import annotations

import datetime as dt
import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np
import ruptures
from scipy import stats

from .compare import ALPHA, DEFAULT_THRESHOLD, HIGHER_IS_WORSE, IMPROVED, REGRESSED, label
from .handover import BuildRange

MIN_SEGMENT = 3  # nights on each side of a change: fewer cannot tell a step from one odd night


@dataclass(frozen=True)
class HistoryPoint:
    """One phone's value of one statistic in one run, with what a trend needs around it (read from
    the store by bench.store.history.history)."""

    run_id: str
    started: dt.datetime | None
    dut: str
    model: str
    build: str | None
    name: str
    statistic: str | None
    value: float
    unit: str | None
    comparator: str | None
    claim: int | None
    bound: float | None = None
    confidence: float | None = None
    uncertainty: dict[str, Any] | None = None
    ambient_c: float | None = None  # the room the value was measured in (a thermal figure's extra["ambient"])


@dataclass(frozen=True)
class NightValue:
    run_id: str
    started: dt.datetime | None
    builds: tuple[str, ...]
    value: float
    n_phones: int
    ambient_c: float | None = None  # the mean of its phones' rooms, when the statistic states one


@dataclass(frozen=True)
class ChangePoint:
    index: int  # the first night after the change
    before: NightValue  # the last night before it
    after: NightValue
    mean_before: float
    mean_after: float
    p: float  # Welch, Bonferroni-corrected over the series' proposals
    call: str  # regressed | improved

    @property
    def relative(self) -> float | None:
        return (self.mean_after - self.mean_before) / abs(self.mean_before) if self.mean_before else None

    @property
    def builds(self) -> BuildRange:
        return BuildRange(self.before.builds, self.after.builds, self.before.run_id, self.after.run_id)

    @property
    def build_range(self) -> str:
        return self.builds.text


@dataclass
class Series:
    metric: str
    model: str
    unit: str
    claim: int | None
    higher_is_worse: bool
    nights: list[NightValue] = field(default_factory=list)
    changes: list[ChangePoint] = field(default_factory=list)
    noise: float | None = None  # the night-to-night σ the search used

    @property
    def values(self) -> np.ndarray:
        return np.array([n.value for n in self.nights], dtype=float)

    @property
    def ambients(self) -> np.ndarray | None:
        """Each night's room (NaN where not stated); None when the statistic states no room."""
        if all(n.ambient_c is None for n in self.nights):
            return None
        return np.array([math.nan if n.ambient_c is None else n.ambient_c for n in self.nights], dtype=float)


def series_of(points: Iterable[HistoryPoint]) -> list[Series]:
    """One series per (statistic, model), one value per run (its phones' mean), oldest first; a
    statistic is its verdict's name and percentile (a nightly's p90 is not a release run's p99)."""
    grouped: dict[tuple[str, str], dict[str, list[HistoryPoint]]] = defaultdict(lambda: defaultdict(list))
    for p in points:
        grouped[(label({"name": p.name, "statistic": p.statistic}), p.model)][p.run_id].append(p)
    out = []
    for (metric, model), runs in sorted(grouped.items()):
        sample = next(iter(runs.values()))[0]
        if sample.comparator not in HIGHER_IS_WORSE:
            continue
        series = Series(metric, model, str(sample.unit or ""), sample.claim, HIGHER_IS_WORSE[sample.comparator])
        for run_id, phones in runs.items():
            rooms = [p.ambient_c for p in phones if p.ambient_c is not None]
            series.nights.append(NightValue(run_id, phones[0].started, tuple(sorted({p.build for p in phones if p.build})),
                                            float(np.mean([p.value for p in phones])), len(phones),
                                            float(np.mean(rooms)) if rooms else None))
        series.nights.sort(key=lambda n: (n.started or dt.datetime.min, n.run_id))
        out.append(series)
    return out


def night_noise(values: np.ndarray) -> float:
    """σ of one night's value about its segment's mean, from the median absolute first difference
    (robust to the steps being looked for: each step moves one difference only)."""
    diffs = np.diff(values)
    if diffs.size == 0:
        return 0.0
    return float(np.median(np.abs(diffs - np.median(diffs))) * 1.4826 / math.sqrt(2))


def find_changes(series: Series, threshold: float = DEFAULT_THRESHOLD, alpha: float = ALPHA) -> list[ChangePoint]:
    """The series' standing change points (see the module's docstring); also sets series.changes."""
    y = series.values
    series.changes = []
    if y.size < 2 * MIN_SEGMENT:
        return []
    sigma = night_noise(y)
    floor = 1e-9 * max(1.0, float(np.max(np.abs(y))))
    sigma = max(sigma, floor)
    # The linear kernel's cost is the l2 cost (squared deviations from each segment's mean), and
    # ruptures runs its PELT search in C: ~1 ms for a year of nights where Pelt(model="l2") takes ~0.5 s.
    search = ruptures.KernelCPD(kernel="linear", min_size=MIN_SEGMENT).fit(y.reshape(-1, 1))
    proposed = [int(k) for k in search.predict(pen=2.0 * sigma ** 2 * math.log(y.size))[:-1]]  # last: the end
    edges = [0, *proposed, y.size]
    for i, k in enumerate(proposed):
        left, right = y[edges[i]:k], y[k:edges[i + 2]]
        before, after = float(np.mean(left)), float(np.mean(right))
        p = _welch_p(left, right, sigma)
        p = min(1.0, p * len(proposed))
        relative = (after - before) / abs(before) if before else math.inf
        if p < alpha and abs(relative) >= threshold:
            worse = (after > before) == series.higher_is_worse
            series.changes.append(ChangePoint(k, series.nights[k - 1], series.nights[k], before, after, p,
                                              REGRESSED if worse else IMPROVED))
    series.noise = sigma
    return series.changes


def _welch_p(left: np.ndarray, right: np.ndarray, sigma: float) -> float:
    """Two-sided p of a mean difference; segments with no scatter use the series' noise."""
    if np.var(left) == 0 and np.var(right) == 0:
        se = sigma * math.sqrt(1 / left.size + 1 / right.size)
        return float(2 * stats.norm.sf(abs(np.mean(right) - np.mean(left)) / se))
    return float(stats.ttest_ind(left, right, equal_var=False).pvalue)
