"""The air inside an emulated thermal chamber, on the world's simulated clock.

What the emulated Watlow F4T controls and reads (emulation/instruments/f4t.py), and what a bay's
world takes as its ambient when the phone sits in the chamber (World.use_chamber):

- The control loop drives the air towards its working set point as a damped second-order system
  (a small overshoot, about 3 % of a step, then settling in ~10 simulated minutes), never faster
  than the chamber's heater or refrigeration can move it (HEAT_MAX_C_PER_MIN / COOL_MAX_C_PER_MIN).
- With ramping on (the loop's Ramp Action: Set Point or Both), the working set point starts at the
  air's temperature and moves to the set point at the ramp rate, as the F4T's manual describes.
- The loop in Manual: the heater or refrigeration at the manual power, open loop.
- The loop off (standby) or a tripped limit: no heat, no cooling; the air drifts back to the room.
- An open door leaks room air in; the door alarm is on while it is open. A scenario may open it
  once for a while (`schedule_door`, from the station file's [emulated] chamber_door_* keys).
- The room around the chamber is the bay's room (its air may move over the night, `room`).
- The over-temperature limit trips (latching, as the F4T's limit does) when the air exceeds its
  high set point; only `reset_limit` (the operator's reset, below the set point) clears it.

The air is integrated lazily up to the time asked (air_temperature_c(t)), in steps of at most
STEP_S, under its own lock: the Modbus server's thread and the world's physics both read it.
"""
from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass

STEP_S = 0.5
HEAT_MAX_C_PER_MIN = 5.0  # a benchtop chamber's heating rate (TestEquity 115A class: ~5 °C/min)
COOL_MAX_C_PER_MIN = 3.5  # and its cooling rate
NATURAL_RAD_S = 0.01  # the closed loop's natural frequency: settles to 0.5 °C in ~10 min
DAMPING = 0.75  # a well-tuned loop: ~3 % overshoot of a step
ROOM_TAU_S = 900.0  # loop off: the insulated box drifts back to the room
DOOR_TAU_S = 60.0  # door open: room air mixes in quickly


@dataclass(frozen=True)
class ChamberRange:
    """The chamber's set point range (the loop's Minimum/Maximum Set Point) and its limit."""

    min_c: float = -70.0
    max_c: float = 180.0
    limit_high_c: float = 190.0  # the over-temperature limit's high set point


class ChamberAir:
    """The chamber's air temperature and what acts on it; times are the world clock's seconds."""

    def __init__(self, now: Callable[[], float], room_c: float = 25.0,
                 ranges: ChamberRange = ChamberRange(), room: Callable[[float], float] | None = None) -> None:
        self._now = now
        self._lock = threading.RLock()
        self._room = room or (lambda t: room_c)  # the air outside the chamber at time t
        self.min_sp_c, self.max_sp_c = ranges.min_c, ranges.max_c
        self.limit_high_c = ranges.limit_high_c
        self._t = self.t0 = now()
        start_c = self._room(self._t)
        self.air_c = start_c
        self._velocity = 0.0  # °C/s
        self.set_point_c = start_c
        self.working_sp_c = start_c
        self.loop_on = True
        self.ramping = False  # Ramp Action: Set Point / Both
        self.ramp_c_per_min = 0.0
        self._door_held_open = False  # a test or an operator opened it
        self._door_window: tuple[float, float] | None = None  # the scenario's (from, until) on the clock
        self.limit_tripped = False
        self.manual_power_pct: float | None = None  # the loop in Manual: open-loop heat (+) or cooling (-)

    # --- what the world and the controller read ---------------------------------------------------
    def air_temperature_c(self, t: float | None = None) -> float:
        """The air at time t (default: now on the clock); t never goes back."""
        with self._lock:
            self._advance(self._now() if t is None else t)
            return self.air_c

    def working_set_point_c(self) -> float:
        with self._lock:
            self._advance(self._now())
            return self.working_sp_c if self.loop_on else self.set_point_c

    # --- what the controller and the test do -------------------------------------------------------
    def set_set_point(self, celsius: float) -> None:
        with self._lock:
            self._advance(self._now())
            self.set_point_c = celsius
            # Ramping starts at the process value (F4T manual, Ramp Action); else the step is at once.
            self.working_sp_c = self.air_c if self.ramping else celsius

    def set_ramp(self, ramping: bool, c_per_min: float) -> None:
        with self._lock:
            self._advance(self._now())
            self.ramping, self.ramp_c_per_min = ramping, c_per_min
            if not ramping:
                self.working_sp_c = self.set_point_c

    def set_loop(self, on: bool) -> None:
        with self._lock:
            self._advance(self._now())
            if on and not self.loop_on:
                self.working_sp_c = self.air_c if self.ramping else self.set_point_c
            self.loop_on = on

    @property
    def room_c(self) -> float:
        """The air outside the chamber now."""
        return self._room(self._t)

    @property
    def door_open(self) -> bool:
        with self._lock:
            self._advance(self._now())
            return self._door_open_at(self._t)

    def _door_open_at(self, t: float) -> bool:
        window = self._door_window
        return self._door_held_open or (window is not None and window[0] <= t < window[1])

    def open_door(self) -> None:
        with self._lock:
            self._advance(self._now())
            self._door_held_open = True

    def close_door(self) -> None:
        with self._lock:
            self._advance(self._now())
            self._door_held_open = False
            self._door_window = None

    def schedule_door(self, open_at_s: float, open_for_s: float) -> None:
        """The door opens `open_at_s` after the chamber started and stands open `open_for_s`."""
        with self._lock:
            self._door_window = (self.t0 + open_at_s, self.t0 + open_at_s + open_for_s)

    def reset_limit(self) -> bool:
        """The operator's reset of a tripped limit: works only once the air is back below it."""
        with self._lock:
            self._advance(self._now())
            if self.limit_tripped and self.air_c < self.limit_high_c:
                self.limit_tripped = False
            return not self.limit_tripped

    # --- physics --------------------------------------------------------------------------------------
    def _advance(self, t: float) -> None:
        while self._t < t:
            dt = min(STEP_S, t - self._t)
            self._step(dt)
            self._t += dt

    def _step(self, dt: float) -> None:
        if self.loop_on and not self.limit_tripped and self.manual_power_pct is not None:
            rate = HEAT_MAX_C_PER_MIN if self.manual_power_pct >= 0 else COOL_MAX_C_PER_MIN
            self._velocity = self.manual_power_pct / 100.0 * rate / 60.0
        elif self.loop_on and not self.limit_tripped:
            if self.ramping and self.ramp_c_per_min > 0:
                move = self.ramp_c_per_min / 60.0 * dt
                gap = self.set_point_c - self.working_sp_c
                self.working_sp_c += math.copysign(min(abs(gap), move), gap)
            else:
                self.working_sp_c = self.set_point_c
            accel = NATURAL_RAD_S ** 2 * (self.working_sp_c - self.air_c) - 2 * DAMPING * NATURAL_RAD_S * self._velocity
            self._velocity += accel * dt
            self._velocity = max(-COOL_MAX_C_PER_MIN / 60.0, min(HEAT_MAX_C_PER_MIN / 60.0, self._velocity))
        else:  # no heat, no refrigeration: back to the room
            self._velocity = (self.room_c - self.air_c) / ROOM_TAU_S
        self.air_c += self._velocity * dt
        if self._door_open_at(self._t):
            self.air_c += (self.room_c - self.air_c) * (1.0 - math.exp(-dt / DOOR_TAU_S))
        if self.air_c > self.limit_high_c:
            self.limit_tripped = True  # latching: the limit relay opens the heater's contactor
