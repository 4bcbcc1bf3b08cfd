"""The phone's activity over simulated time: what it did (recorded) and what it will do (scheduled).

Recorded segments come from the runtime's `World.work` calls; scheduled ones from reactions that
play out on their own, such as a spoken answer. The power analyzer's digitizer reads power
over any window, past (pre-trigger) or future (the sweep waits for it).
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

KEEP_S = 3600.0  # history kept for digitizer look-back; older segments are dropped


@dataclass
class Segment:
    t0: float
    t1: float
    phase: str
    power_w: float


class Timeline:
    def __init__(self) -> None:
        self._recorded: list[Segment] = []
        self._starts: list[float] = []
        self._scheduled: list[Segment] = []
        self._scheduled_starts: list[float] = []
        self._longest_scheduled = 0.0  # bounds the look-back when searching scheduled segments

    def record(self, t0: float, t1: float, phase: str, power_w: float) -> None:
        last = self._recorded[-1] if self._recorded else None
        # Back-to-back work of one kind (every decode token) is one segment.
        if last and last.phase == phase and last.power_w == power_w and abs(last.t1 - t0) < 1e-9:
            last.t1 = t1
            return
        self._recorded.append(Segment(t0, t1, phase, power_w))
        self._starts.append(t0)

    def schedule(self, t0: float, t1: float, phase: str, power_w: float) -> None:
        index = bisect.bisect_right(self._scheduled_starts, t0)
        self._scheduled.insert(index, Segment(t0, t1, phase, power_w))
        self._scheduled_starts.insert(index, t0)
        self._longest_scheduled = max(self._longest_scheduled, t1 - t0)

    def scheduled(self) -> list[Segment]:
        return list(self._scheduled)

    def trim(self, now: float) -> None:
        horizon = now - KEEP_S
        if self._starts and self._starts[0] < horizon and len(self._starts) > 64:
            cut = bisect.bisect_left(self._starts, horizon)
            del self._recorded[:cut], self._starts[:cut]
        if self._scheduled_starts and self._scheduled_starts[0] < horizon - self._longest_scheduled:
            cut = bisect.bisect_left(self._scheduled_starts, horizon - self._longest_scheduled)
            del self._scheduled[:cut], self._scheduled_starts[:cut]

    def _overlapping(self, t_lo: float, t_hi: float) -> list[Segment]:
        first = max(bisect.bisect_right(self._starts, t_lo) - 1, 0)
        found = [s for s in self._recorded[first:bisect.bisect_right(self._starts, t_hi)] if s.t1 > t_lo]
        lo = bisect.bisect_left(self._scheduled_starts, t_lo - self._longest_scheduled)
        hi = bisect.bisect_right(self._scheduled_starts, t_hi)
        found += [s for s in self._scheduled[lo:hi] if s.t1 > t_lo]
        return found

    def at(self, t: float) -> Segment | None:
        """The most power-hungry activity covering instant t (None: the phone idles)."""
        active = [s for s in self._overlapping(t, t) if s.t0 <= t < s.t1]
        return max(active, key=lambda s: s.power_w) if active else None

    def power_at(self, times: np.ndarray, idle_w: float) -> np.ndarray:
        """Phone power at each (ascending) time; overlapping activities take the larger draw."""
        power = np.full(times.shape, idle_w)
        if times.size == 0:
            return power
        for seg in self._overlapping(float(times[0]), float(times[-1])):
            lo, hi = np.searchsorted(times, (seg.t0, seg.t1), side="left")
            if hi > lo:
                np.maximum(power[lo:hi], seg.power_w, out=power[lo:hi])
        return power
