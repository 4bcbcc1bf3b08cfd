"""Where a run is, per phone, while it runs: progress lines and the run's ETA from the records its
bays write (results.json after every test; docs/labtime.md, "While a run runs").

Display only: nothing here changes what is recorded. The parent of a run feeds one RunProgress
with each bay's results.json as it grows and with the test each bay is on, and prints the lines
it returns; it is the only writer, so lines of different phones never interleave.

Lab minutes are the station-clock lab time the tests record (`lab_time_s`); the plan is `bench
plan`'s for the phone's selection. A phone's ETA is its planned lab minutes still to go times the
wall seconds it has taken per lab minute so far; the run's ETA is the largest over its phones.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .labtime import test_key
from ..specs.claims import claim_for, load_claims

HEARTBEAT_S = 60.0  # a phone says where it is at least this often (wall seconds)
# A phone's pace counts once it has done this much of its plan: the first tests take seconds of
# lab time after the bay's start-up, and a pace from them promised hours for an eight-minute run.
PACE_AFTER_LAB_S = 60.0
PACE_AFTER_PLAN_SHARE = 0.05
CURRENT_TEST = "current.json"  # a bay worker's test in progress, beside its results.json
BAD_OUTCOMES = ("failed", "error")


@dataclass
class ClaimTally:
    tests: int = 0
    failed: int = 0


@dataclass
class PhonePlanned:
    """What `bench plan` expects of one phone: lab seconds in all and per test key."""

    lab_time_s: float
    tests: dict[str, float] = field(default_factory=dict)


@dataclass
class PhoneState:
    """One phone's progress as the parent sees it (wall times on the parent's monotonic clock)."""

    dut: str
    plan: PhonePlanned | None = None
    tests_done: int = 0
    failed: int = 0
    lab_s: float = 0.0  # recorded station-clock seconds of the finished tests
    lab_recorded: bool = False  # some finished test recorded lab time
    planned_done_s: float = 0.0  # planned seconds of the finished tests (the pace when no lab time is recorded)
    claims: dict[int, ClaimTally] = field(default_factory=dict)
    current: str | None = None  # node id of the test it is on
    current_index: int | None = None
    total: int | None = None  # tests this phone's worker runs
    started_at: float | None = None
    current_since: float | None = None
    last_test_at: float | None = None
    last_line_at: float | None = None
    finished: bool = False

    @property
    def done_s(self) -> float:
        """Lab seconds done: recorded where the station clock answered, else as planned."""
        return self.lab_s if self.lab_recorded else self.planned_done_s

    def remaining_wall_s(self, now: float) -> float | None:
        """Wall seconds this phone still needs by its plan at its pace so far; None when unknown."""
        if self.finished:
            return 0.0
        if self.plan is None or self.started_at is None or self.last_test_at is None \
                or self.done_s < min(PACE_AFTER_LAB_S, PACE_AFTER_PLAN_SHARE * self.plan.lab_time_s) \
                or self.done_s <= 0:
            return None
        pace = (self.last_test_at - self.started_at) / self.done_s  # wall s per lab s
        left = max(0.0, self.plan.lab_time_s - self.done_s) * pace
        return max(0.0, left - (now - self.last_test_at))  # the test on now is already under way


def run_eta_s(phones: Iterable[PhoneState], now: float) -> float | None:
    """The run's ETA: the largest of its unfinished phones' remaining wall seconds; None while
    an unfinished phone has no estimate yet."""
    left = [p.remaining_wall_s(now) for p in phones if not p.finished]
    if not left:
        return 0.0
    if any(s is None for s in left):
        return None
    return max(s for s in left if s is not None)


def eta_text(seconds: float | None) -> str:
    if seconds is None:
        return "run ETA not known yet"
    minutes = seconds / 60.0
    if minutes < 1:
        return "run ETA <1 min"
    if minutes < 90:
        return f"run ETA {minutes:.0f} min"
    return f"run ETA {int(minutes // 60)} h {int(minutes % 60):02d} min"


def lab_text(phone: PhoneState) -> str:
    if not phone.lab_recorded and phone.tests_done:
        done = "lab time not recorded"
        return done if phone.plan is None else f"{done} ({phone.plan.lab_time_s / 60:.1f} min planned)"
    if phone.plan is None:
        return f"lab {phone.lab_s / 60:.1f} min (no plan)"
    return f"lab {phone.lab_s / 60:.1f} / {phone.plan.lab_time_s / 60:.1f} min planned"


def short_test(nodeid: str) -> str:
    """`suites/test_x.py::test_a[EMU0001]` -> `test_a`."""
    return nodeid.split("::")[-1].split("[")[0]


def claims_of(test: Mapping[str, Any]) -> list[int]:
    """The claims a recorded test's verdicts decide, in order."""
    found = {claim_for(v.get("claim"), v.get("metric"), v.get("name")) for v in test.get("verdicts") or []}
    return sorted(c for c in found if c is not None)


