"""Typed records of an A/B: its segments as measured, each gate's call per model, the whole result.

A gate's result is data: the change with its interval, the blocks and units it rests on, the
call and the bounds the call rests on, with the plan's stated errors beside it. Every record has
`to_dict` for the results folder's JSON (bench/ab/report.py).
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from .schedule import Side, block_log_ratio
from .sequential import SETTLED, AbPlan, Call


@dataclass(frozen=True)
class Unit:
    name: str  # the phone's name in the station file
    model: str  # what its results pool under (the phone model: SoC and product)


@dataclass(frozen=True)
class Installed:
    """One install as the A/B saw it (the catalogue's InstallRecord, reduced to what a report needs)."""

    build: str
    station_s: float  # station-clock seconds the install held the phone
    reported_version: str = ""
    sha256: str = ""


@dataclass(frozen=True)
class Segment:
    """One build's turn on one unit: each gate's statistic and what it rests on."""

    unit: str
    block: int
    position: int
    side: Side
    build: str
    values: Mapping[str, float]  # metric -> the segment's statistic
    samples: Mapping[str, int]  # metric -> samples it rests on
    start_s: float  # station clock (the unit's), install included
    end_s: float
    install: Installed | None = None
    findings: tuple[str, ...] = ()  # what the bench saw that is not a number (tokens not the model's)
    raw: Mapping[str, float] = field(default_factory=dict)  # measured beside the statistics: a dialog's raw energy, window

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class GateResult:
    """One gate on one phone model: the pooled change B/A and the rule's call."""

    metric: str
    unit: str  # of the statistic (the change itself is relative)
    model: str
    call: Call
    change: float | None  # relative, B / A - 1
    interval: tuple[float, float] | None  # 95 %, not adjusted for the looks
    bounds: tuple[float, float] | None  # what the call rests on, each one-sided at `level`
    level: float | None
    blocks: int  # block differences pooled
    units: tuple[str, ...]
    look: int  # blocks per unit when decided
    detail: str

    @property
    def settled(self) -> bool:
        return self.call in SETTLED

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _value_of(metric: str, segment: Segment) -> float | None:
    return segment.values.get(metric)


@dataclass
class AbResult:
    """An A/B of build `a` against build `b` on some units, as far as it got."""

    a: str
    b: str
    plan: AbPlan
    metrics: tuple[str, ...]
    units: tuple[Unit, ...]
    attempt: int = 1
    seed: int | None = None
    gates: list[GateResult] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    lab_s: dict[str, float] = field(default_factory=dict)  # per unit, station clock, installs included
    stopped: dict[str, str] = field(default_factory=dict)  # unit -> why it stopped before the plan's end
    reference_s: dict[str, float] = field(default_factory=dict)  # unit -> the dialog length energy per dialog is at

    def gate(self, metric: str, model: str) -> GateResult | None:
        return next((g for g in self.gates if g.metric == metric and g.model == model), None)

    def blocks(self) -> dict[tuple[str, str], dict[str, list[float]]]:
        """(model, metric) -> unit -> each whole block's log-ratio B/A, from the segments measured."""
        out: dict[tuple[str, str], dict[str, list[float]]] = {}
        for metric in self.metrics:
            for model, units in self._block_ratios(functools.partial(_value_of, metric)).items():
                out[(model, metric)] = units
        return out

    def raw_blocks(self, key: str) -> dict[str, dict[str, list[float]]]:
        """model -> unit -> each whole block's log-ratio B/A of a raw field (e.g. the dialogs' mean window)."""
        return self._block_ratios(lambda s: s.raw.get(key))

    def _block_ratios(self, value: Callable[[Segment], float | None]) -> dict[str, dict[str, list[float]]]:
        by_block: dict[tuple[str, int], list[Segment]] = {}
        for s in self.segments:
            by_block.setdefault((s.unit, s.block), []).append(s)
        model = {u.name: u.model for u in self.units}
        out: dict[str, dict[str, list[float]]] = {}
        for (unit, _), segments in sorted(by_block.items()):
            a = [v for s in segments if s.side == "A" and (v := value(s)) is not None]
            b = [v for s in segments if s.side == "B" and (v := value(s)) is not None]
            if len(a) == 2 and len(b) == 2:
                out.setdefault(model[unit], {}).setdefault(unit, []).append(block_log_ratio((a[0], a[1]), (b[0], b[1])))
        return out

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(u.model for u in self.units))

    @property
    def lab_minutes(self) -> float:
        """The A/B's lab time: its units run at once, so the longest unit's."""
        return max(self.lab_s.values(), default=0.0) / 60.0

    @property
    def phone_minutes(self) -> float:
        return sum(self.lab_s.values()) / 60.0

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "attempt": self.attempt, "seed": self.seed, "metrics": list(self.metrics),
                "plan": asdict(self.plan), "units": [asdict(u) for u in self.units],
                "gates": [g.to_dict() for g in self.gates], "lab_s": dict(self.lab_s),
                "lab_minutes": self.lab_minutes, "stopped": dict(self.stopped),
                "reference_dialog_s": dict(self.reference_s),
                "segments": [s.to_dict() for s in self.segments]}
