"""The morning page (`bench trend --html`, docs/results.md): what moved leads — tonight's calls,
the recent change points and bisect results, grouped by claim and phone model, each with its
series' plot, its build range, the bisect command and links to its runs; the unchanged series'
plots and the full table of every series are folded below. Rendered from templates/trend.html.j2,
which Jinja2 autoescapes: every string from the store or a bisect file is escaped."""
from __future__ import annotations

import datetime as dt
import os
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np
from markupsafe import Markup

from ..results import display
from ..results.bisect_record import BisectResult
from ..results.compare import REGRESSED, Comparison
from ..results.morning import Moved, Morning, assemble, claim_of
from ..results.trend import ChangePoint, Series
from ..specs.claims import load_claims
from .render import _environment
from .svg import Panel, Scale, Style, drawing, span

WIDTH, HEIGHT = 900, 260
LEFT, RIGHT, TOP, BOTTOM = 72, 20, 28, 44
VALUE = Style("#1565c0", 1.2, marker=2.5)
FOLDED_VALUE = Style("#1565c0", 1.2)  # no dot per night: the folded plots keep the page's bytes down
SEGMENT = Style("#2e7d32", 1.6, dash="--")
AMBIENT = Style("#ef6c00", 1.0, dash="4,2", marker=2.0)
CHANGE = {"regressed": Style("#c62828", 1.4, dash=":"), "improved": Style("#6a1b9a", 1.4, dash=":")}


def series_svg(series: Series, salt: str, markers: bool = True) -> str:
    y = series.values
    x = np.arange(y.size, dtype=float)
    unit = display.unit(series.unit)
    rooms = series.ambients  # a thermal figure: its nights' rooms beside it, on the right axis
    panel = Panel(LEFT, TOP, WIDTH - LEFT - RIGHT - (48 if rooms is not None else 0), HEIGHT - TOP - BOTTOM,
                  Scale(*span(x)), Scale(*span(y)),
                  title=f"{series.metric} on {series.model} ({y.size} nights)", xlabel="night (oldest first)",
                  ylabel=unit, grid=True, right=None if rooms is None else Scale(*span(rooms, pad=0.3)))
    panel.line(x, y, VALUE if markers else FOLDED_VALUE, label="the model's value that night")
    if rooms is not None:
        panel.line(x, rooms, AMBIENT, label="ambient that night, degC (right axis)", right=True)
    edges = [0, *(c.index for c in series.changes), y.size]
    for i, (a, b) in enumerate(zip(edges, edges[1:])):
        mean = float(np.mean(y[a:b]))
        panel.line(np.array([a, b - 1], dtype=float), np.array([mean, mean]), SEGMENT,
                   label="segment mean" if i == 0 else None)
    for c in series.changes:
        panel.rule(c.index - 0.5, CHANGE[c.call], f"{c.call}: {c.build_range}", vertical=True)
    return drawing(WIDTH, HEIGHT, [(panel, "best")], salt)


def run_links(run_dirs: Mapping[str, str | None], page: Path) -> dict[str, str]:
    """Run id -> the link from `page` to its report.html, for the runs whose report is on this disk.
    Percent-quoted and starting "./": a folder name can make neither a scheme nor markup."""
    here = page.resolve().parent
    links = {}
    for run_id, folder in run_dirs.items():
        report = Path(folder) / "report.html" if folder else None
        if report is not None and report.is_file():
            links[run_id] = "./" + urllib.parse.quote(os.path.relpath(report, here).replace(os.sep, "/"))
    return links


@dataclass(frozen=True)
class Item:
    """One reason a series leads the page, as text."""

    kind: str  # tonight | change point | bisect
    call: str  # regressed | improved | "" (a bisect result)
    headline: str
    builds: str
    runs: tuple[str, ...]
    command: str | None = None  # the bisect command for its build range
    note: str | None = None  # why there is none, or what the gate could see


@dataclass(frozen=True)
class Entry:
    anchor: str
    title: str
    svg: Markup | None
    items: list[Item]


@dataclass(frozen=True)
class GroupView:
    anchor: str
    heading: str
    regressed: bool
    entries: list[Entry] = field(default_factory=list)


@dataclass(frozen=True)
class Row:
    anchor: str
    claim: str
    metric: str
    model: str
    nights: int
    latest: str
    latest_run: str | None
    changes: str
    moved: bool


