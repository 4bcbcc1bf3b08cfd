"""A small SVG chart writer for the report's plots: panels with linear or log axes, ticks, grid,
lines, steps, bars, markers, reference lines and a legend, written straight from numpy arrays.

Why not matplotlib: its layout and text engine cost ~0.25 s per plot, so a run with 100 plots
took ~30 s to report; this writes one in a few milliseconds. Every text is escaped here; ids are
prefixed per plot so that plots sharing a page never collide.
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass, field

import numpy as np

FONT = "DejaVu Sans, Arial, sans-serif"
CYCLE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd")  # series colours, in order
DASHES = {"-": None, "--": "6 3", ":": "1.5 2.5", "-.": "6 2.5 1.5 2.5"}
TICK_FONT, LABEL_FONT, TITLE_FONT, LEGEND_FONT = 11, 12, 12, 10


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


@dataclass
class Scale:
    lo: float
    hi: float
    log: bool = False

    def __post_init__(self) -> None:
        if self.log:
            self.lo, self.hi = math.log10(self.lo), math.log10(self.hi)
        if not self.hi > self.lo:  # one value or none: a unit span around it
            self.lo, self.hi = self.lo - 0.5, self.hi + 0.5

    def fraction(self, values: np.ndarray) -> np.ndarray:
        values = np.asarray(values, dtype=float)
        if self.log:
            with np.errstate(divide="ignore", invalid="ignore"):
                values = np.log10(values)
        return (values - self.lo) / (self.hi - self.lo)

    def ticks(self, target: int = 6) -> list[tuple[float, str]]:
        """(value, label) of 'nice' ticks inside the span: 1-2-2.5-5 steps, or powers of ten."""
        if self.log:
            first, last = math.floor(self.lo), math.ceil(self.hi)
            step = max(1, math.ceil((last - first + 1) / 8))
            mantissas = (1, 2, 5) if last - first <= 3 else (1,)  # a short span gets 2 and 5 between decades
            values = [m * 10.0 ** k for k in range(first, last + 1, step) for m in mantissas]
            return [(v, f"{v:.0e}".replace("e-0", "e-").replace("e+0", "e") if not 1e-3 <= v < 1e4 else f"{v:g}")
                    for v in values if self.lo - 1e-9 <= math.log10(v) <= self.hi + 1e-9]
        raw = (self.hi - self.lo) / target
        magnitude = 10 ** math.floor(math.log10(raw))
        step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
        decimals = max(0, -math.floor(math.log10(step) + 1e-9) + (1 if step / magnitude == 2.5 else 0))
        start = math.ceil(self.lo / step - 1e-9)
        values = [k * step for k in range(start, int(math.floor(self.hi / step + 1e-9)) + 1)]
        return [(v, f"{v:.{decimals}f}" if abs(v) < 1e6 else f"{v:.3g}") for v in values]


def span(*arrays: object, pad: float = 0.05, log: bool = False) -> tuple[float, float]:
    """Limits covering every finite value given (arrays or numbers), with a margin each side."""
    values = np.concatenate([np.ravel(np.asarray(a, dtype=float)) for a in arrays if a is not None] or [np.zeros(0)])
    values = values[np.isfinite(values) & ((values > 0) if log else True)]
    if values.size == 0:
        return (1.0, 10.0) if log else (0.0, 1.0)
    lo, hi = float(values.min()), float(values.max())
    if log:
        lo, hi = math.log10(lo), math.log10(hi)
    margin = (hi - lo) * pad if hi > lo else 0.5
    lo, hi = lo - margin, hi + margin
    return (10.0 ** lo, 10.0 ** hi) if log else (lo, hi)


@dataclass
class Style:
    color: str
    width: float = 1.0
    dash: str = "-"
    marker: float = 0.0  # radius of a circle at each point, 0 for none

    @classmethod
    def of(cls, style: dict) -> Style:
        """From a matplotlib-like dict: color, linestyle, linewidth."""
        return cls(style["color"], style.get("linewidth", 1.0), style.get("linestyle", "-"))

    def stroke(self) -> str:
        dash = DASHES.get(self.dash)
        return (f'fill="none" stroke="{self.color}" stroke-width="{self.width:g}" stroke-linejoin="round"'
                + (f' stroke-dasharray="{dash}"' if dash else ""))


@dataclass
class Panel:
    """One plotting area at (x, y, width, height) in the drawing, in px."""

    x: float
    y: float
    width: float
    height: float
    xscale: Scale
    yscale: Scale
    title: str = ""
    xlabel: str = ""
    ylabel: str = ""
    grid: bool = False
    right: Scale | None = None  # a second y axis on the right (twinx)
    right_ticks: list[tuple[float, str]] | None = None
    y_ticks: list[tuple[float, str]] | None = None  # labelled categories (e.g. phones) instead of numbers
    _items: list[str] = field(default_factory=list)
    _legend: list[tuple[str, Style]] = field(default_factory=list)
    _points: list[np.ndarray] = field(default_factory=list)  # pixel positions of data, for placing the legend

    def _px(self, xs: np.ndarray, ys: np.ndarray, right: bool = False) -> tuple[np.ndarray, np.ndarray]:
        scale = self.right if right and self.right is not None else self.yscale
        return (self.x + self.xscale.fraction(xs) * self.width,
                self.y + self.height - scale.fraction(ys) * self.height)

    def line(self, xs: np.ndarray, ys: np.ndarray, style: Style, label: str | None = None,
             right: bool = False) -> None:
        """A polyline through the finite points; a non-finite point breaks it."""
        px, py = self._px(xs, ys, right)
        ok = np.isfinite(px) & np.isfinite(py)
        bounds = np.flatnonzero(np.diff(np.concatenate([[False], ok, [False]]).astype(np.int8)))
        segments = ["M" + "L".join(map("{:.1f} {:.1f}".format, px[a:b].tolist(), py[a:b].tolist()))
                    for a, b in zip(bounds[::2].tolist(), bounds[1::2].tolist())]  # runs of finite points
        if segments:
            self._items.append(f'<path d="{"".join(segments)}" {style.stroke()}/>')
        if style.marker and ok.any():
            r = style.marker
            dots = "".join(f"M{x - r:.1f} {y:.1f}a{r} {r} 0 1 0 {2 * r} 0a{r} {r} 0 1 0 {-2 * r} 0"
                           for x, y in zip(px[ok].tolist(), py[ok].tolist()))
            self._items.append(f'<path d="{dots}" fill="{style.color}" stroke="none"/>')
        self._points.append(np.column_stack([px[ok], py[ok]]))
        if label is not None:
            self._legend.append((label, style))

    def step(self, xs: np.ndarray, ys: np.ndarray, style: Style, where: str, label: str | None = None,
             right: bool = False) -> None:
        """A staircase: the value holds until the next point ('post') or until halfway to it ('mid')."""
        xs, ys = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
        if xs.size > 1:
            edges = xs[1:] if where == "post" else (xs[:-1] + xs[1:]) / 2
            sx = np.concatenate([[xs[0]], np.repeat(edges, 2), [xs[-1]]])
            sy = np.repeat(ys, 2)
        else:
            sx, sy = xs, ys
        self.line(sx, sy, style, label, right)

    def bars(self, edges: np.ndarray, heights: np.ndarray, color: str) -> None:
        """Histogram bars from bin edges and counts, as one path."""
        px, _ = self._px(edges, np.zeros(edges.size))
        _, top = self._px(edges[:-1], heights)
        base = self.y + self.height
        d = "".join(f"M{a:.1f} {base:.1f}V{t:.1f}H{b:.1f}V{base:.1f}Z"
                    for a, b, t, h in zip(px[:-1].tolist(), px[1:].tolist(), top.tolist(), heights.tolist()) if h > 0)
        self._items.append(f'<path d="{d}" fill="{color}" stroke="none"/>')
        self._points.append(np.column_stack([(px[:-1] + px[1:]) / 2, top]))

    def rule(self, value: float, style: Style, label: str | None, vertical: bool) -> None:
        """A reference line across the whole panel (a limit, a bound, an average); none where the axis
        cannot show the value (zero or less on a log axis)."""
        if vertical:
            x = float(self._px(np.array([value]), np.array([1.0]))[0][0])
            d = f"M{x:.1f} {self.y:.1f}V{self.y + self.height:.1f}"
        else:
            y = float(self._px(np.array([1.0]), np.array([value]))[1][0])
            d = f"M{self.x:.1f} {y:.1f}H{self.x + self.width:.1f}"
        if not math.isfinite(x if vertical else y):
            return
        self._items.append(f'<path d="{d}" {style.stroke()}/>')
        along = np.linspace(0, 1, 24)
        self._points.append(np.column_stack([np.full(24, x), self.y + along * self.height] if vertical
                                            else [self.x + along * self.width, np.full(24, y)]))
        if label is not None:
            self._legend.append((label, style))

    def render(self, clip_id: str, legend: str = "best") -> str:
        out = [f'<clipPath id="{clip_id}"><rect x="{self.x:.1f}" y="{self.y:.1f}" width="{self.width:.1f}" '
               f'height="{self.height:.1f}"/></clipPath>']
        out.append(self._axis_marks())
        out.append(f'<g clip-path="url(#{clip_id})">{"".join(self._items)}</g>')
        out.append(f'<rect x="{self.x:.1f}" y="{self.y:.1f}" width="{self.width:.1f}" height="{self.height:.1f}" '
                   f'fill="none" stroke="#000" stroke-width="0.8"/>')
        if self._legend:
            out.append(self._legend_box(legend))
        return "".join(out)

    def _axis_marks(self) -> str:
        out, bottom, right_edge = [], self.y + self.height, self.x + self.width
        for value, label in self.xscale.ticks():
            x = float(self._px(np.array([value]), np.array([1.0]))[0][0])
            if not self.x - 0.5 <= x <= right_edge + 0.5:
                continue
            if self.grid:
                out.append(f'<path d="M{x:.1f} {self.y:.1f}V{bottom:.1f}" stroke="#b0b0b0" stroke-opacity="0.3"/>')
            out.append(f'<path d="M{x:.1f} {bottom:.1f}v4" stroke="#000" stroke-width="0.8"/>'
                       f'<text x="{x:.1f}" y="{bottom + 16:.1f}" text-anchor="middle">{esc(label)}</text>')
        for value, label in self.y_ticks or self.yscale.ticks(5):
            y = float(self._px(np.array([1.0]), np.array([value]))[1][0])
            if not self.y - 0.5 <= y <= bottom + 0.5:
                continue
            if self.grid:
                out.append(f'<path d="M{self.x:.1f} {y:.1f}H{right_edge:.1f}" stroke="#b0b0b0" stroke-opacity="0.3"/>')
            out.append(f'<path d="M{self.x:.1f} {y:.1f}h-4" stroke="#000" stroke-width="0.8"/>'
                       f'<text x="{self.x - 7:.1f}" y="{y + 4:.1f}" text-anchor="end">{esc(label)}</text>')
        if self.right is not None:
            for value, label in self.right_ticks or self.right.ticks(5):
                y = float(self._px(np.array([1.0]), np.array([value]), right=True)[1][0])
                out.append(f'<path d="M{right_edge:.1f} {y:.1f}h4" stroke="#000" stroke-width="0.8"/>'
                           f'<text x="{right_edge + 7:.1f}" y="{y + 4:.1f}">{esc(label)}</text>')
        mid_x, mid_y = self.x + self.width / 2, self.y + self.height / 2
        if self.xlabel:
            out.append(f'<text x="{mid_x:.1f}" y="{bottom + 34:.1f}" text-anchor="middle" '
                       f'font-size="{LABEL_FONT}">{esc(self.xlabel)}</text>')
        if self.ylabel:
            out.append(f'<text transform="translate({self.x - 50:.1f} {mid_y:.1f}) rotate(-90)" '
                       f'text-anchor="middle" font-size="{LABEL_FONT}">{esc(self.ylabel)}</text>')
        if self.title:
            out.append(f'<text x="{mid_x:.1f}" y="{self.y - 7:.1f}" text-anchor="middle" '
                       f'font-size="{TITLE_FONT}">{esc(self.title)}</text>')
        return f'<g font-size="{TICK_FONT}" fill="#000">{"".join(out)}</g>'

    def _legend_box(self, where: str) -> str:
        row, pad = LEGEND_FONT + 5, 6
        width = 34 + max(len(label) for label, _ in self._legend) * LEGEND_FONT * 0.6
        height = row * len(self._legend) + pad
        corners = {"upper right": (self.x + self.width - width - pad, self.y + pad),
                   "upper left": (self.x + pad, self.y + pad),
                   "lower right": (self.x + self.width - width - pad, self.y + self.height - height - pad),
                   "lower left": (self.x + pad, self.y + self.height - height - pad),
                   "upper center": (self.x + (self.width - width) / 2, self.y + pad)}
        if where == "best":  # the corner covering the fewest data points
            points = np.concatenate(self._points) if self._points else np.zeros((0, 2))

            def covered(corner: tuple[float, float]) -> int:
                x0, y0 = corner
                inside = (points[:, 0] >= x0) & (points[:, 0] <= x0 + width) \
                    & (points[:, 1] >= y0) & (points[:, 1] <= y0 + height)
                return int(inside.sum())

            where = min(("upper right", "upper left", "lower left", "lower right"), key=lambda c: covered(corners[c]))
        x0, y0 = corners[where]
        out = [f'<rect x="{x0:.1f}" y="{y0:.1f}" width="{width:.1f}" height="{height:.1f}" rx="3" '
               f'fill="#fff" fill-opacity="0.85" stroke="#ccc"/>']
        for i, (label, style) in enumerate(self._legend):
            y = y0 + pad / 2 + row * (i + 0.5) + 1
            out.append(f'<path d="M{x0 + 6:.1f} {y:.1f}h22" {style.stroke()}/>'
                       f'<text x="{x0 + 32:.1f}" y="{y + LEGEND_FONT * 0.35:.1f}">{esc(label)}</text>')
        return f'<g font-size="{LEGEND_FONT}">{"".join(out)}</g>'


def drawing(width: int, height: int, panels: list[tuple[Panel, str]], id_prefix: str) -> str:
    """The <svg> element holding the panels, each with its legend placement."""
    body = "".join(panel.render(f"{id_prefix}-clip{i}", legend) for i, (panel, legend) in enumerate(panels))
    return (f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
            f'font-family="{FONT}"><rect width="{width}" height="{height}" fill="#fff"/>{body}</svg>')
