"""Plots for the HTML report as inline SVG (matplotlib, Agg, no pyplot state): the raw data a
verdict points to, drawn with its limit and confidence bound. its plot hint (verdict["plot"]["kind"]) picks one:

  samples  npz `samples`                 histogram + empirical CDF, limit, bound, statistic
  trace    npz `t`, `y` [, `y2`]          time series, limit, the hint's average (sustained)
  sweep    npz `x`, `y` [, `state`]       e.g. error rate vs ripple amplitude, redundancy state shaded
"""
from __future__ import annotations

import io
import logging
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import matplotlib

matplotlib.use("Agg")  # before anything imports pyplot: no display, ever

import numpy as np  # noqa: E402
from matplotlib import rc_context  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

log = logging.getLogger(__name__)

MAX_POINTS = 2000  # per drawn series: keeps a long trace's SVG small; the envelope keeps the peaks
LIMIT_STYLE = {"color": "#c62828", "linestyle": "--", "linewidth": 1.4}
BOUND_STYLE = {"color": "#ef6c00", "linestyle": ":", "linewidth": 1.6}
VALUE_STYLE = {"color": "#1565c0", "linestyle": "-", "linewidth": 1.0}
AVERAGE_STYLE = {"color": "#2e7d32", "linestyle": "-.", "linewidth": 1.4}
_SVG_PROLOGUE = re.compile(r"^.*?(?=<svg)", re.S)
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.S)
_XMLNS = re.compile(r'\s+xmlns(:\w+)?="[^"]*"')
_ID = re.compile(r'\bid="([^"]+)"')
_REF = re.compile(r'(url\(|href=")#([^)"]+)')


@dataclass
class Plot:
    kind: str
    svg: str | None = None  # inline SVG markup (trusted: made here, text escaped by matplotlib)
    problem: str | None = None  # why there is no plot (missing or unreadable raw data)


class RawDataProblem(Exception):
    pass


def _hint(verdict: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in (verdict.get("plot") or {}).items() if v is not None}


def plot_for(verdict: dict[str, Any], run_dir: Path | None, salt: str) -> Plot | None:
    """The plot the verdict's plot hint asks for, or None if it asks for none."""
    kind = _hint(verdict).get("kind")
    if not kind:
        return None
    draw = PLOTTERS.get(kind)
    if draw is None:
        return Plot(kind, problem=f"unknown plot kind {kind!r} (known: {', '.join(sorted(PLOTTERS))})")
    try:
        arrays = load_arrays(verdict.get("raw") or [], run_dir, REQUIRED[kind])
        fig = Figure(figsize=(9.0, 3.2), layout="constrained")
        draw(fig, arrays, verdict)
        return Plot(kind, svg=to_svg(fig, salt))
    except RawDataProblem as exc:
        return Plot(kind, problem=str(exc))
    except (ValueError, TypeError) as exc:  # malformed arrays: say so instead of failing the report
        log.warning("plot for %s failed: %s", verdict.get("name"), exc)
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