def render_page(all_series: list[Series], title: str, generated: dt.datetime, morning: Morning | None = None,
                links: Mapping[str, str] | None = None) -> str:
    """The page; without `morning`, what moved is the series' recent change points alone."""
    morning = morning or assemble(all_series)
    anchors = {(s.metric, s.model): f"s{i}" for i, s in enumerate(all_series)}
    names = {c.number: c.name for c in load_claims()}
    groups = []
    for g, group in enumerate(morning.groups):
        claim = f"claim {group.claim}: {names.get(group.claim, '')}" if group.claim else "no claim"
        view = GroupView(f"g{g}", f"{claim} — {group.model}", group.regressed)
        for m in group.moved:
            anchor = anchors.get((m.metric, m.model), f"g{g}-{len(view.entries)}")
            svg = Markup(series_svg(m.series, f"m{anchor}-")) if m.series else None  # svg.py escapes its own text
            view.entries.append(Entry(anchor, f"{m.metric} on {m.model}", svg, _items(m)))
        groups.append(view)
    unchanged = [Entry(anchors[(s.metric, s.model)], f"{s.metric} on {s.model}",
                       Markup(series_svg(s, f"u{anchors[(s.metric, s.model)]}-", markers=False)), [])
                 for s in morning.unchanged]
    moved = {(m.metric, m.model) for g in morning.groups for m in g.moved}
    return _environment().get_template("trend.html.j2").render(
        title=title, generated=f"{generated:%Y-%m-%d %H:%M}", morning=morning, groups=groups, unchanged=unchanged,
        rows=[_row(s, anchors[(s.metric, s.model)], (s.metric, s.model) in moved) for s in all_series],
        earlier_bisects=[_bisect_item(b) for b in morning.earlier_bisects], links=links or {},
        regressions=sum(c.call == REGRESSED for c in morning.calls),
        improvements=sum(c.call != REGRESSED for c in morning.calls))


def _items(m: Moved) -> list[Item]:
    unit = display.unit(m.series.unit if m.series else "")
    return ([_call_item(c, unit) for c in m.calls] + [_change_item(c, m, unit) for c in m.changes]
            + [_bisect_item(b) for b in m.bisects])


def _call_item(c: Comparison, unit: str) -> Item:
    interval = c.interval()
    ci = f"95 % CI of the change {interval[0]:+.4g}…{interval[1]:+.4g} {unit}, " if interval else ""
    p = f"Holm p {c.p_holm:.2g}" if c.p_holm is not None else "no p"
    sees = f"; the gate detects ±{100 * c.detectable.detects:.1f} %" if c.detectable else ""
    headline = (f"{c.call} {100 * (c.relative or 0):+.1f} % against the baseline: {c.baseline.value:.5g} → "
                f"{c.tonight.value:.5g} {unit} ({ci}{p}{sees})")
    builds = c.builds
    if builds is None:
        return Item("tonight", c.call, headline, "builds not recorded", ())
    command = builds.bisect(c.metric, c.model) if c.call == REGRESSED else None  # an improvement is not chased
    note = f"nothing to bisect: {builds.why_not_searchable}" if c.call == REGRESSED and not command else None
    runs = tuple(r for r in (builds.good_run, builds.bad_run) if r)
    return Item("tonight", c.call, headline, builds.text, runs, command, note)


def _change_item(c: ChangePoint, m: Moved, unit: str) -> Item:
    n = len(m.series.nights) if m.series else 0
    when = f", {c.after.started:%Y-%m-%d}" if c.after.started else ""
    headline = (f"{c.call} {100 * (c.relative or 0):+.1f} % at night {c.index + 1} of {n}{when}: segment means "
                f"{c.mean_before:.5g} → {c.mean_after:.5g} {unit} (p {c.p:.2g})")
    builds = c.builds
    command = builds.bisect(m.metric, m.model)
    return Item("change point", c.call, headline, builds.text, (c.before.run_id, c.after.run_id), command,
                None if command else f"nothing to bisect: {builds.why_not_searchable}")


def _bisect_item(b: BisectResult) -> Item:
    finished = f", finished {b.finished_utc:%Y-%m-%d %H:%M} UTC" if b.finished_utc else ""
    return Item("bisect", "", f"{b.metric} on {b.model}: {b.text}{finished} ({b.source})", f"build {b.good} → {b.bad}",
                b.runs)


def _row(s: Series, anchor: str, moved: bool) -> Row:
    latest = s.nights[-1] if s.nights else None
    room = f" at {latest.ambient_c:.1f} °C ambient" if latest and latest.ambient_c is not None else ""
    changes = "; ".join(f"{c.call} {100 * (c.relative or 0):+.1f} % ({c.build_range}, p {c.p:.2g})"
                        for c in s.changes) or "none"
    return Row(anchor, str(claim_of(s.claim, s.metric) or s.claim or "-"), s.metric, s.model, len(s.nights),
               f"{latest.value:.5g} {display.unit(s.unit)}{room}" if latest else "-",
               latest.run_id if latest else None, changes, moved)
