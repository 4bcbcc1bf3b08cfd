"""A run's records: one TestRecord per bench test, the RunRecord holding them. Each has one
to_dict / from_dict, which is the format of results.json (schema phonebench.results/1) and what
the store, report, matrix and acceptance disposition read back."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from .verdict import Outcome, TestOutcome, Verdict

SCHEMA = "phonebench.results/1"


@dataclass
class TestRecord:
    __test__ = False  # not a pytest test class

    nodeid: str
    dut: str | None
    outcome: TestOutcome | str  # passed, failed, error, skipped
    duration_s: float
    message: str = ""
    markers: list[str] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    acceptance_check: str | None = None  # what it proves on a production line (its acceptance marker)
    started: str | None = None  # ISO time the test's setup began
    bay: str | None = None  # the bay (DUT slot) of the station it ran in
    lab_time_s: float | None = None  # station-clock seconds from setup start to teardown end (docs/labtime.md)

    def __post_init__(self) -> None:
        self.outcome = TestOutcome(self.outcome)

    @property
    def worst_verdict(self) -> Outcome | None:
        return Outcome.worst(v.outcome for v in self.verdicts)

    def to_dict(self) -> dict[str, Any]:
        return {"nodeid": self.nodeid, "dut": self.dut, "outcome": TestOutcome(self.outcome).value,
                "duration_s": round(self.duration_s, 4), "message": self.message, "markers": list(self.markers),
                "verdicts": [v.to_dict() for v in self.verdicts], "acceptance_check": self.acceptance_check,
                "started": self.started, "bay": self.bay,
                "lab_time_s": None if self.lab_time_s is None else round(self.lab_time_s, 3)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TestRecord:
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["verdicts"] = [Verdict.from_dict(v) for v in data.get("verdicts") or []]
        kwargs["markers"] = list(data.get("markers") or [])
        kwargs["duration_s"] = float(data.get("duration_s") or 0.0)
        kwargs["lab_time_s"] = None if data.get("lab_time_s") is None else float(data["lab_time_s"])
        return cls(**kwargs)


@dataclass
class RunRecord:
    run_id: str
    started: str
    station: dict[str, Any]
    code_version: str = "unknown"
    status: str = "running"  # running, complete, incomplete
    finished: str | None = None
    duts: dict[str, dict[str, Any]] = field(default_factory=dict)
    instruments: dict[str, dict[str, Any]] = field(default_factory=dict)
    tests: list[TestRecord] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for test in self.tests:
            outcome = TestOutcome(test.outcome).value
            counts[outcome] = counts.get(outcome, 0) + 1
        counts["verdicts_failed"] = sum(1 for t in self.tests for v in t.verdicts if not v.passed)
        return counts

    def lab_time_per_dut(self) -> dict[str, float]:
        """Station-clock seconds each phone spent in this run's tests (tests without a reading add nothing)."""
        per_dut: dict[str, float] = {}
        for test in self.tests:
            if test.lab_time_s is not None and test.dut is not None:
                per_dut[test.dut] = per_dut.get(test.dut, 0.0) + test.lab_time_s
        return {dut: round(seconds, 3) for dut, seconds in per_dut.items()}

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "schema": SCHEMA, "run_id": self.run_id, "status": self.status, "started": self.started,
            "finished": self.finished, "code_version": self.code_version, "station": self.station,
            "duts": self.duts, "instruments": self.instruments, "tests": [t.to_dict() for t in self.tests],
            "summary": self.summary(), "lab_time_s": self.lab_time_per_dut()}
        if self.problems:
            data["problems"] = list(self.problems)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunRecord:
        return cls(run_id=str(data["run_id"]), started=str(data.get("started") or ""),
                   station=dict(data.get("station") or {}), code_version=str(data.get("code_version") or "unknown"),
                   status=str(data.get("status") or "running"), finished=data.get("finished"),
                   duts=dict(data.get("duts") or {}), instruments=dict(data.get("instruments") or {}),
                   tests=[TestRecord.from_dict(t) for t in data.get("tests") or []],
                   problems=list(data.get("problems") or []))
