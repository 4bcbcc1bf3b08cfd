"""A batch of units back to back through one fixture (the emulated line, phonebench.emulation.line), or
through the fixtures of one station side by side: each unit is swapped in (the handling time
passes on the line's clock), scanned and accepted; the batch's figures are what a line manager
reads: units per hour on the phone/instrument clock and projected with the bench's own work,
first-pass yield, the bench's own overhead per unit (cycle time not spent waiting for the phone
or an instrument), and the clock time each acceptance check used (phonebench.bench.procedures.acceptance.takt)."""
from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .attempts import FAIL, PASS
from .runner import AcceptanceStation, UnitResult
from .takt import HANDLING_S, ShareGate, SharedInstrument, StepClock

if TYPE_CHECKING:  # the line comes from the station backend, which starts the emulator
    from ...station.backend import EmulatedLine, LineUnit

log = logging.getLogger(__name__)


@dataclass
class LineUnitResult:
    serial: str
    expected: str  # PASS or FAIL (what the emulated line planted)
    fault: str | None
    result: UnitResult
    swap_s: float  # taking the unit in and out of the fixture (bench wall time)
    world_s: float = 0.0  # the unit's time on the line's clock, handling included
    fixture: str = ""


@dataclass
class LineRun:
    batch: str
    units: list[LineUnitResult] = field(default_factory=list)
    wall_s: float = 0.0
    world_s: float = 0.0  # simulated time the phones and instruments took (a real line's test time)
    handling_s: float = 0.0  # per unit, on the line's clock (included in world_s)
    steps: dict[str, list[float]] = field(default_factory=dict)  # check -> clock s per pytest run
    shared_wait_s: float = 0.0  # this fixture waiting for a shared instrument (included in world_s)

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
            # The done criterion: units per hour on the phone/instrument clock, handling included.
            "units_per_hour_sim": 3600.0 * n / self.world_s if self.world_s else 0.0,
            "world_per_unit_s": self.world_s / n if n else 0.0,
            "test_per_good_unit_s": _mean([u.world_s - self.handling_s for u in self.units
                                           if u.result.outcome == PASS and len(u.result.attempts) == 1]),
            "test_per_faulty_unit_s": _mean([u.world_s - self.handling_s for u in self.units if u.fault]),
            "handling_s": self.handling_s,
            "shared_wait_s": self.shared_wait_s,
            "as_expected": all(u.result.outcome == u.expected.lower() for u in self.units),
        }

    def rows(self) -> list[dict[str, Any]]:
        return [{"serial": u.serial, "outcome": u.result.outcome, "reason": u.result.reason,
                 "attempts": len(u.result.attempts), "cycle_s": u.result.cycle_s, "overhead_s": u.result.overhead_s,
                 "expected": u.expected + (f" ({u.fault})" if u.fault else ""),
                 "report": str(u.result.report) if u.result.report else None,
                 "run_id": u.result.attempts[-1].run_id if u.result.attempts else None} for u in self.units]


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else 0.0


class _Fixture:
    """One fixture of a run: its line, station, step clock and figures so far."""

    def __init__(self, name: str, line: EmulatedLine, station: AcceptanceStation, batch: str, handling_s: float,
                 gate: ShareGate | None) -> None:
        self.name, self.line, self.station = name, line, station
        self.steps = StepClock(line.world.clock, per_run=False)
        self.run = LineRun(batch, handling_s=handling_s)
        self.observers = station.observers
        station.observers = (*station.observers, self.steps, *((gate,) if gate is not None else ()))

    def accept(self, unit: LineUnit, on_unit: Callable[[LineUnitResult], None] | None) -> None:
        world0 = self.line.world.clock.now()
        swap = time.perf_counter()
        self.line.load(unit)
        swap_s = time.perf_counter() - swap
        self.line.world.wait(self.run.handling_s)
        self.steps.start_unit()
        result = self.station.accept(unit.serial)
        done = LineUnitResult(unit.serial, unit.expected, unit.fault, result, swap_s,
                              self.line.world.clock.now() - world0, self.name)
        self.run.units.append(done)
        if on_unit is not None:
            on_unit(done)

    def finish(self, world0: float, wall0: float, shared: dict[str, SharedInstrument]) -> LineRun:
        self.station.observers = self.observers
        self.run.wall_s = time.perf_counter() - wall0
        self.run.world_s = self.line.world.clock.now() - world0
        self.run.steps = self.steps.totals()
        self.run.shared_wait_s = sum(s.waited_s.get(self.name, 0.0) for s in shared.values())
        return self.run


