"""Simulated time shared by everything in one emulated world.

Device work and waiting advance the clock; listeners (physics models) integrate over each step.
Nothing in the emulation reads the host's wall clock for a measured quantity.
"""
from __future__ import annotations

import threading
from typing import Callable

StepListener = Callable[[float, float], None]  # (t_start, dt)

# Physics integrates in steps no longer than this, so long waits stay accurate.
MAX_STEP_S = 0.05


class SimClock:
    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start
        self._lock = threading.RLock()
        self._listeners: list[StepListener] = []

    def now(self) -> float:
        with self._lock:
            return self._now

    def add_listener(self, listener: StepListener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def advance(self, dt: float) -> float:
        """Move time forward by dt seconds (in bounded steps); returns the new time."""
        if dt < 0:
            raise ValueError(f"simulated time cannot go backwards (dt={dt})")
        with self._lock:
            remaining = dt
            while remaining > 0:
                step = min(remaining, MAX_STEP_S)
                for listener in self._listeners:
                    listener(self._now, step)
                self._now += step
                remaining -= step
            return self._now

    sleep = advance
