"""Plots for the HTML report as inline SVG (bench/report/svg.py, straight from the arrays): the raw
data a verdict points to, drawn with its limit and confidence bound. its plot hint (Verdict.plot.kind) picks one:

  samples  npz `samples`                 histogram + empirical CDF, limit, bound, statistic
  trace    npz `t`, `y` [, `y2`]          time series, limit, the hint's average (sustained)
  sweep    npz `x`, `y` [, `state`]       e.g. error rate vs ripple amplitude, redundancy state shaded
"""
from __future__ import annotations

import logging
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..results import display
from phonebench.core.verdict import Verdict
from .svg import CYCLE, Panel, Scale, Style, drawing, span

log = logging.getLogger(__name__)

MAX_POINTS = 2000  # per drawn series: keeps a long trace's SVG small; the envelope keeps the peaks
LIMIT_STYLE = {"color": "#c62828", "linestyle": "--", "linewidth": 1.4}
BOUND_STYLE = {"color": "#ef6c00", "linestyle": ":", "linewidth": 1.6}
VALUE_STYLE = {"color": "#1565c0", "linestyle": "-", "linewidth": 1.0}
AVERAGE_STYLE = {"color": "#2e7d32", "linestyle": "-.", "linewidth": 1.4}
WIDTH, HEIGHT = 900, 320  # px; the page scales it down to fit
LEFT, RIGHT, TOP, BOTTOM = 72, 20, 28, 50  # margins around a panel for its ticks and labels


@dataclass
class Plot:
    kind: str
    svg: str | None = None  # inline SVG markup (trusted: made here, every text escaped)
    problem: str | None = None  # why there is no plot (missing or unreadable raw data)


class RawDataProblem(Exception):
    pass


def _hint(verdict: Verdict) -> dict[str, Any]:
    """The verdict's plot hint (phonebench.core.verdict.PlotHint) as a dict, unset fields left out."""
    return {k: v for k, v in (verdict.plot.to_dict() if verdict.plot else {}).items() if v is not None}


def plot_for(verdict: Verdict, run_dir: Path | None, salt: str) -> Plot | None:
    """The plot the verdict's plot hint asks for, or None if it asks for none."""
    kind = _hint(verdict).get("kind")
    if not kind:
        return None
    draw = PLOTTERS.get(kind)
    if draw is None:
        return Plot(kind, problem=f"unknown plot kind {kind!r} (known: {', '.join(sorted(PLOTTERS))})")
    try:
        arrays = load_arrays(list(verdict.raw), run_dir, REQUIRED[kind])
        return Plot(kind, svg=draw(arrays, verdict, salt))
    except RawDataProblem as exc:
        return Plot(kind, problem=str(exc))
    except (ValueError, TypeError) as exc:  # malformed arrays: say so instead of failing the report
        log.warning("plot for %s failed: %s", verdict.name, exc)
        return Plot(kind, problem=f"raw data could not be plotted: {exc}")


