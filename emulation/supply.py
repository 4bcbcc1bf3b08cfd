"""What powers the emulated phone: its own battery, or a battery emulator on the bench.

The phone is a constant-power load: at source voltage V behind resistance R it draws
I = (V - sqrt(V^2 - 4RP)) / 2R, so an emulated battery's output resistance really sags the
terminal voltage under load. An ARB sine on the emulator's output adds ripple.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

BATTERY_R_OHM = 0.12  # internal resistance of the phone's own cell (aged Li-ion, warm)
DEFAULT_RIPPLE_HZ = 217.0  # GSM-frame rate, the usual ripple of a phone's supply


def battery_ocv_v(capacity_pct: float) -> float:
    """Open-circuit voltage of a Li-ion cell from its state of charge (a smooth, monotone fit)."""
    soc = min(max(capacity_pct, 0.0), 100.0) / 100.0
    return 3.40 + 0.62 * soc + 0.33 * soc ** 3 - 0.14 * math.exp(-20.0 * soc)


@dataclass
class Supply:
    """Source state; a power analyzer writes the emulator fields, the world reads the terminal side."""

    emulator_on: bool = False  # True: the bench supply powers the phone
    setpoint_v: float = 3.85
    output_resistance_ohm: float = 0.0
    current_limit_a: float = 3.0
    ripple_amplitude_v: float = 0.0
    ripple_offset_v: float = 0.0  # the ARB sine's offset; becomes the DC level while it runs
    ripple_hz: float = DEFAULT_RIPPLE_HZ
    ripple_running: bool = False
    ripple_t0: float = 0.0  # world time the ARB started (phase of the sine)

    def source(self, capacity_pct: float) -> tuple[float, float]:
        """(open-circuit volts, series ohms) of whatever powers the phone now."""
        if not self.emulator_on:
            return battery_ocv_v(capacity_pct), BATTERY_R_OHM
        level = self.ripple_offset_v if self.ripple_running and self.ripple_offset_v > 0 else self.setpoint_v
        return level, max(self.output_resistance_ohm, 0.0)

    def active_ripple_v(self) -> float:
        return self.ripple_amplitude_v if (self.emulator_on and self.ripple_running) else 0.0

    def current_for_power(self, power_w: np.ndarray | float, volts: np.ndarray | float,
                          ohms: float) -> np.ndarray | float:
        """Current a constant-power load draws from (volts behind ohms), capped by the limit."""
        if ohms <= 1e-9:
            current = power_w / np.maximum(volts, 0.5)
        else:
            disc = np.maximum(np.square(volts) - 4.0 * ohms * power_w, 0.0)
            current = (volts - np.sqrt(disc)) / (2.0 * ohms)
        if self.emulator_on:
            current = np.minimum(current, self.current_limit_a)
        return current

    def current_now(self, power_w: float, volts: float, ohms: float) -> float:
        """current_for_power for one instant, in plain floats (the per-step physics path)."""
        if ohms <= 1e-9:
            current = power_w / max(volts, 0.5)
        else:
            current = (volts - math.sqrt(max(volts * volts - 4.0 * ohms * power_w, 0.0))) / (2.0 * ohms)
        return min(current, self.current_limit_a) if self.emulator_on else current

    def source_at(self, times: np.ndarray, capacity_pct: float) -> tuple[np.ndarray, float]:
        """Open-circuit volts at each time (with ripple) and the series resistance."""
        volts, ohms = self.source(capacity_pct)
        ripple = self.active_ripple_v()
        level = np.full(times.shape, volts)
        if ripple > 0:
            level += ripple * np.sin(2.0 * np.pi * self.ripple_hz * (times - self.ripple_t0))
        return level, ohms
