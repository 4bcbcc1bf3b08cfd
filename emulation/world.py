"""The simulated world one emulated phone lives in: its clock, its load, supply and heat.

The phone's runtime reports work (`work(phase, seconds)`); instruments and the phone's own
sensors read the physical state from here, so what a probe, the power analyzer and the
device's thermal zones see is one consistent story.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from emulation.clock import SimClock

log = logging.getLogger(__name__)

# Phone power draw by activity, watts (battery side); tuned to the product's claims.
PHASE_POWER_W = {"idle": 0.45, "prefill": 4.6, "decode": 3.9, "audio": 1.1}


@dataclass
class BatteryState:
    voltage_v: float
    current_a: float  # positive = discharging
    temp_c: float
    capacity_pct: float


class World:
    def __init__(self, clock: SimClock | None = None, ambient_c: float = 25.0, seed: int = 0) -> None:
        self.clock = clock or SimClock()
        self.ambient_c = ambient_c
        self.seed = seed
        self._lock = threading.RLock()
        self.phase = "idle"
        self.supply_v = 3.85
        self.ripple_v = 0.0  # sine amplitude on the supply, volts
        self.capacity_pct = 87.0
        self.battery_capacity_wh = 18.5
        self._temps = {"npu": ambient_c + 8.0, "cpu": ambient_c + 6.0, "board": ambient_c + 4.0,
                       "skin": ambient_c + 3.0, "battery": ambient_c + 3.0}
        self.clock.add_listener(self._step)

    # --- what the device reports -------------------------------------------------------
    def power_w(self) -> float:
        return PHASE_POWER_W.get(self.phase, PHASE_POWER_W["idle"])

    def work(self, phase: str, seconds: float) -> float:
        """Run the phone in `phase` for `seconds` of simulated time; returns the end time."""
        with self._lock:
            previous, self.phase = self.phase, phase
            try:
                return self.clock.advance(seconds)
            finally:
                self.phase = previous

    def wait(self, seconds: float) -> float:
        return self.clock.advance(seconds)

    # --- what sensors and instruments read ----------------------------------------------
    def temperatures(self) -> dict[str, float]:
        with self._lock:
            return dict(self._temps)

    def battery_state(self) -> BatteryState:
        with self._lock:
            return BatteryState(voltage_v=self.supply_v, current_a=self.power_w() / self.supply_v,
                                temp_c=self._temps["battery"], capacity_pct=self.capacity_pct)

    def ripple_amplitude_v(self) -> float:
        return self.ripple_v

    # --- physics -------------------------------------------------------------------------
    def _step(self, t: float, dt: float) -> None:
        energy_wh = self.power_w() * dt / 3600.0
        self.capacity_pct = max(0.0, self.capacity_pct - 100.0 * energy_wh / self.battery_capacity_wh)