def to_svg(fig: Figure, salt: str) -> str:
    """Inline-ready SVG: no XML prologue, metadata or namespace URLs; ids unique per plot."""
    buf = io.StringIO()
    with rc_context({"svg.hashsalt": salt, "svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    svg = _SVG_PROLOGUE.sub("", buf.getvalue(), count=1)
    svg = _METADATA.sub("", svg)
    svg = _XMLNS.sub("", svg)
    # matplotlib numbers ids per figure (figure_1, axes_1, ...): prefix them so plots sharing a page don't collide
    svg = _ID.sub(lambda m: f'id="{salt}-{m[1]}"', svg)
    return _REF.sub(lambda m: f"{m[1]}#{salt}-{m[2]}", svg)


# --- the plots ------------------------------------------------------------------------------
def _finite(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=float).ravel()
    return values[np.isfinite(values)]


def _label(verdict: dict[str, Any], key: str) -> str:
    value = verdict.get(key)
    return "" if value is None else f"{value:.4g}"


def _limit_and_bound_lines(ax: Any, verdict: dict[str, Any], vertical: bool) -> None:
    line = ax.axvline if vertical else ax.axhline
    unit = verdict.get("unit") or ""
    if verdict.get("limit") is not None:
        line(verdict["limit"], label=f"limit {verdict.get('comparator', '')} {_label(verdict, 'limit')} {unit}",
             **LIMIT_STYLE)
    if verdict.get("bound") is not None:
        conf = verdict.get("confidence")
        at = f" @ {conf:.0%}" if isinstance(conf, (int, float)) else ""
        line(verdict["bound"], label=f"bound{at} {_label(verdict, 'bound')} {unit}", **BOUND_STYLE)


def plot_samples(fig: Figure, arrays: dict[str, np.ndarray], verdict: dict[str, Any]) -> None:
    samples = _finite(arrays["samples"])
    if samples.size == 0:
        raise ValueError("no finite samples")
    unit = verdict.get("unit") or ""
    hist, cdf = fig.subplots(1, 2)
    hist.hist(samples, bins=min(60, max(10, int(np.sqrt(samples.size)))), color="#90a4ae")
    hist.set_xlabel(unit)
    hist.set_ylabel("count")
    hist.set_title(f"histogram (n={samples.size})", fontsize=9)
    ordered = np.sort(samples)
    probs = np.arange(1, ordered.size + 1) / ordered.size
    if ordered.size > MAX_POINTS:
        idx = np.unique(np.linspace(0, ordered.size - 1, MAX_POINTS).astype(int))
        ordered, probs = ordered[idx], probs[idx]
    cdf.step(ordered, probs, where="post", color="#37474f", linewidth=1.2)
    cdf.set_xlabel(unit)
    cdf.set_ylabel("fraction ≤ x")
    cdf.set_ylim(0, 1.02)
    cdf.set_title("empirical CDF", fontsize=9)
    for ax in (hist, cdf):
        if verdict.get("value") is not None:
            ax.axvline(verdict["value"], label=f"{verdict.get('statistic', 'value')} {_label(verdict, 'value')} {unit}",
                       **VALUE_STYLE)
        _limit_and_bound_lines(ax, verdict, vertical=True)
    cdf.legend(fontsize=7, loc="lower right")


def _envelope(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """At most MAX_POINTS points, keeping each bucket's min and max so no peak disappears."""
    if x.size <= MAX_POINTS:
        return x, y
    buckets = np.array_split(np.arange(x.size), MAX_POINTS // 2)
    keep = []
    for b in buckets:
        seg = y[b]
        lo, hi = b[np.nanargmin(seg)], b[np.nanargmax(seg)]
        keep.extend(sorted({lo, hi}))
    keep_idx = np.asarray(keep)
    return x[keep_idx], y[keep_idx]


def plot_trace(fig: Figure, arrays: dict[str, np.ndarray], verdict: dict[str, Any]) -> None:
    extra = _hint(verdict)
    labels = list(extra.get("labels") or ["y", "y2"])
    t = np.asarray(arrays["t"], dtype=float).ravel()
    ax = fig.subplots()
    for key, label in zip(("y", "y2"), labels):
        if key in arrays:
            y = np.asarray(arrays[key], dtype=float).ravel()
            if y.size != t.size:
                raise ValueError(f"{key} has {y.size} points but t has {t.size}")
            tx, ty = _envelope(t, y)
            ax.plot(tx, ty, linewidth=0.9, label=str(label))
    if extra.get("average") is not None:
        ax.axhline(float(extra["average"]), label=f"sustained average {float(extra['average']):.4g} "
                                                  f"{verdict.get('unit') or ''}", **AVERAGE_STYLE)
    _limit_and_bound_lines(ax, verdict, vertical=False)
    ax.set_xlabel(str(extra.get("x_label", "time (s)")))
    ax.set_ylabel(str(extra.get("y_label", verdict.get("unit") or "")))
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3)


def plot_sweep(fig: Figure, arrays: dict[str, np.ndarray], verdict: dict[str, Any]) -> None:
    extra = _hint(verdict)
    x = np.asarray(arrays["x"], dtype=float).ravel()
    y = np.asarray(arrays["y"], dtype=float).ravel()
    if x.size != y.size:
        raise ValueError(f"y has {y.size} points but x has {x.size}")
    ax = fig.subplots()
    ax.plot(x, y, marker="o", markersize=3, linewidth=1.2, color="#37474f", label=str(extra.get("y_label", "y")))
    if "state" in arrays:
        state = np.asarray(arrays["state"]).ravel().astype(bool)
        if state.size != x.size:
            raise ValueError(f"state has {state.size} points but x has {x.size}")
        state_ax = ax.twinx()
        state_ax.step(x, state.astype(int), where="mid", color="#8e24aa", linewidth=1.2,
                      label=str(extra.get("state_label", "redundancy on")))
        state_ax.set_ylim(-0.1, 1.1)
        state_ax.set_yticks([0, 1], ["off", "on"])
        state_ax.legend(fontsize=7, loc="upper center")
    if extra.get("log_y") and np.all(y[np.isfinite(y)] > 0):
        ax.set_yscale("log")
    _limit_and_bound_lines(ax, verdict, vertical=extra.get("limit_axis", "y") == "x")
    ax.set_xlabel(str(extra.get("x_label", "x")))
    ax.set_ylabel(str(extra.get("y_label", verdict.get("unit") or "")))
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(alpha=0.3)


PLOTTERS: dict[str, Callable[[Figure, dict[str, np.ndarray], dict[str, Any]], None]] = {
    "samples": plot_samples, "trace": plot_trace, "sweep": plot_sweep}
REQUIRED = {"samples": ("samples",), "trace": ("t", "y"), "sweep": ("x", "y")}
