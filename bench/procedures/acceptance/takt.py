"""The line's time plan (docs/production.md, "Takt"): a budget per acceptance check on the
phone/instrument clock, the measured use of each check per unit, and the booking of an
instrument that several fixtures of a station share.

Both plugins are pytest plugin objects for AcceptanceStation(observers=...). They read a clock
with `now()` (the emulated world's SimClock on the emulated line) and, for a shared instrument,
wait on it (`world.wait_until`): on the emulated line a fixture whose turn has not come idles in
simulated time, so the waiting shows in the figures.
"""
from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from typing import Protocol

import pluggy
import pytest

from .disposition import CHECKS

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StepBudget:
    budget_s: float  # what the plan allows a good unit (the sum is the takt)
    hold_s: float  # the most the step may take (a shared instrument is booked for this long)


# Phone/instrument seconds per check for a good unit; the sum (39.9 s) plus 10 s of handling is
# 50 s a unit: 72 an hour per fixture. Latency and power are sequential: a good unit usually stops
# at the first look, an undecided one runs on to the last (hold_s), a faulty one stops at its first
# bad sample. Changed with reasons (docs/production.md, "Takt"): dut-calibration's bisection needs
# a full probe batch (~0.45 s) per bracketing point, ~6 of them, so 1 s was never possible; latency
# and power got cheaper (onset-only records paced by the supply; sweeps sized tightly and filled
# while the phone rests), the checks' samples and rules unchanged.
BUDGETS: dict[str, StepBudget] = {
    "identity": StepBudget(0.2, 2.0),
    "device-state": StepBudget(0.2, 2.0),
    "fingerprint": StepBudget(0.4, 2.0),
    "adapter": StepBudget(5.4, 10.0),
    "serial": StepBudget(0.1, 1.0),
    "dut-calibration": StepBudget(3.0, 5.0),
    "weights": StepBudget(1.6, 5.0),
    "redundancy": StepBudget(8.5, 15.0),  # three 48-token generations (clean, ripple, forced off)
    "latency": StepBudget(15.0, 36.0),  # 5 trials of ~2.7 s (0.9 s record, the answer waited out); at most 8
    "power": StepBudget(5.5, 20.0),  # a 4-token warm-up and 2 runs of 32 tokens; at most 4 runs
}
HANDLING_S = 10.0  # the operator takes a unit out and puts the next one in
OTHER = "other"  # clock time outside any acceptance test (session set-up, between tests)


class Clock(Protocol):
    def now(self) -> float: ...


class SharedTime(Protocol):
    """The time the fixtures of a station share (the emulated line's world): a fixture waits on it
    for its turn at a shared instrument."""

    @property
    def clock(self) -> Clock: ...

    def wait_until(self, t: float) -> float: ...


def budget_total() -> float:
    return sum(b.budget_s for b in BUDGETS.values())


def _check_of(item: pytest.Item) -> str:
    marker = item.get_closest_marker("acceptance")
    return str(marker.kwargs.get("check", OTHER)) if marker is not None else OTHER


class StepClock:
    """Clock time per acceptance check, per unit (its attempts together; each pytest run is one
    unit unless `start_unit` marks the units): setup, call and teardown count."""

    def __init__(self, clock: Clock, per_run: bool = True) -> None:
        self.clock = clock
        self.per_run = per_run
        self.units: list[dict[str, float]] = []
        self._t0 = 0.0

    def start_unit(self) -> None:
        self.units.append(defaultdict(float))

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.per_run or not self.units:
            self.start_unit()
        self._t0 = self.clock.now()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
        t0 = self.clock.now()
        self.units[-1][OTHER] += float(t0 - self._t0)
        yield
        self._t0 = self.clock.now()
        self.units[-1][_check_of(item)] += float(self._t0 - t0)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.units[-1][OTHER] += float(self.clock.now() - self._t0)

    def totals(self) -> dict[str, list[float]]:
        """Per check, the seconds each unit (run) used."""
        out: dict[str, list[float]] = {name: [] for name in (*CHECKS, OTHER)}
        for unit in self.units:
            for name in out:
                out[name].append(unit.get(name, 0.0))
        return out


@dataclass
class Booking:
    fixture: str
    start: float
    end: float


@dataclass
class SharedInstrument:
    """A booking calendar of one instrument on the station's clock (fixtures' clocks share an
    epoch): a fixture books the earliest free slot of the step's hold time at or after it is
    ready, and on release the slot shrinks to what the step used."""

    role: str
    bookings: list[Booking] = field(default_factory=list)
    busy_s: float = 0.0
    waited_s: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    conflicts: int = 0  # steps that outran their hold into another fixture's slot

    def earliest(self, ready: float, hold_s: float) -> float:
        """The start of the first free slot of hold_s at or after `ready`."""
        start = ready
        for other in sorted(self.bookings, key=lambda b: b.start):
            if other.end <= start or other.start >= start + hold_s:
                continue
            start = other.end
        return start

    def book(self, fixture: str, ready: float, hold_s: float, start: float | None = None) -> Booking:
        """Book the first free slot (or the free slot at `start`); the wait since `ready` is counted."""
        start = self.earliest(ready, hold_s) if start is None else start
        booking = Booking(fixture, start, start + hold_s)
        self.bookings.append(booking)
        self.waited_s[fixture] += start - ready
        return booking

    def release(self, booking: Booking, end: float) -> None:
        if any(b is not booking and b.start < end and b.end > booking.start for b in self.bookings):
            self.conflicts += 1
            log.warning("%s: %s's step ran past its hold into another fixture's slot", self.role, booking.fixture)
        booking.end = end
        self.busy_s += end - booking.start


class ShareGate:
    """Pytest plugin of one fixture: a test that needs a shared instrument waits for its slot."""

    def __init__(self, fixture: str, world: SharedTime, shared: dict[str, SharedInstrument]) -> None:
        self.fixture, self.world, self.shared = fixture, world, shared

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        needs = item.get_closest_marker("needs")
        roles = [r for r in (needs.args if needs is not None else ()) if r in self.shared]
        hold = BUDGETS.get(_check_of(item), StepBudget(0.0, 60.0)).hold_s
        ready = start = self.world.clock.now()
        while roles:  # one slot free on every shared instrument the step needs: it uses them together
            later = max(self.shared[role].earliest(start, hold) for role in roles)
            if later == start:
                break
            start = later
        bookings = [(role, self.shared[role].book(self.fixture, ready, hold, start)) for role in roles]
        if roles:
            self.world.wait_until(start)
        yield
        for role, booking in bookings:
            self.shared[role].release(booking, self.world.clock.now())


class StopOnFault:
    """Pytest plugin: the first failed check ends the run, so a faulty unit leaves the fixture as
    soon as its fault shows; the tests it did not reach are kept (`not_run`): a retest of a
    retestable failure runs the failed test and those (phonebench.bench.procedures.acceptance.disposition.retest_nodeids)."""

    def __init__(self) -> None:
        self.not_run: list[str] = []

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]
                                  ) -> Generator[None, pluggy.Result[pytest.TestReport], None]:
        report = (yield).get_result()
        if report.failed and not item.session.shouldfail:
            item.session.shouldfail = f"{item.nodeid} failed: the unit fails here"  # as -x does
            items = item.session.items
            self.not_run = [i.nodeid for i in items[items.index(item) + 1:]]
