"""The GPU load's level from its draw (claim 5's condition): how GPU power rises with busy fraction.

Claim 5 holds its latency limit "while a GPU load keeps the GPU over 70 % busy". The load tool and
the GPU driver's busy counters are the phone's word: a phone running a light real load (it draws
and slows a little) while both say 80 % would pass on them. The power analyzer sees the load's draw
(idle with the load minus idle without), and the draw rises with busy fraction along a line per
SoC model:

    drawn_w = offset_w + w_per_busy x busy

identified on reference units of the model (`identify_gpu_power`: load steps at known levels, the
reference unit's own counters trusted as the lab's instrument there, several units so their
spread is known; benchmarks/identify_gpu_power.py), and carried as a calibration record per SoC
model in the contention entry's parameters (`gpu_power.<model>`: w_per_busy, offset_w, fit_u_w,
unit_u, units, n, source). The record is chosen by the SoC model the phone names, which claim 9's
fingerprint holds against its NPU's behaviour and the lab's inventory. The bench
inverts it for the unit under test: level = (drawn_w - offset_w) / w_per_busy, with a standard
uncertainty from the unit-to-unit spread of the slope (this unit is not the reference; the mean
slope over `units` units has its own sqrt(1 + 1/units)), the fit's residuals and the reading's
scatter, expanded with Student's t at CONFIDENCE for units - 1 degrees of freedom (the spread is
estimated from few units): an honest unit is called a liar 1 time in 100 under the normal model,
and a load at 30 % reported as 80 % is 6 to 10 expanded uncertainties away.

- The phone's level (the counters', else the tool's) more than the expanded uncertainty from the
  power's: the level was not there: FAIL.
- An expanded uncertainty wider than SETTLE_U (a loose record or a noisy draw): the power cannot
  settle the level: INCONCLUSIVE (a FAIL stays).
- Otherwise the level is corroborated by the instrument, and the verdict says so.
Without a record for the model, or without a power analyzer on the phone, the level stays the
phone's word: the verdict carries `condition_evidence = "reported"`, and the claims grid never
shows it as a plain pass.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from scipy import stats

from phonebench.core import judge
from phonebench.core.verdict import Finding, FindingKind, Verdict
from phonebench.drivers.device import Device
from phonebench.drivers.gpuload import GpuLoad, read_gpu_busy
from phonebench.drivers.power import PowerAnalyzer

log = logging.getLogger(__name__)

CONFIDENCE = 0.99          # two-sided: the level interval a unit's draw allows
SETTLE_U = 0.15            # an expanded level uncertainty wider than this cannot tell 70 % from 55 %
STEP_LEVELS = (0.2, 0.4, 0.6, 0.8)  # load targets a reference unit is stepped through
STEP_SETTLE_S = 2.0
STEP_READS = 5


@dataclass(frozen=True)
class GpuPowerRelation:
    """drawn_w = offset_w + w_per_busy x busy for one SoC model, with its uncertainty record."""

    w_per_busy: float
    offset_w: float = 0.0
    fit_u_w: float = 0.0       # standard deviation of the fit's residuals, W
    unit_u: float = 0.0        # unit-to-unit relative standard deviation of the slope
    units: int = 1             # reference units the slope is the mean of
    n: int = 0                 # steps in the fit
    source: str = "calibration record"

    @classmethod
    def for_model(cls, parameters: dict[str, Any], soc_model: str) -> GpuPowerRelation | None:
        """The record an SLA entry carries for this SoC model, or None (the level stays the phone's word)."""
        record = dict(parameters.get("gpu_power", {})).get(soc_model)
        if not record:
            return None
        return cls(float(record["w_per_busy"]), float(record.get("offset_w", 0.0)), float(record.get("fit_u_w", 0.0)),
                   float(record.get("unit_u", 0.0)), int(record.get("units", 1)), int(record.get("n", 0)),
                   str(record.get("source", f"the profile's calibration record for {soc_model}")))

    def to_record(self) -> dict[str, Any]:
        return {"w_per_busy": round(self.w_per_busy, 4), "offset_w": round(self.offset_w, 4),
                "fit_u_w": round(self.fit_u_w, 4), "unit_u": round(self.unit_u, 4), "units": self.units,
                "n": self.n, "source": self.source}

    @property
    def coverage_k(self) -> float:
        """Student's t for the units' spread (a normal 99 % with one unit: its spread is unknown)."""
        return float(stats.t.ppf(0.5 + CONFIDENCE / 2.0, self.units - 1) if self.units > 1
                     else stats.norm.ppf(0.5 + CONFIDENCE / 2.0))

    def level(self, drawn_w: float, reading_u_w: float = 0.0) -> GpuLevel:
        busy = (drawn_w - self.offset_w) / self.w_per_busy
        components = {"unit-to-unit slope": abs(busy) * self.unit_u * math.sqrt(1.0 + 1.0 / max(self.units, 1)),
                      "fit residuals": self.fit_u_w / self.w_per_busy,
                      "draw reading": reading_u_w / self.w_per_busy}
        k = self.coverage_k
        return GpuLevel(busy, k * math.sqrt(sum(u * u for u in components.values())), k, components)


@dataclass(frozen=True)
class GpuLevel:
    """The busy fraction the power analyzer implies, with its expanded uncertainty (coverage k)."""

    busy: float
    expanded_u: float
    k: float
    components: dict[str, float]

    def as_dict(self) -> dict[str, Any]:
        return {"busy": self.busy, "expanded_u": self.expanded_u, "k": self.k, "confidence": CONFIDENCE,
                "standard_u": {k: round(v, 5) for k, v in self.components.items()}}


def identify_gpu_power(units: list[list[tuple[float, float]]], source: str) -> GpuPowerRelation:
    """Least squares per reference unit over (busy, drawn_w) steps; the record's slope is the units'
    mean slope, its unit spread their relative standard deviation (ddof 1), its fit residual the
    pooled residual scatter."""
    if not units or any(len(rows) < 3 for rows in units):
        raise ValueError("identify_gpu_power needs at least 3 (busy, drawn_w) steps per reference unit")
    slopes, offsets, residuals = [], [], []
    for rows in units:
        busy, drawn = np.asarray(rows, dtype=float).T
        (slope, offset), *_ = np.linalg.lstsq(np.column_stack([busy, np.ones_like(busy)]), drawn, rcond=None)
        slopes.append(float(slope))
        offsets.append(float(offset))
        residuals.extend(drawn - (slope * busy + offset))
    n = sum(len(rows) for rows in units)
    dof = max(n - 2 * len(units), 1)
    spread = float(np.std(slopes, ddof=1) / np.mean(slopes)) if len(slopes) > 1 else 0.0
    return GpuPowerRelation(float(np.mean(slopes)), float(np.mean(offsets)),
                            float(math.sqrt(float(np.sum(np.square(residuals))) / dof)), spread, len(units), n, source)


def drawn_power(supply: PowerAnalyzer, device: Device, rest_s: float, reads: int) -> tuple[float, float]:
    """The phone's draw after `rest_s` of rest: mean of `reads` V x I readings and its standard error, W."""
    device.run(["sleep", f"{rest_s:g}"])
    values = [supply.measure_voltage() * supply.measure_current() for _ in range(reads)]
    return float(np.mean(values)), float(np.std(values, ddof=1) / math.sqrt(reads)) if reads > 1 else 0.0


def gpu_power_steps(device: Device, supply: PowerAnalyzer, levels: tuple[float, ...] = STEP_LEVELS,
                    kind: str = "video+call") -> list[tuple[float, float]]:
    """On a reference unit (its counters trusted: the lab's own unit, checked by teardown or a
    trusted build): (busy by its counters, draw above idle, W) at each load step."""
    load = GpuLoad(device)
    rows = []
    for target in levels:
        idle, _ = drawn_power(supply, device, STEP_SETTLE_S, STEP_READS)
        load.start(target, kind)
        try:
            loaded, _ = drawn_power(supply, device, STEP_SETTLE_S, STEP_READS)
            busy = read_gpu_busy(device)
        finally:
            load.stop()
        if busy is None:
            raise ValueError(f"{device.name}: no GPU busy counters: not usable as a reference unit")
        rows.append((busy, loaded - idle))
    return rows


@dataclass(frozen=True)
class GpuLevelReading:
    """What the draw says of the GPU busy level a phone reported: the verdict's fields on it, the
    account, and a finding when the draw contradicts the level or is too loose to settle it."""

    extra: Mapping[str, Any]
    account: str
    finding: Finding | None = None

    def on(self, verdict: Verdict) -> Verdict:
        """The verdict with this reading's fields, its finding judged by the one judge."""
        if self.finding is not None:
            return judge.found(verdict, self.finding, extra=self.extra)
        return verdict.but(extra=self.extra, detail=f"{self.account}; {verdict.detail}")


def gpu_level_reading(reported: float, drawn_w: float | None, reading_u_w: float,
                      relation: GpuPowerRelation | None) -> GpuLevelReading:
    """The phone's GPU busy level against the level its draw implies (module doc)."""
    if relation is None or drawn_w is None:
        why = "no power analyzer on the phone" if drawn_w is None else "no GPU power record for this SoC model"
        return GpuLevelReading({"condition_evidence": "reported"},
                               f"the GPU load's level {reported:.0%} is the phone's word ({why})")
    level = relation.level(drawn_w, reading_u_w)
    extra = {"gpu_level_from_power": level.as_dict(), "gpu_power_relation": relation.source,
             "condition_evidence": "measured"}
    said = (f"the power analyzer implies a load {level.busy:.0%} +- {level.expanded_u:.0%} busy "
            f"({CONFIDENCE:.0%}, k={level.k:.2f})")
    if abs(reported - level.busy) > level.expanded_u:
        return GpuLevelReading(extra, said, Finding(FindingKind.CONTRADICTED,
                                                    f"{said}, the phone reports {reported:.0%}: "
                                                    f"the load's level was not there"))
    if level.expanded_u > SETTLE_U:
        return GpuLevelReading(extra, said, Finding(FindingKind.UNSETTLED,
                                                    f"{said}: too wide to settle the reported {reported:.0%}"))
    return GpuLevelReading(extra, f"{said}, corroborating the reported {reported:.0%}")
