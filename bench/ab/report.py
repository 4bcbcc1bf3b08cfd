"""What an A/B and a bisection leave: JSON in the results folder, rewritten after every look or step
(a failure loses nothing measured), and a text summary for the terminal.

An A/B's summary gives, per model and gate, the change B/A with its 95 % interval, the call, the
blocks and units it rests on, and what the gate could detect (energy per dialog: at a fixed dialog
length, with the dialogs' length change shown beside it when dialog_length is not a gate); then
the lab minutes per phone and the plan's stated errors. A bisection's gives each step (its builds,
the effect per model and metric with its interval, its lab minutes), each model's culprit(s) with
the effect the deciding step measured, the builds it skipped and why, and the whole search's lab
minutes.
"""
from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from phonebench.core.files import write_atomically
from phonebench.bench.results.handover import gate_of
from .bisect import BisectResult, Step
from .dialogs import WINDOW_S
from .gates import DIALOG_LENGTH, ENERGY_PER_DIALOG
from .records import AbResult, GateResult
from .sequential import pooled

AB_FILE, BISECT_FILE = "ab.json", "bisect.json"


def write_ab(result: AbResult, folder: Path, extra: Mapping[str, Any] | None = None) -> Path:
    path = Path(folder) / AB_FILE
    write_atomically(path, json.dumps({**result.to_dict(), **(extra or {})}, indent=1, default=str))
    return path


def write_bisect(result: BisectResult, folder: Path, extra: Mapping[str, Any] | None = None) -> Path:
    path = Path(folder) / BISECT_FILE
    write_atomically(path, json.dumps({**bisect_dict(result), **(extra or {})}, indent=1, default=str))
    return path


def bisect_dict(result: BisectResult) -> dict[str, Any]:
    return {"good": result.good, "bad": result.bad, "builds": list(result.builds), "metrics": list(result.metrics),
            "lab_minutes": result.lab_minutes, "skipped": dict(result.skipped),
            "models": {m: {"status": s.status, "directions": dict(s.directions), "notes": list(s.notes),
                           "culprits": [{**asdict(c), "effects": [g.to_dict() for g in c.effects]}
                                        for c in s.culprits]}
                       for m, s in result.models.items()},
            "steps": [{"index": s.index, "a": s.a, "b": s.b, "purpose": s.purpose, "models": list(s.models),
                       "metrics": list(s.metrics), "attempt": s.attempt, "verdicts": dict(s.verdicts), "note": s.note,
                       "lab_minutes": s.lab_minutes, "ab": s.result.to_dict() if s.result is not None else None}
                      for s in result.steps]}


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:+.2f} %"


def gate_line(g: GateResult, detects: float | None = None) -> str:
    ci = f"[{_pct(g.interval[0])}, {_pct(g.interval[1])}]" if g.interval else "no interval yet"
    can = f"; detects {100 * detects:.1f} % at 95 % power" if detects is not None else ""
    return (f"{g.metric:18} {_pct(g.change):>9}  95 % CI {ci:24} {g.call:10} "
            f"({g.blocks} blocks, {len(g.units)} unit(s), look {g.look}{can})")


def ab_text(result: AbResult, detects: Mapping[tuple[str, str], float] | None = None) -> list[str]:
    """The A/B's summary; `detects`: (model, metric) -> the change the gate detects at 95 % power."""
    lines = [f"A/B {result.a} (A) vs {result.b} (B), attempt {result.attempt}"
             + (f", seed {result.seed}" if result.seed is not None else "") + f": {result.plan.describe()}"]
    for model in result.models:
        units = [u.name for u in result.units if u.model == model]
        lines.append(f"  {model} ({', '.join(units)}): change B/A")
        for g in result.gates:
            if g.model == model:
                lines.append("    " + gate_line(g, (detects or {}).get((model, g.metric))))
        lines += ["    " + x for x in dialog_lines(result, model, (detects or {}).get((model, DIALOG_LENGTH)))]
    lab = ", ".join(f"{u} {s / 60:.1f}" for u, s in result.lab_s.items())
    lines.append(f"  lab minutes (installs included): {lab}; the A/B {result.lab_minutes:.1f}")
    for unit, why in result.stopped.items():
        lines.append(f"  {unit} stopped: {why}")
    regressed = [f"{g.metric} on {g.model}" for g in result.gates if g.call == "regressed"]
    lines.append(f"{len(regressed)} regression(s)" + (": " + ", ".join(regressed) if regressed else ""))
    return lines