def load_arrays(raw: list[str], run_dir: Path | None, required: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The first .npz of the verdict's raw files holding the required arrays."""
    if run_dir is None:
        raise RawDataProblem("raw data not available: the run folder is unknown")
    root = run_dir.resolve()
    tried = []
    for rel in raw:
        if not rel.endswith(".npz"):
            continue
        path = (root / rel).resolve()
        if not path.is_relative_to(root):
            tried.append(f"{rel} (outside the run folder, not read)")
            continue
        try:
            with np.load(path, allow_pickle=False) as npz:
                if all(k in npz.files for k in required):
                    return {k: np.asarray(npz[k]) for k in npz.files}
                tried.append(f"{rel} (arrays {', '.join(npz.files)}; needs {', '.join(required)})")
        except FileNotFoundError:
            tried.append(f"{rel} (missing)")
        except (OSError, ValueError, zipfile.BadZipFile) as exc:
            tried.append(f"{rel} (unreadable: {exc})")
    raise RawDataProblem("no raw data to plot: " + ("; ".join(tried) if tried else "the verdict lists no .npz file"))


# --- the plots ------------------------------------------------------------------------------
def _finite(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=float).ravel()
    return values[np.isfinite(values)]


def _label(value: float | None) -> str:
    return "" if value is None else f"{value:.4g}"


def _limit_and_bound_values(verdict: Verdict) -> list[float]:
    return [float(x) for x in (verdict.limit, verdict.bound) if isinstance(x, (int, float))]


def _limit_and_bound_lines(panel: Panel, verdict: Verdict, vertical: bool, legend: bool = True) -> None:
    unit = display.unit(verdict.unit)
    if verdict.limit is not None:
        label = f"limit {display.limit_text(verdict)}"
        panel.rule(float(verdict.limit), Style.of(LIMIT_STYLE), label if legend else None, vertical)
    if verdict.bound is not None:
        conf = verdict.confidence
        at = f" @ {conf:.0%}" if isinstance(conf, (int, float)) else ""
        label = f"bound{at} {_label(verdict.bound)} {unit}"
        panel.rule(float(verdict.bound), Style.of(BOUND_STYLE), label if legend else None, vertical)


def _panel(x: float, width: float, xlim: tuple[float, float], ylim: tuple[float, float], *, log_y: bool = False,
           **labels: Any) -> Panel:
    return Panel(x, TOP, width, HEIGHT - TOP - BOTTOM, Scale(*xlim), Scale(*ylim, log=log_y), **labels)


SPREAD_STATISTICS = ("std",)  # judged on the spread: raw values are not on the limit's scale


def _marks_near(samples: np.ndarray, marks: list[float]) -> tuple[list[float], list[float]]:
    """(marks the axis spans, marks left off): a mark farther than the data's own range beyond it
    would flatten the histogram into a corner; it is named in the title instead."""
    lo, hi = float(samples.min()), float(samples.max())
    reach = max(hi - lo, abs(hi) * 0.05, 1e-12)
    near = [m for m in marks if lo - reach <= m <= hi + reach]
    return near, [m for m in marks if m not in near]


def plot_samples(arrays: dict[str, np.ndarray], verdict: Verdict, salt: str) -> str:
    samples = _finite(arrays["samples"])
    if samples.size == 0:
        raise ValueError("no finite samples")
    unit = display.unit(verdict.unit)
    value = verdict.value
    spread = verdict.statistic in SPREAD_STATISTICS
    marks = [] if spread else _limit_and_bound_values(verdict) + (
        [float(value)] if isinstance(value, (int, float)) else [])
    near, far = _marks_near(samples, marks)
    counts, edges = np.histogram(samples, bins=min(60, max(10, int(np.sqrt(samples.size)))))
    width = (WIDTH - 2 * (LEFT + RIGHT)) / 2
    hist = _panel(LEFT, width, span(edges, near), (0.0, counts.max() * 1.05),
                  title=f"histogram (n={samples.size})", xlabel=unit, ylabel="count")
    hist.bars(edges, counts.astype(float), "#90a4ae")
    cdf = _panel(2 * LEFT + RIGHT + width, width, span(samples, near), (0.0, 1.02), title="empirical CDF",
                 xlabel=unit, ylabel="fraction ≤ x")
    ordered = np.sort(samples)
    probs = np.arange(1, ordered.size + 1) / ordered.size
    if ordered.size > MAX_POINTS:
        idx = np.unique(np.linspace(0, ordered.size - 1, MAX_POINTS).astype(int))
        ordered, probs = ordered[idx], probs[idx]
    cdf.step(ordered, probs, Style("#37474f", 1.2), where="post")
    for panel in (hist, cdf):  # one legend, on the CDF, says what the lines are
        legend = panel is cdf
        if spread:  # the spread that was judged, drawn where the samples are: mean ± std
            mean, std = float(samples.mean()), float(value) if isinstance(value, (int, float)) else float(samples.std())
            panel.rule(mean - std, Style.of(VALUE_STYLE), f"mean ± std ({std:.4g} {unit})" if legend else None, True)
            panel.rule(mean + std, Style.of(VALUE_STYLE), None, True)
            continue
        if value is not None:
            label = f"{verdict.statistic} {_label(value)} {unit}"
            panel.rule(float(value), Style.of(VALUE_STYLE), label if legend else None, vertical=True)
        _limit_and_bound_lines(panel, verdict, vertical=True, legend=legend)
    if far:  # the limit or bound is far from the data: said, not drawn
        hist.title += f"; limit {display.limit_text(verdict)} is off this axis"
    if spread:
        cdf.title = "empirical CDF; the std is judged (claim plot above)"
    return drawing(WIDTH, HEIGHT, [(hist, "best"), (cdf, "lower right")], salt)


def _envelope(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """At most MAX_POINTS points, keeping each bucket's min and max so no peak disappears."""
    if x.size <= MAX_POINTS:
        return x, y
    buckets = MAX_POINTS // 2
    width = -(-x.size // buckets)
    pad = buckets * width - x.size  # the last buckets are padded; their padding is never kept
    finite = np.isfinite(y)
    lows = np.concatenate([np.where(finite, y, np.inf), np.full(pad, np.inf)]).reshape(buckets, width)
    highs = np.concatenate([np.where(finite, y, -np.inf), np.full(pad, -np.inf)]).reshape(buckets, width)
    start = np.arange(buckets) * width
    keep = np.unique(np.concatenate([start + lows.argmin(axis=1), start + highs.argmax(axis=1)]))  # in time order
    keep = keep[keep < x.size]
    return x[keep], y[keep]


def plot_trace(arrays: dict[str, np.ndarray], verdict: Verdict, salt: str) -> str:
    extra = _hint(verdict)
    labels = list(extra.get("labels") or ["y", "y2"])
    t = np.asarray(arrays["t"], dtype=float).ravel()
    series = []
    for key, label in zip(("y", "y2"), labels):
        if key in arrays:
            y = np.asarray(arrays[key], dtype=float).ravel()
            if y.size != t.size:
                raise ValueError(f"{key} has {y.size} points but t has {t.size}")
            series.append((*_envelope(t, y), str(label)))
    average = float(extra["average"]) if extra.get("average") is not None else None
    ylim = span(*(ty for _, ty, _ in series), _limit_and_bound_values(verdict), average)
    panel = _panel(LEFT, WIDTH - LEFT - RIGHT, span(t, pad=0.02), ylim, grid=True,
                   xlabel=str(extra.get("x_label", "time (s)")), ylabel=str(extra.get("y_label", display.unit(verdict.unit))))
    for i, (tx, ty, label) in enumerate(series):
        panel.line(tx, ty, Style(CYCLE[i], 0.9), label)
    if average is not None:
        panel.rule(average, Style.of(AVERAGE_STYLE), f"sustained average {average:.4g} {verdict.unit}",
                   vertical=False)
    _limit_and_bound_lines(panel, verdict, vertical=False)
    return drawing(WIDTH, HEIGHT, [(panel, "best")], salt)


def plot_sweep(arrays: dict[str, np.ndarray], verdict: Verdict, salt: str) -> str:
    extra = _hint(verdict)
    x = np.asarray(arrays["x"], dtype=float).ravel()
    y = np.asarray(arrays["y"], dtype=float).ravel()
    if x.size != y.size:
        raise ValueError(f"y has {y.size} points but x has {x.size}")
    state = None
    if "state" in arrays:
        state = np.asarray(arrays["state"]).ravel().astype(bool)
        if state.size != x.size:
            raise ValueError(f"state has {state.size} points but x has {x.size}")
    vertical = extra.get("limit_axis", "y") == "x"
    marks = _limit_and_bound_values(verdict)
    log_y = bool(extra.get("log_y")) and bool(np.all(y[np.isfinite(y)] > 0))
    xlim = span(x, marks if vertical else None)
    ylim = span(y, None if vertical else marks, log=log_y)
    right = LEFT if state is not None else RIGHT
    panel = _panel(LEFT, WIDTH - LEFT - right, xlim, ylim, log_y=log_y, grid=True,
                   xlabel=str(extra.get("x_label", "x")), ylabel=str(extra.get("y_label", display.unit(verdict.unit))))
    panel.line(x, y, Style("#37474f", 1.2, marker=3.0), str(extra.get("y_label", "y")))
    if state is not None:
        panel.right, panel.right_ticks = Scale(-0.1, 1.1), [(0.0, "off"), (1.0, "on")]
        panel.step(x, state.astype(float), Style("#8e24aa", 1.2), where="mid",
                   label=str(extra.get("state_label", "redundancy on")), right=True)
    _limit_and_bound_lines(panel, verdict, vertical=vertical)
    return drawing(WIDTH, HEIGHT, [(panel, "upper left")], salt)


PLOTTERS: dict[str, Callable[[dict[str, np.ndarray], Verdict, str], str]] = {
    "samples": plot_samples, "trace": plot_trace, "sweep": plot_sweep}
REQUIRED = {"samples": ("samples",), "trace": ("t", "y"), "sweep": ("x", "y")}
