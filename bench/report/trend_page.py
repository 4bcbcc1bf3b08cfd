"""The history page (`bench trend --html`): each statistic per phone model across nights, its
segments' means and the change points that stand, with the build range each falls in."""
from __future__ import annotations

import datetime as dt
import html

import numpy as np

from ..results import display
from ..results.trend import Series
from .svg import Panel, Scale, Style, drawing, span

WIDTH, HEIGHT = 900, 260
LEFT, RIGHT, TOP, BOTTOM = 72, 20, 28, 44
VALUE = Style("#1565c0", 1.2, marker=2.5)
SEGMENT = Style("#2e7d32", 1.6, dash="--")
AMBIENT = Style("#ef6c00", 1.0, dash="4,2", marker=2.0)
CHANGE = {"regressed": Style("#c62828", 1.4, dash=":"), "improved": Style("#6a1b9a", 1.4, dash=":")}


def series_svg(series: Series, salt: str) -> str:
    y = series.values
    x = np.arange(y.size, dtype=float)
    unit = display.unit(series.unit)
    rooms = series.ambients  # a thermal figure: its nights' rooms beside it, on the right axis
    panel = Panel(LEFT, TOP, WIDTH - LEFT - RIGHT - (48 if rooms is not None else 0), HEIGHT - TOP - BOTTOM,
                  Scale(*span(x)), Scale(*span(y)),
                  title=f"{series.metric} on {series.model} ({y.size} nights)", xlabel="night (oldest first)",
                  ylabel=unit, grid=True, right=None if rooms is None else Scale(*span(rooms, pad=0.3)))
    panel.line(x, y, VALUE, label="the model's value that night")
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


def render_page(all_series: list[Series], title: str, generated: dt.datetime) -> str:
    rows, figures = [], []
    for i, s in enumerate(all_series):
        latest = s.nights[-1] if s.nights else None
        changes = "; ".join(f"{c.call} {100 * (c.relative or 0):+.1f} % ({c.build_range}, p {c.p:.2g})"
                            for c in s.changes) or "none"
        room = f" at {latest.ambient_c:.1f} °C ambient" if latest and latest.ambient_c is not None else ""
        rows.append(f"<tr><td>{html.escape(str(s.claim or '-'))}</td><td>{html.escape(s.metric)}</td><td>{html.escape(s.model)}</td>"
                    f"<td>{len(s.nights)}</td><td>{latest.value:.5g} {html.escape(display.unit(s.unit))}{room}</td>"
                    f"<td>{html.escape(changes)}</td></tr>" if latest else "")
        figures.append(f'<section id="s{i}"><h2>{html.escape(s.metric)} — {html.escape(s.model)}</h2>'
                       f"{series_svg(s, f't{i}-')}</section>")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            "<style>body{font-family:DejaVu Sans,Arial,sans-serif;margin:2em}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}svg{max-width:100%;height:auto}</style>"
            f"</head><body><h1>{html.escape(title)}</h1><p>Generated {generated:%Y-%m-%d %H:%M} UTC. One value per "
            "night and phone model (the mean of its phones); change points from ruptures' PELT search, kept "
            "only when Welch's test between the segments says they are real and they reach the practical "
            "threshold (docs/nightly.md).</p><table><tr><th>claim</th><th>statistic</th><th>model</th>"
            f"<th>nights</th><th>latest</th><th>change points</th></tr>{''.join(rows)}</table>"
            f"{''.join(figures)}</body></html>")
