"""Shared timing helpers for the benchmark scripts."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable


def best_of(fn: Callable[[], object], repeat: int) -> float:
    """Fastest of `repeat` runs, in seconds: the least disturbed by other work on the machine."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


@dataclass(frozen=True)
class Timing:
    wall: float  # seconds, fastest run
    cpu: float  # this process's CPU seconds (user + system), fastest run; excludes child processes


def interleaved(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, Timing]:
    """Fastest wall and CPU time of each function, the functions taking turns `repeat` times so that
    a reference and what is compared with it see the same machine load."""
    wall = {name: float("inf") for name in fns}
    cpu = dict(wall)
    for _ in range(repeat):
        for name, fn in fns.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            cpu[name] = min(cpu[name], time.process_time() - start_cpu)
            wall[name] = min(wall[name], time.perf_counter() - start)
    return {name: Timing(wall[name], cpu[name]) for name in fns}


def against(value: float, target: float, *, at_most: bool = False) -> str:
    """PASS or MISS of a measured figure against its target (at least, or at most, the target)."""
    ok = value <= target if at_most else value >= target
    return "PASS" if ok else "MISS"