def length_beside(result: AbResult) -> dict[str, dict[str, list[float]]]:
    """model -> unit -> block log-ratios of the dialogs' mean window, when energy per dialog was decided
    without dialog_length: what the report shows beside it (so a longer dialog is never hidden)."""
    if ENERGY_PER_DIALOG not in result.metrics or DIALOG_LENGTH in result.metrics:
        return {}
    return result.raw_blocks(WINDOW_S)


def dialog_lines(result: AbResult, model: str, length_detects: float | None = None) -> list[str]:
    """What energy per dialog decides and what it leaves to dialog_length, for one model."""
    if ENERGY_PER_DIALOG not in result.metrics:
        return []
    refs = ", ".join(f"{u} {w:.2f} s" for u, w in result.reference_s.items() if u in
                     {x.name for x in result.units if x.model == model})
    lines = [f"(energy_per_dialog is the energy of a dialog of fixed length{' (' + refs + ')' if refs else ''}: "
             "a change of dialog length is dialog_length's)"]
    if DIALOG_LENGTH in result.metrics:
        return lines
    can = f"; detects {100 * length_detects:.1f} % at 95 % power" if length_detects is not None else ""
    est = pooled(length_beside(result).get(model, {}))
    if est is None:
        return lines + [f"{'dialog_length':18} not yet two blocks (not a gate of this A/B{can})"]
    lo, hi = est.interval(0.95)
    return lines + [f"{'dialog_length':18} {_pct(est.relative):>9}  95 % CI [{_pct(lo)}, {_pct(hi)}] measured, "
                    f"not decided ({est.blocks} blocks; --metric dialog_length decides it{can})"]


def step_lines(step: Step) -> list[str]:
    head = (f"  step {step.index} ({step.purpose}{', attempt %d' % step.attempt if step.attempt > 1 else ''}): "
            f"{step.a} vs {step.b}, {step.lab_minutes:.1f} lab min: "
            + ", ".join(f"{m} {v}" for m, v in step.verdicts.items()) + (f" ({step.note})" if step.note else ""))
    lines = [head]
    if step.result is not None:
        for g in step.result.gates:
            if g.call in ("regressed", "improved") or g.metric in step.metrics:
                ci = f"[{_pct(g.interval[0])}, {_pct(g.interval[1])}]" if g.interval else ""
                lines.append(f"      {g.model}: {g.metric} {_pct(g.change)} {ci} {g.call}")
    return lines


def bisect_text(result: BisectResult) -> list[str]:
    lines = [f"bisect {result.good} (good) .. {result.bad} (bad): {len(result.builds)} builds, "
             f"gates {', '.join(result.metrics)}"]
    for step in result.steps:
        lines += step_lines(step)
    for build, why in result.skipped.items():
        lines.append(f"  skipped {build}: {why}")
    for model, search in result.models.items():
        if not search.culprits:
            lines.append(f"{model}: {search.status}" + (f": {search.notes[0]}" if search.notes else ""))
        for c in search.culprits:
            which = c.build if len(c.candidates) == 1 else \
                f"one of {', '.join(c.candidates)} (the others could not be installed)"
            effects = "; ".join(f"{g.metric} {_pct(g.change)} [{_pct(g.interval[0]) if g.interval else ''}, "
                                f"{_pct(g.interval[1]) if g.interval else ''}] {g.call}" for g in c.effects)
            lines.append(f"{model}: culprit {which} (after {c.after}), step {c.step}: {effects}")
        for note in search.notes[1 if not search.culprits else 0:]:
            lines.append(f"  {note}")
    lines.append(f"{len(result.steps)} A/B steps, {result.lab_minutes:.1f} lab minutes")
    return lines


def bisect_command(good: str, bad: str, metrics: Sequence[str] = (), models: Sequence[str] = (),
                   catalogue: str | None = None) -> str:
    """The `bench bisect` command for a build range (what `bench trend` offers under a change point)."""
    words = ["bench", "bisect", "--good", good, "--bad", bad]
    for metric in metrics:
        words += ["--metric", metric]
    for model in models:
        words += ["--model", model]
    if catalogue:
        words += ["--catalogue", catalogue]
    return " ".join(shlex.quote(w) for w in words)


# The nightly's statistics (a trend series' name) that an A/B gate measures the same way.
def bisect_offer(series_metric: str, model: str, before: Sequence[str], after: Sequence[str]) -> str | None:
    """The bisect command for a trend change point: from the one build the nights before ran to the
    one after, on that model, for the gate measuring that statistic (all gates when none does);
    None when either side ran several builds or both the same (not a build change)."""
    if len(before) != 1 or len(after) != 1 or before[0] == after[0]:
        return None
    gate = gate_of(series_metric)
    return bisect_command(before[0], after[0], [gate] if gate else [], [model], catalogue="PATH")
