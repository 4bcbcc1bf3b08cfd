"""What the morning page leads with (`bench trend --html`, docs/results.md): what moved, grouped by
claim and phone model; everything else is unchanged and folded below.

A series *moved* when tonight's gate called it (regressed or improved against the baseline,
`bench compare`'s call), when one of its standing change points falls in the last `recent`
nights, or when a bisect result of that window names it. Groups with a regression come first
(as alert summaries come before graphs), then by claim and model; within a group the same.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Iterable

from ..specs.claims import claim_for
from .bisect_record import BisectResult
from .compare import IMPROVED, REGRESSED, Comparison, Night
from .trend import ChangePoint, Series

RECENT = 14  # nights: a change point leads the page this long after the night it happened


@dataclass
class Moved:
    """One statistic on one model that moved: its series (None when only a bisect names it) and why."""

    metric: str
    model: str
    claim: int | None
    series: Series | None
    calls: list[Comparison] = field(default_factory=list)  # tonight's, model level
    changes: list[ChangePoint] = field(default_factory=list)  # the recent ones, newest first
    bisects: list[BisectResult] = field(default_factory=list)

    @property
    def regressed(self) -> bool:
        return any(c.call == REGRESSED for c in self.calls) or any(c.call == REGRESSED for c in self.changes)


@dataclass
class Group:
    claim: int | None
    model: str
    moved: list[Moved]

    @property
    def regressed(self) -> bool:
        return any(m.regressed for m in self.moved)


@dataclass
class Morning:
    tonight: str | None  # the newest night's run
    against: str | None  # what tonight's calls were made against (None: no calls made)
    why_no_calls: str | None
    recent: int
    groups: list[Group]
    unchanged: list[Series]
    earlier_bisects: list[BisectResult]  # finished before the recent window
    bisect_problems: list[str]

    @property
    def calls(self) -> list[Comparison]:
        return [c for g in self.groups for m in g.moved for c in m.calls]

    @property
    def changes(self) -> list[ChangePoint]:
        return [c for g in self.groups for m in g.moved for c in m.changes]

    @property
    def bisects(self) -> list[BisectResult]:
        return [b for g in self.groups for m in g.moved for b in m.bisects]


def claim_of(claim: object, metric: str) -> int | None:
    """The series' claim number: its own, else the claims table's for the statistic's name."""
    return claim if isinstance(claim, int) else claim_for(None, metric.split(" (")[0])


def assemble(all_series: list[Series], night: Night | None = None, against: str | None = None,
             why_no_calls: str | None = None, bisects: Iterable[BisectResult] = (), bisect_problems: Iterable[str] = (),
             recent: int = RECENT) -> Morning:
    keyed = {(s.metric, s.model): s for s in all_series}
    moved: dict[tuple[str, str], Moved] = {}

    def entry(metric: str, model: str) -> Moved:
        if (metric, model) not in moved:
            series = keyed.get((metric, model))
            moved[(metric, model)] = Moved(metric, model, claim_of(series.claim if series else None, metric), series)
        return moved[(metric, model)]

    for c in night.comparisons if night else []:
        if c.phone is None and c.call in (REGRESSED, IMPROVED) and (c.metric, c.model) in keyed:
            entry(c.metric, c.model).calls.append(c)
    for s in all_series:
        for change in reversed(s.changes):
            if change.index >= len(s.nights) - recent:
                entry(s.metric, s.model).changes.append(change)
    cutoff = _window_start(all_series, recent)
    earlier = []
    for b in bisects:
        if b.finished_utc is None or cutoff is None or b.finished_utc >= cutoff:
            entry(b.metric, b.model).bisects.append(b)
        else:
            earlier.append(b)
    groups: dict[tuple[int | None, str], list[Moved]] = {}
    for m in moved.values():
        groups.setdefault((m.claim, m.model), []).append(m)
    ordered = [Group(claim, model, sorted(items, key=lambda m: (not m.regressed, m.metric)))
               for (claim, model), items in groups.items()]
    ordered.sort(key=lambda g: (not g.regressed, g.claim is None, g.claim or 0, g.model))
    tonight = max((s.nights[-1] for s in all_series if s.nights),
                  key=lambda n: (n.started or dt.datetime.min, n.run_id), default=None)
    return Morning(tonight.run_id if tonight else None, against if night else None, why_no_calls, recent, ordered,
                   [s for s in all_series if (s.metric, s.model) not in moved], earlier, list(bisect_problems))


def _window_start(all_series: list[Series], recent: int) -> dt.datetime | None:
    """When the first of the last `recent` nights started (naive UTC, as the store keeps it)."""
    starts = sorted({n.started for s in all_series for n in s.nights if n.started is not None})
    return starts[-recent] if len(starts) >= recent else (starts[0] if starts else None)
