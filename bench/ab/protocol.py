"""What an A/B runs on: units that can install a build and measure a segment, each with its clock.

The station's implementation is bench/ab/measure.py (the catalogue's installer, the checks'
measurement functions, the station clock); bench/ab/simulated.py draws segments from a stated
noise model for the operating characteristics, through the same runner, rule and search.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from phonebench.core.errors import BenchError
from .records import AbResult, Installed, Unit


@dataclass(frozen=True)
class Measured:
    """One segment's statistics, before the runner places it in its schedule."""

    values: dict[str, float]  # metric -> statistic (positive)
    samples: dict[str, int]
    findings: tuple[str, ...] = ()
    raw: dict[str, float] = field(default_factory=dict)  # what was measured beside the statistics (bench/ab/dialogs.py)


class AbBench(Protocol):
    def units(self) -> Sequence[Unit]: ...

    def now(self, unit: str) -> float:
        """The unit's station clock, seconds."""

    def install(self, unit: str, build: str) -> Installed:
        """Put `build` on the unit; raises BuildUnusable when the build cannot be installed or started."""

    def segment(self, unit: str, metrics: Sequence[str]) -> Measured:
        """One fixed workload on whatever build the unit runs, each named gate's statistic."""


class BuildUnusable(BenchError):
    """A build that cannot be installed or started (the catalogue's InstallFailed kinds, or no
    artefact): bisect skips it and says so; an A/B of it stops, keeping what it measured (`partial`)."""

    def __init__(self, build: str, kind: str, message: str, partial: AbResult | None = None) -> None:
        self.build, self.kind, self.partial = build, kind, partial
        super().__init__(f"build {build}: {kind}: {message}")
