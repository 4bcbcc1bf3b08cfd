"""A power analyzer's digitizer sweep: current and voltage against time relative to the trigger."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from phonebench.core.errors import ConfigError, InvalidMeasurement

OVERLOAD = 9.9e37  # the meter's "overload" value in array data


@dataclass
class Trace:
    """One digitizer sweep; t is seconds relative to the trigger (negative = pre-trigger)."""

    t: np.ndarray
    interval_s: float
    pretrigger_points: int
    current_a: np.ndarray | None = None
    voltage_v: np.ndarray | None = None
    instrument: str = ""

    @property
    def sample_rate_hz(self) -> float:
        # To 12 digits: an instrument's 50 kS/s stored as its 20 us interval reads back as 49999.99…
        return float(f"{1.0 / self.interval_s:.12g}")

    def invalid_count(self) -> int:
        return sum(int(np.count_nonzero(~np.isfinite(a) | (np.abs(a) >= OVERLOAD)))
                   for a in (self.current_a, self.voltage_v) if a is not None)

    def require_valid(self) -> Trace:
        bad = self.invalid_count()
        if bad:
            raise InvalidMeasurement(f"{self.instrument}: {bad} digitizer samples are overload or NaN",
                                     hint="raise the measurement range or current limit; check the DUT wiring")
        return self

    def power_w(self) -> np.ndarray:
        if self.current_a is None or self.voltage_v is None:
            raise ConfigError("power needs a trace with both current and voltage",
                              hint="digitize with quantities=('current', 'voltage')")
        self.require_valid()
        return self.current_a.astype(np.float64) * self.voltage_v

    def energy_j(self) -> float:
        return float(np.sum(self.power_w()) * self.interval_s)
