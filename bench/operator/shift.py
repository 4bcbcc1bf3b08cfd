"""The shift as the operator page shows it: each fixture's state and steps, the last units, yield
and units per hour. Updated from the fixtures' events; read by the page (a reload loses nothing:
the state lives here, every result also in the store)."""
from __future__ import annotations

import re
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

SERIAL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{2,39}$")  # what a scanner may type (as `bench accept`)
RETRY_OUTCOMES = ("fail", "incomplete")


@dataclass
class Step:
    check: str
    words: str
    state: str = "pending"  # pending, running, done, fail, skipped; "not run" once the unit's result is in


@dataclass
class FixtureState:
    name: str
    status: str = "starting"  # starting, calibrating, idle, testing, result, down
    serial: str | None = None
    steps: list[Step] = field(default_factory=list)
    result: dict[str, Any] | None = None
    reason: str | None = None  # why the fixture is down
    attempts: dict[str, int] = field(default_factory=dict)  # serial -> attempts this shift
    units: list[str] = field(default_factory=list)  # an emulated line's units (a hint for the operator)
    disposed: bool = False  # the operator sent the shown unit to repair
    operator: str | None = None  # who scanned (or retested) the unit shown: the signed-in name


@dataclass
class UnitRow:
    serial: str
    fixture: str
    outcome: str
    reason: str | None
    attempts: int
    cycle_s: float
    first_pass: bool
    finished: float
    operator: str | None = None


class Shift:
    def __init__(self, fixtures: list[str], retries: int, retestable: frozenset[str]) -> None:
        self.started = time.time()
        self.retries, self.retestable = retries, retestable  # the retest policy (phonebench.bench.procedures.acceptance.disposition)
        self.fixtures = {name: FixtureState(name) for name in fixtures}
        self.units: deque[UnitRow] = deque(maxlen=200)
        self._lock = threading.Lock()

    # --- operator actions (validated here; the fixture process does the work) ---------------
    def check_scan(self, fixture: str, serial: str) -> str | None:
        """Why a scan is refused, or None."""
        with self._lock:
            state = self.fixtures.get(fixture)
            if state is None:
                return f"no fixture {fixture!r}"
            if not SERIAL.match(serial):
                return f"serial {serial!r} is not a serial (3-40 letters, digits, . _ -): scan again"
            if state.status not in ("idle", "result"):
                return f"fixture {fixture} is {state.status}: wait for it"
            busy = next((f.name for f in self.fixtures.values() if f.serial == serial and f.status == "testing"), None)
            if busy:
                return f"{serial} is being tested on fixture {busy}"
            return None

    def may_retest(self, fixture: str) -> bool:
        with self._lock:
            return self._may_retest(self.fixtures[fixture])

    def _may_retest(self, state: FixtureState) -> bool:
        """The retest policy's word on the shown result: a unit gets 1 + retries attempts in all
        (the acceptance run's own retests count), and only a retestable failure or an incomplete
        run is retested. A check the run never reached does not decide it."""
        result = state.result
        if state.status != "result" or not result or result["outcome"] not in RETRY_OUTCOMES or state.disposed:
            return False
        used = sum(f.attempts.get(result["serial"], 0) for f in self.fixtures.values())
        if used > self.retries:
            return False
        failing = [f for f in result.get("failures", []) if f["kind"] == "fail" and not f.get("not_run")]
        return result["outcome"] == "incomplete" or all(f["check"] in self.retestable for f in failing)

    # --- events from the fixture processes ---------------------------------------------------
    def apply(self, event: dict[str, Any]) -> None:
        with self._lock:
            state = self.fixtures.get(event.get("fixture", ""))
            if state is None:
                return
            kind = event.get("event")
            if kind == "ready":
                state.status, state.units = "idle", list(event.get("units") or [])
            elif kind == "calibrating":
                state.status = "calibrating"
            elif kind == "started":
                state.status, state.serial, state.result, state.steps, state.disposed = \
                    "testing", event["serial"], None, [], False
                state.operator = event.get("operator")
            elif kind == "plan":  # a retest within the same unit plans only what it runs again
                known = {s.check: s for s in state.steps}
                for planned in event["steps"]:
                    if planned["check"] in known:
                        known[planned["check"]].state = "pending"
                    else:
                        state.steps.append(Step(planned["check"], planned["words"]))
            elif kind == "step":
                for step in state.steps:
                    if step.check == event["check"] and not (step.state == "fail" and event["state"] != "fail"):
                        step.state = event["state"]
            elif kind == "result":
                state.status, state.result = "result", dict(event)
                for step in state.steps:  # the run ended before these: they never ran (or never finished)
                    if step.state in ("pending", "running"):
                        step.state = "not run" if step.state == "pending" else "not finished"
                state.attempts[event["serial"]] = state.attempts.get(event["serial"], 0) + int(event["attempts"])
                self.units.appendleft(UnitRow(event["serial"], state.name, event["outcome"],
                                              event.get("plain") or event.get("reason"),
                                              state.attempts[event["serial"]], float(event["cycle_s"]),
                                              bool(event.get("first_pass")), time.time(),
                                              event.get("operator") or state.operator))
            elif kind == "disposed":
                state.disposed = True
                for row in self.units:
                    if row.serial == event["serial"]:
                        row.outcome = f"{row.outcome} → {event['disposition']}"
                        break
            elif kind == "down":
                state.status, state.reason = "down", event.get("reason")

    # --- what the page reads -------------------------------------------------------------------
    def view(self) -> dict[str, Any]:
        with self._lock:
            latest: dict[str, UnitRow] = {}
            for row in reversed(self.units):  # a unit's last result counts once
                latest[row.serial] = row
            rows = list(latest.values())
            judged = [r for r in rows if r.outcome.split(" ")[0] in ("pass", "fail")]
            hours = max(time.time() - self.started, 1.0) / 3600.0
            return {
                "retest_policy": {"retries": self.retries, "retestable": sorted(self.retestable)},
                "fixtures": [{**asdict(f), "may_retest": self._may_retest(f),
                              "may_repair": f.status == "result"
                              and bool(f.result and f.result["outcome"] != "pass") and not f.disposed}
                             for f in self.fixtures.values()],
                "units": [asdict(r) for r in list(self.units)[:30]],
                "shift": {"units": len(rows), "passed": sum(r.outcome == "pass" for r in rows),
                          "failed": sum(r.outcome.startswith("fail") for r in rows),
                          "first_pass_yield": (sum(r.first_pass for r in rows) / len(rows)) if rows else None,
                          "units_per_hour": len(judged) / hours, "started": self.started},
            }
