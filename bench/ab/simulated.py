"""A planted catalogue on simulated units: the A/B runner, its rule and the bisect search run on
it exactly as on a station, with segments drawn from a stated noise model instead of measured.

Each build may change gates by a factor on some models (a culprit), and changes add up along the
catalogue's order; a build may be unusable (it fails to install, with the catalogue's kinds). A
segment's value is the true value of the build the unit runs, times lognormal noise of the gate's
stated spread (a noisy unit: a larger spread), plus an optional drift per segment (a phone
warming). Lab time is the stated seconds of each workload part the segment measures and of each
install, on a per-unit clock. Dialogs are drawn raw (a power of energy per dialog's spread times a
window of dialog length's), so the runner's length adjustment (bench/ab/dialogs.py) runs on them.
The spreads and seconds come from measured segments on the emulated station
(benchmarks/bench_bisect.py), so the figures it prints are that station's.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from .dialogs import dialog_raw
from .gates import DIALOG_LENGTH, ENERGY_PER_DIALOG, GATES
from .protocol import BuildUnusable, Measured
from .records import Installed, Unit


# A simulated dialog: its mean power (the energy_per_dialog gate's factor and spread) over its window
# (dialog_length's), about the emulated phone's (bench.checks.power.measure_dialog_energy on it).
DIALOG_W, DIALOG_S = 4.0, 2.45


@dataclass(frozen=True)
class Noise:
    """What one segment costs and how much it scatters, per gate (log spread, 1-sigma)."""

    sigma: Mapping[str, float]  # metric -> spread of one segment's statistic (log)
    part_s: Mapping[str, float]  # workload part (gates.Gate.part) -> station seconds
    install_s: float
    drift: float = 0.0  # log change per segment, every gate (a phone warming), 0: none


@dataclass(frozen=True)
class PlantedBuild:
    id: str
    changes: Mapping[str, Mapping[str, float]] = field(default_factory=dict)  # model -> metric -> factor
    unusable: str | None = None  # an InstallFailed kind: the build never installs


class SimulatedBench:
    """AbBench over planted builds (bench/ab/protocol.py)."""

    def __init__(self, builds: Sequence[PlantedBuild], units: Sequence[Unit], noise: Noise,
                 rng: np.random.Generator, noisy: Mapping[str, float] | None = None) -> None:
        self.builds = {b.id: b for b in builds}
        self.order = [b.id for b in builds]
        self._units, self.noise, self.rng = list(units), noise, rng
        self.noisy = dict(noisy or {})  # unit -> factor on its spread
        self.clock = {u.name: 0.0 for u in units}
        self.running: dict[str, str | None] = {u.name: None for u in units}
        self.segments = {u.name: 0 for u in units}
        self.model = {u.name: u.model for u in units}

    def units(self) -> Sequence[Unit]:
        return self._units

    def now(self, unit: str) -> float:
        return self.clock[unit]

    def install(self, unit: str, build: str) -> Installed:
        planted = self.builds[build]
        self.clock[unit] += self.noise.install_s
        if planted.unusable:
            raise BuildUnusable(build, planted.unusable, "planted: this build does not install")
        self.running[unit] = build
        return Installed(build, self.noise.install_s)

    def truth(self, build: str, model: str, metric: str) -> float:
        """The build's true value of a gate on a model, relative to the first build's."""
        factor = 1.0
        for b in self.order[:self.order.index(build) + 1]:
            factor *= self.builds[b].changes.get(model, {}).get(metric, 1.0)
        return factor

    def segment(self, unit: str, metrics: Sequence[str]) -> Measured:
        build = self.running[unit]
        if build is None:
            raise BuildUnusable("?", "unreachable", f"{unit}: no build installed")
        spread = self.noisy.get(unit, 1.0)
        drift = self.noise.drift * self.segments[unit]
        draw = lambda m: self.truth(build, self.model[unit], m) * math.exp(  # noqa: E731
            drift + spread * self.noise.sigma.get(m, 0.0) * self.rng.standard_normal())
        parts = {GATES[m].part for m in metrics}
        values = {m: draw(m) for m in metrics if GATES[m].part != "dialogs"}
        raw: dict[str, float] = {}
        if "dialogs" in parts:  # raw dialogs: the runner states the dialog gates from them, as on a station
            window = DIALOG_S * draw(DIALOG_LENGTH)
            raw = dialog_raw([DIALOG_W * draw(ENERGY_PER_DIALOG) * window], [window])
        self.segments[unit] += 1
        self.clock[unit] += sum(self.noise.part_s[p] for p in parts)
        return Measured(values, {m: 1 for m in values}, (), raw)
