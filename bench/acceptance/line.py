"""A batch of units back to back through one fixture (the emulated line, emulation.line): each
unit is swapped in, scanned and accepted; the batch's figures are what a line manager reads:
units per hour, first-pass yield, and the bench's own overhead per unit (cycle time not spent
waiting for the phone or an instrument)."""
from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.acceptance.attempts import FAIL, PASS
from bench.acceptance.runner import AcceptanceStation, UnitResult

log = logging.getLogger(__name__)


@dataclass
class LineUnitResult:
    serial: str
    expected: str  # PASS or FAIL (what the emulated line planted)
    fault: str | None
    result: UnitResult
    swap_s: float  # taking the unit in and out of the fixture


@dataclass
class LineRun:
    batch: str
    units: list[LineUnitResult] = field(default_factory=list)
    wall_s: float = 0.0
    world_s: float = 0.0  # simulated time the phones and instruments took (a real line's test time)

    def figures(self) -> dict[str, Any]:
        n = len(self.units)
        passed = sum(u.result.outcome == PASS for u in self.units)
        failed = sum(u.result.outcome == FAIL for u in self.units)
        overheads = [u.result.overhead_s for u in self.units if u.result.overhead_s is not None]
        cycles = [u.result.cycle_s for u in self.units]
        mean_overhead = statistics.fmean(overheads) if overheads else 0.0
        return {
            "units": n, "passed": passed, "failed": failed, "other": n - passed - failed,
            "first_pass_yield": sum(u.result.first_pass for u in self.units) / n if n else 0.0,
            "units_per_hour": 3600.0 * n / self.wall_s if self.wall_s else 0.0,
            "cycle_mean_s": statistics.fmean(cycles) if cycles else 0.0,
            "overhead_mean_s": mean_overhead,
            "overhead_max_s": max(overheads, default=0.0),
            "wall_s": self.wall_s,
            "world_s": self.world_s,
            # On real phones and instruments the waits take their simulated duration, the bench's
            # own work its measured one (and unit handling is extra).
            "units_per_hour_real_time": 3600.0 * n / (self.world_s + mean_overhead * n) if n else 0.0,
            "as_expected": all(u.result.outcome == u.expected.lower() for u in self.units),
        }

    def rows(self) -> list[dict[str, Any]]:
        return [{"serial": u.serial, "outcome": u.result.outcome, "reason": u.result.reason,
                 "attempts": len(u.result.attempts), "cycle_s": u.result.cycle_s, "overhead_s": u.result.overhead_s,
                 "expected": u.expected + (f" ({u.fault})" if u.fault else ""),
                 "report": str(u.result.report) if u.result.report else None,
                 "run_id": u.result.attempts[-1].run_id if u.result.attempts else None} for u in self.units]


def run_line(line: Any, station: AcceptanceStation, batch: str,
             on_unit: Callable[[LineUnitResult], None] | None = None) -> LineRun:
    """Every unit of an emulation.line.EmulatedLine through `station`, in order."""
    run = LineRun(batch)
    t0, world0 = time.perf_counter(), line.world.clock.now()
    for unit in line.units:
        swap = time.perf_counter()
        line.load(unit)
        swap_s = time.perf_counter() - swap
        result = station.accept(unit.serial)
        done = LineUnitResult(unit.serial, unit.expected, unit.fault, result, swap_s)
        run.units.append(done)
        if on_unit is not None:
            on_unit(done)
    run.wall_s = time.perf_counter() - t0
    run.world_s = line.world.clock.now() - world0
    return run