def claim_name(number: int) -> str:
    return next((c.name for c in load_claims() if c.number == number), "")


class RunProgress:
    """Aggregates the bays' records into per-phone progress and the lines to print."""

    def __init__(self, plans: Mapping[str, PhonePlanned] | None = None,
                 clock: Callable[[], float] = time.monotonic, heartbeat_s: float = HEARTBEAT_S) -> None:
        self.plans = dict(plans or {})
        self.clock, self.heartbeat_s = clock, heartbeat_s
        self.phones: dict[str, PhoneState] = {}
        self._seen: dict[str, int] = {}  # tests already read from each source (bay) record
        self._duts_of: dict[str, set[str]] = {}
        self._bay_start: dict[str, float] = {}
        self._bay_said: dict[str, float] = {}  # bays started whose phones have not shown up yet
        self._claims_of_key: dict[str, list[int]] = {}  # learnt from any phone's finished test of that key

    def phone(self, dut: str) -> PhoneState:
        if dut not in self.phones:
            self.phones[dut] = PhoneState(dut, self.plans.get(dut))
        return self.phones[dut]

    def eta_s(self) -> float | None:
        return run_eta_s(self.phones.values(), self.clock())

    def _line(self, phone: PhoneState, text: str) -> str:
        now = self.clock()
        phone.last_line_at = now
        return f"{phone.dut:8} {text}  {lab_text(phone)}  {eta_text(run_eta_s(self.phones.values(), now))}"

    def current(self, source: str, info: Mapping[str, Any]) -> list[str]:
        """A bay's worker began a test (its current.json: nodeid, dut, index, total). A test of no
        phone (an instrument's identity) is the bay's own: it makes no phone of its own, which would
        have no plan and leave the run's ETA unknown to the end."""
        if not info.get("dut"):
            return []
        dut = str(info["dut"])
        self._duts_of.setdefault(source, set()).add(dut)
        phone, now = self.phone(dut), self.clock()
        if info.get("nodeid") == phone.current:
            return []
        phone.current, phone.current_since = info.get("nodeid"), now
        phone.current_index, phone.total = info.get("index"), info.get("total") or phone.total
        return self._start(source, phone, now)

    def bay_started(self, source: str) -> None:
        """A bay's worker was started now: its phones' pace counts from here (start-up included)."""
        self._bay_start[source] = self._bay_said[source] = self.clock()

    def _start(self, source: str, phone: PhoneState, now: float) -> list[str]:
        """The phone's first line, the first time its bay's folder shows it at work."""
        if phone.last_line_at is not None:
            return []
        # the bay's first phone counts from its worker's start; a bay's next phone from its own first sight
        phone.started_at = phone.last_test_at = self._bay_start.pop(source, now)
        count = f"{phone.total} tests" if phone.total else "tests"
        plan = f"{phone.plan.lab_time_s / 60:.1f} lab min planned" if phone.plan else "no plan"
        phone.last_line_at = now
        return [f"{phone.dut:8} started: {count}, {plan}"]

    def record(self, source: str, data: Mapping[str, Any]) -> list[str]:
        """A bay's results.json as it is now: a line per claim decided by each newly finished test."""
        tests = list(data.get("tests") or [])
        new, self._seen[source] = tests[self._seen.get(source, 0):], len(tests)
        self._duts_of.setdefault(source, set()).update(data.get("duts") or {})
        lines: list[str] = []
        now = self.clock()
        for test in new:
            if not test.get("dut"):
                continue  # the bay's own test (an instrument's identity): no phone's progress
            dut = str(test["dut"])
            self._duts_of[source].add(dut)
            phone = self.phone(dut)
            lines += self._start(source, phone, now)
            bad = test.get("outcome") in BAD_OUTCOMES
            phone.tests_done += 1
            phone.failed += bad
            if test.get("lab_time_s") is not None:
                phone.lab_s += float(test["lab_time_s"])
                phone.lab_recorded = True
            if phone.plan is not None:
                phone.planned_done_s += phone.plan.tests.get(test_key(str(test.get("nodeid")), test.get("dut")), 0.0)
            phone.last_test_at = now
            if phone.current == test.get("nodeid"):
                phone.current = None
            decided = claims_of(test)
            if decided:
                self._claims_of_key[test_key(str(test.get("nodeid")), test.get("dut"))] = decided
            for claim in decided:
                tally = phone.claims.setdefault(claim, ClaimTally())
                tally.tests += 1
                tally.failed += bad
                failed = f", {tally.failed} failed" if tally.failed else ""
                lines.append(self._line(phone, f"claim {claim} {claim_name(claim)}: done "
                                               f"({tally.tests} test{'s' if tally.tests != 1 else ''}{failed})"))
        return lines

    def bay_done(self, source: str) -> list[str]:
        """A bay's worker ended: its phones are finished."""
        self._bay_said.pop(source, None)
        lines = []
        for dut in sorted(self._duts_of.get(source, ())):
            phone = self.phone(dut)
            if phone.finished:
                continue
            phone.finished, phone.current = True, None
            failed = f", {phone.failed} failed" if phone.failed else ""
            lines.append(self._line(phone, f"finished: {phone.tests_done} tests{failed}"))
        return lines

    def heartbeat(self) -> list[str]:
        """A line for each phone that has said nothing for a heartbeat: the test it is on."""
        now, lines = self.clock(), []
        for bay, said in list(self._bay_said.items()):  # a worker still collecting, opening its phone
            if self._duts_of.get(bay):
                del self._bay_said[bay]
            elif now - said >= self.heartbeat_s:
                self._bay_said[bay] = now
                started = self._bay_start.get(bay, now)
                lines.append(f"bay {bay}: starting ({(now - started) / 60:.0f} min: collecting the tests, "
                             "opening its phone)")
        for phone in self.phones.values():
            if phone.finished or phone.last_line_at is None or now - phone.last_line_at < self.heartbeat_s:
                continue
            lines.append(self._line(phone, self.doing(phone, now)))
        return lines

    def doing(self, phone: PhoneState, now: float) -> str:
        """The test a phone is on, with its claims when another phone of the run has finished that
        test already (a test's claims are known only from its recorded verdicts)."""
        if phone.current is None:
            return "between tests"
        where = f"test {phone.current_index} of {phone.total}, " if phone.current_index and phone.total else ""
        since = now - (phone.current_since if phone.current_since is not None else now)
        claims = self._claims_of_key.get(test_key(phone.current, phone.dut), [])
        about = f"claim{'s' if len(claims) > 1 else ''} {', '.join(map(str, claims))}: " if claims else ""
        return f"still on {about}{short_test(phone.current)} ({where}{since / 60:.0f} min in)"

