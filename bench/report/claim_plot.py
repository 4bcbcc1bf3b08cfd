"""One plot per claim: the statistic each of its checks judged, per phone, against the limit.

A panel per check: a row per phone with the judged value (a std verdict shows the std, a p99
verdict the p99, never the raw samples against a limit of another kind), its expanded
uncertainty U as a thick bar, its confidence bound in orange, and the limit dashed red (its tolerance band dotted). The
axis spans what was judged and the limit, since that comparison is the point of the plot."""
from __future__ import annotations

import math
import numbers
from typing import TypeGuard

import numpy as np

from ..specs.claims import ClaimRow
from phonebench.core.verdict import Verdict
from ..results.display import check_name, expanded, limit_text, unit
from .svg import Panel, Scale, Style, drawing, span

WIDTH, LEFT, RIGHT = 900, 130, 24
ROW, TOP, BOTTOM = 26, 30, 44  # px per phone, above and below each panel
OUTCOME_COLOR = {"pass": "#2e7d32", "info": "#546e7a", "fail": "#c62828"}
OTHER_COLOR = "#ef6c00"  # inconclusive, insufficient, invalid
LIMIT = Style("#c62828", 1.4, "--")
TOLERANCE = Style("#c62828", 1.0, ":")
BOUND = Style("#ef6c00", 1.6)


def _is_number(value: object) -> TypeGuard[float]:
    """A plottable number: numpy's scalars too (a record rendered from memory holds them), no bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def _per_check(row: ClaimRow) -> dict[str, dict[str, Verdict]]:
    """check -> phone -> the worst numeric verdict of that check on that phone."""
    checks: dict[str, dict[str, Verdict]] = {}
    for phone, cell in row.cells.items():
        for v in cell.verdicts:
            if not _is_number(v.value):
                continue
            shown = checks.setdefault(check_name(v), {})
            if phone not in shown or v.outcome.severity > shown[phone].outcome.severity:
                shown[phone] = v
    return checks


def claim_plot(row: ClaimRow, salt: str) -> str | None:
    """The claim's SVG, or None when none of its checks judged a number."""
    checks = _per_check(row)
    if not checks:
        return None
    order = row.claim.metrics  # the product's own targets first, as in the grid
    checks = dict(sorted(checks.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order)))
    phones = [p for p in row.cells if any(p in by_phone for by_phone in checks.values())]
    height_each = TOP + BOTTOM + ROW * len(phones)
    panels = []
    for index, (name, by_phone) in enumerate(checks.items()):
        panels.append((_panel(name, by_phone, phones, index * height_each), "upper right"))
    return drawing(WIDTH, height_each * len(panels), panels, salt)


def _panel(name: str, by_phone: dict[str, Verdict], phones: list[str], y0: float) -> Panel:
    verdicts = list(by_phone.values())
    first = verdicts[0]
    marks: list[float] = []
    for v in verdicts:
        value, u = float(v.value or 0.0), (expanded(v) or 0.0)
        marks += [value - u, value + u]
        marks += [float(x) for x in (v.bound, v.limit) if _is_number(x)]
        tol = v.extra.get("tolerance")
        if _is_number(tol) and v.limit is not None:
            marks += [v.limit - tol, v.limit + tol]
    rows = len(phones)
    title = f"{name}: {first.statistic or 'value'}" + (f", limit {limit_text(first)}" if first.limit is not None
                                                       else "")
    panel = Panel(LEFT, y0 + TOP, WIDTH - LEFT - RIGHT, ROW * rows, Scale(*span(marks, pad=0.08)),
                  Scale(-0.5, rows - 0.5), title=title, xlabel=unit(first.unit))
    panel.y_ticks = [(float(rows - 1 - i), phone) for i, phone in enumerate(phones)]
    if first.limit is not None:
        panel.rule(float(first.limit), LIMIT, None, vertical=True)
        tol = first.extra.get("tolerance")
        if _is_number(tol):
            for edge in (first.limit - tol, first.limit + tol):
                panel.rule(float(edge), TOLERANCE, None, vertical=True)
    for i, phone in enumerate(phones):
        if phone not in by_phone:
            continue
        v = by_phone[phone]
        y = float(rows - 1 - i)
        value, u = float(v.value or 0.0), (expanded(v) or 0.0)
        color = OUTCOME_COLOR.get(v.outcome.value, OTHER_COLOR)
        if u > 0:
            panel.line(np.array([value - u, value + u]), np.array([y, y]), Style(color, 2.0))
        if _is_number(v.bound):
            panel.line(np.array([value, v.bound]), np.array([y - 0.18, y - 0.18]), BOUND, None)
            panel.line(np.array([v.bound]), np.array([y - 0.18]), Style(BOUND.color, 1.0, marker=3.5))
        panel.line(np.array([value]), np.array([y]), Style(color, 1.0, marker=5.0))
    return panel
