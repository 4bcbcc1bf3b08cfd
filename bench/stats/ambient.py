"""Thermal figures stated at an ambient (claim 7: "41.7 °C on the back cover ... at 25 °C ambient"),
referred to that reference from the room the bench measured (docs/uncertainty.md, "The room").

The model: a passive surface sits above its air by what its heat flow makes it, so it moves degree
for degree with the air, T_ref = T_measured − (T_ambient − T_reference). It holds in the window the
entry states (23–27 °C for claim 7: a few degrees, where the surface's loss coefficients do not
change measurably); outside it the correction is not shown to hold, and the verdict says so (a
finding the judge turns into INCONCLUSIVE), whatever the numbers.

The correction carries its own uncertainty into the verdict's budget: the ambient probe's (its
calibration, else its tolerance class), its placement (the probe hangs beside the phone, not in the
air the cover sheds its heat to), the air's movement over the measurement (the cover lags it by
minutes) and the model's coefficient (1 within ±COEFFICIENT_TOLERANCE).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from phonebench.core.verdict import Finding, FindingKind, UncertaintyComponent

SQRT3 = math.sqrt(3.0)
REFERENCE_AMBIENT_C = 25.0
VALID_AMBIENT_C = (23.0, 27.0)
# The ambient probe hangs in the bay's air ~10 cm beside the phone; the air the cover sheds its
# heat to differs from it by up to this (rectangular half-width, degC). A lab that maps its bays'
# air states its own (the entry's `ambient_placement_c`).
PLACEMENT_C = 0.3
# The cover's rise above its air changes with the air by at most this share of the air's change
# over the window (convection's weak dependence on the film temperature, radiation linearised).
COEFFICIENT_TOLERANCE = 0.05


@dataclass(frozen=True)
class AmbientReference:
    """The ambient a figure is stated at and the window the correction to it is valid in."""

    reference_c: float = REFERENCE_AMBIENT_C
    valid_c: tuple[float, float] = VALID_AMBIENT_C
    placement_c: float = PLACEMENT_C


@dataclass(frozen=True)
class AmbientCorrection:
    """The measured ambient over the measurement and what it did to the figure."""

    reference: AmbientReference
    mean_c: float | None  # None: no ambient probe, or every reading of it failed
    min_c: float | None
    max_c: float | None
    n: int
    channel: str | None

    @property
    def valid(self) -> bool:
        """The mean air of the measurement inside the window (its movement is in the budget)."""
        low, high = self.reference.valid_c
        return self.mean_c is not None and low <= self.mean_c <= high

    @property
    def correction_c(self) -> float:
        """Subtracted from each reading: the room's excess over the reference (0 when not applied)."""
        return self.mean_c - self.reference.reference_c if self.valid and self.mean_c is not None else 0.0

    def refer(self, readings: ArrayLike) -> np.ndarray:
        """The readings referred to the reference ambient (unchanged when the correction is not valid)."""
        return np.asarray(readings, dtype=float) - self.correction_c

    def findings(self) -> tuple[Finding, ...]:
        """Why the figure cannot be stated at the reference ambient, if it cannot."""
        low, high = self.reference.valid_c
        if self.mean_c is None:
            where = f"ambient channel {self.channel}" if self.channel else "no ambient channel"
            return (Finding(FindingKind.OUTSIDE_VALIDITY,
                            f"ambient not measured ({where}): the figure cannot be referred to "
                            f"{self.reference.reference_c:g} degC ambient"),)
        if not self.valid:
            return (Finding(FindingKind.OUTSIDE_VALIDITY,
                            f"ambient {self.mean_c:.2f} degC (mean; {self.min_c:.2f}..{self.max_c:.2f}) is outside "
                            f"{low:g}-{high:g} degC, where referring the figure to "
                            f"{self.reference.reference_c:g} degC degree for degree is valid: re-measure in "
                            "a room inside the window"),)
        return ()

    def components(self, probe_u_c: float, probe_note: str) -> list[UncertaintyComponent]:
        """The correction's budget lines (degC, standard); none when no correction was applied."""
        if not self.valid or self.mean_c is None:
            return []
        spread = (self.max_c or 0.0) - (self.min_c or 0.0)
        return [
            UncertaintyComponent("ambient probe", probe_u_c, "B", f"{self.channel}: {probe_note}"),
            UncertaintyComponent("ambient placement", self.reference.placement_c / SQRT3, "B",
                                 f"the probe is not the air at the phone: up to +-{self.reference.placement_c:g} "
                                 "degC, rectangular"),
            UncertaintyComponent("ambient movement", spread / 2.0 / SQRT3, "B",
                                 f"the air moved over {spread:.2f} degC during the measurement (the cover lags "
                                 "it), rectangular over half the range"),
            UncertaintyComponent("ambient model", abs(self.correction_c) * COEFFICIENT_TOLERANCE / SQRT3, "B",
                                 f"degree-for-degree within +-{COEFFICIENT_TOLERANCE:.0%} of the "
                                 f"{self.correction_c:+.2f} degC correction, rectangular"),
        ]

    def record(self, raw_value: float | None = None) -> dict[str, Any]:
        """What the verdict keeps of it (extra["ambient"]): measured, reference, correction, raw value."""
        out: dict[str, Any] = {"channel": self.channel, "mean_c": self.mean_c, "min_c": self.min_c,
                               "max_c": self.max_c, "n": self.n, "reference_c": self.reference.reference_c,
                               "valid_c": list(self.reference.valid_c), "correction_c": self.correction_c,
                               "applied": self.valid}
        if raw_value is not None:
            out["raw_value"] = raw_value
        return out

    def text(self) -> str:
        """One line for the verdict's detail."""
        if self.mean_c is None:
            return "ambient not measured"
        shown = f"ambient {self.mean_c:.2f} degC ({self.min_c:.2f}..{self.max_c:.2f})"
        if not self.valid:
            return f"{shown}: not referred to {self.reference.reference_c:g} degC"
        return f"{shown}, referred to {self.reference.reference_c:g} degC: {-self.correction_c:+.2f} degC"


def measure_ambient(readings: ArrayLike, reference: AmbientReference, channel: str | None) -> AmbientCorrection:
    """The ambient probe's readings over the measurement (NaN: a failed reading, left out)."""
    x = np.asarray(readings, dtype=float).ravel()
    x = x[np.isfinite(x)]
    if channel is None or x.size == 0:
        return AmbientCorrection(reference, None, None, None, 0, channel)
    return AmbientCorrection(reference, float(x.mean()), float(x.min()), float(x.max()), int(x.size), channel)