def run_line(line: EmulatedLine, station: AcceptanceStation, batch: str,
             on_unit: Callable[[LineUnitResult], None] | None = None, handling_s: float = HANDLING_S) -> LineRun:
    """Every unit of an phonebench.emulation.line.EmulatedLine through `station`, in order; `handling_s` of
    the line's clock pass while each unit is swapped in."""
    fixture = _Fixture(line.name, line, station, batch, handling_s, None)
    t0, world0 = time.perf_counter(), line.world.clock.now()
    try:
        for unit in line.units:
            fixture.accept(unit, on_unit)
    finally:
        run = fixture.finish(world0, t0, {})
    return run


@dataclass
class StationRun:
    """A batch through several fixtures of one station, units dealt to whichever is free first."""

    batch: str
    fixtures: dict[str, LineRun]
    shared: dict[str, SharedInstrument]
    world_s: float  # the station's clock from the first unit in to the last unit out
    wall_s: float

    @property
    def units(self) -> list[LineUnitResult]:
        return [u for run in self.fixtures.values() for u in run.units]

    def figures(self) -> dict[str, Any]:
        n = len(self.units)
        return {
            "units": n, "fixtures": len(self.fixtures),
            "passed": sum(u.result.outcome == PASS for u in self.units),
            "failed": sum(u.result.outcome == FAIL for u in self.units),
            "units_per_hour_sim": 3600.0 * n / self.world_s if self.world_s else 0.0,
            "world_s": self.world_s, "wall_s": self.wall_s,
            "as_expected": all(u.result.outcome == u.expected.lower() for u in self.units),
            "per_fixture": {name: run.figures() for name, run in self.fixtures.items()},
            "shared": {role: {"busy_s": s.busy_s, "waited_s": dict(s.waited_s), "conflicts": s.conflicts,
                              "utilisation": s.busy_s / self.world_s if self.world_s else 0.0}
                       for role, s in self.shared.items()},
        }


def run_station(fixtures: dict[str, tuple[EmulatedLine, AcceptanceStation]], units: Sequence[LineUnit], batch: str, *,
                shared: tuple[str, ...] = (), on_unit: Callable[[LineUnitResult], None] | None = None,
                handling_s: float = HANDLING_S) -> StationRun:
    """`units` through the fixtures ({name: (EmulatedLine, AcceptanceStation)}) side by side on
    one station clock: the next unit goes to the fixture whose clock is earliest (the one that
    is free first); each instrument role in `shared` is one instrument booked between them."""
    calendars = {role: SharedInstrument(role) for role in shared}
    start = max(line.world.clock.now() for line, _ in fixtures.values())
    for line, _ in fixtures.values():
        line.world.wait_until(start)  # one epoch: the fixtures' clocks then run side by side
    running = {name: _Fixture(name, line, station, batch, handling_s,
                              ShareGate(name, line.world, calendars) if calendars else None)
               for name, (line, station) in fixtures.items()}
    wall0 = time.perf_counter()
    try:
        for unit in units:
            free = min(running.values(), key=lambda f: f.line.world.clock.now())
            free.accept(unit, on_unit)
    finally:
        runs = {name: f.finish(start, wall0, calendars) for name, f in running.items()}
    end = max(line.world.clock.now() for line, _ in fixtures.values())
    return StationRun(batch, runs, calendars, end - start, time.perf_counter() - wall0)
