"""From a run's results (results.json) to the unit's outcome: which acceptance checks passed,
which failed and why, in plain words for the operator; what may be retested.

Each test says which check it proves (`@pytest.mark.acceptance(check="weights")`, kept in its record
as `acceptance_check`), so a renamed test still proves its check. A failing verdict, or a test failing its own assertion, is a FAIL of the unit. A test that could
not finish because the phone or an instrument went away (or the bench itself failed) makes the
attempt INCOMPLETE: the unit is not judged, never passed, and its finished results are kept. A
required check that never passed (skipped, or missing from the run) is a FAIL: acceptance needs
every check proven.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from .attempts import FAIL, INCOMPLETE, PASS
from phonebench.core.verdict import Outcome, Verdict, verdicts_of


@dataclass(frozen=True)
class Check:
    name: str
    words: str  # what the operator reads
    retestable: bool = False  # measurement noise can fail it on a good unit


CHECKS: dict[str, Check] = {c.name: c for c in (
    Check("serial", "Serial number read from the phone"),
    Check("identity", "Phone identity and runtime build"),
    Check("device-state", "Phone thermal sensors and battery reading"),
    Check("fingerprint", "NPU microcode fingerprint"),
    Check("adapter", "Overflow adapter installed and results bit-exact"),
    Check("dut-calibration", "Unit calibration (supply-ripple onset, skin sensor)"),
    Check("latency", "Voice latency sanity check", retestable=True),
    Check("power", "Power draw sanity check", retestable=True),
    Check("redundancy", "Redundancy under supply ripple", retestable=True),
    Check("weights", "Model weights on flash (spot check)"),
)}
REQUIRED = ("serial", "identity", "fingerprint", "adapter", "dut-calibration", "latency", "power", "redundancy",
            "weights")
# A test that failed its own check (an assertion, pytest.fail) judged the unit; any other error
# (the phone or an instrument gone, a bench fault) means it could not measure.
_ASSERTED = re.compile(r"^(AssertionError|assert |Failed: )")
_LOST = re.compile(r"\b(DeviceError|DeviceUnreachable|DeviceDisconnected|CommandTimeout|AuthRefused|"
                   r"InstrumentError|StoreError)\b")


@dataclass(frozen=True)
class RetestPolicy:
    """How many retests a unit gets, and which checks may be retested (all must be, to retest)."""

    retries: int = 1
    retestable: frozenset[str] = frozenset(c.name for c in CHECKS.values() if c.retestable)

    def __post_init__(self) -> None:
        unknown = set(self.retestable) - set(CHECKS)
        if unknown:
            raise ValueError(f"unknown check(s) {sorted(unknown)}; checks: {', '.join(CHECKS)}")
        if self.retries < 0:
            raise ValueError(f"retries must be >= 0, got {self.retries}")


@dataclass
class Failure:
    check: str
    words: str
    reason: str
    kind: str  # fail | incomplete
    nodeid: str | None = None
    not_run: bool = False  # the run stopped at an earlier failure before reaching this check
    plain: str = ""  # the failure in an operator's words (what was wrong, measured against allowed)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        return f"{self.words}: {self.reason}"

    def plain_text(self) -> str:
        """What the operator reads: the check, then what was wrong in words (the engineering
        reason when there are no plainer words)."""
        return f"{self.words}: {self.plain or self.reason}"


@dataclass
class Disposition:
    outcome: str  # pass | fail | incomplete
    failures: list[Failure] = field(default_factory=list)
    passed: list[str] = field(default_factory=list)  # checks proven

    @property
    def reason(self) -> str | None:
        first = next((f for f in self.failures if f.kind == self.outcome), None)
        return first.text() if first else None

    def retest_nodeids(self, policy: RetestPolicy, not_run: list[str] | tuple[str, ...] = ()) -> list[str]:
        """Tests to run again, or [] when the policy does not allow retesting this result. A run
        that stopped at its first failure left `not_run` (node ids): they run in the retest too."""
        judged = [f for f in self.failures if not (f.not_run and not_run)]
        if self.outcome != FAIL or not judged or any(
                f.kind != FAIL or f.check not in policy.retestable or f.nodeid is None for f in judged):
            return []
        return [f.nodeid for f in judged if f.nodeid] + [n for n in not_run if n not in {f.nodeid for f in judged}]


def _verdict_reason(v: Verdict) -> str:
    shown = f"{v.value:.4g}" if isinstance(v.value, float) else str(v.value)
    limit = f", limit {v.comparator} {v.limit:g}" if v.limit is not None else ""
    outcome = "" if v.outcome is Outcome.FAIL else f" ({v.outcome.value})"
    detail = v.explanation.strip("; ")
    return f"{v.name} = {shown} {v.unit}{limit}{outcome}" + (f" [{detail[:160]}]" if detail else "")


def _plain_reason(v: Verdict) -> str:
    """A failing verdict as an operator acts on it: the test's own sentence for a yes/no check,
    else the check's plain description with the value measured against what is allowed."""
    from ...results import display

    detail = v.explanation.split(";")[0].strip()
    if v.unit == "bool" and detail:
        return detail
    what = (v.description or display.check_name(v).replace("_", " ")).rstrip(".")
    limit = display.limit_text(v)
    allowed = f", allowed {limit}" if limit else ""
    undecided = "" if v.outcome is Outcome.FAIL else f" (not decided: {v.outcome.value})"
    return f"{what}: measured {display.with_unit(v.value, v.unit)}{allowed}{undecided}"


def disposition_of(data: dict[str, Any] | None, required: tuple[str, ...] = REQUIRED) -> Disposition:
    """The unit's outcome from a results.json record (None: the run left no record)."""
    if data is None:
        return Disposition(INCOMPLETE, [Failure("run", "Acceptance run", "no results were recorded", INCOMPLETE)])
    failures: list[Failure] = []
    passed: set[str] = set()
    seen: set[str] = set()
    for test in data.get("tests", []):
        check = test.get("acceptance_check") or "other"  # declared: @pytest.mark.acceptance(check=...)
        words = CHECKS[check].words if check in CHECKS else test["nodeid"]
        seen.add(check)
        outcome = test["outcome"]
        if outcome == "passed":
            passed.add(check)
            continue
        if outcome == "skipped":
            continue
        bad = [v for v in verdicts_of(test) if not v.outcome.is_good]
        message = (test.get("message") or "").strip()
        first_line = message.splitlines()[0][:300] if message else f"{outcome} without a message"
        if bad:
            failures.append(Failure(check, words, _verdict_reason(bad[0]), FAIL, test["nodeid"],
                                    plain=_plain_reason(bad[0])))
        elif _ASSERTED.match(message) and not _LOST.search(first_line):
            failures.append(Failure(check, words, first_line, FAIL, test["nodeid"]))
        else:  # the phone, an instrument or the bench itself failed: nothing was judged
            failures.append(Failure(check, words, first_line, INCOMPLETE, test["nodeid"]))
    if data.get("status") != "complete":
        failures.append(Failure("run", "Acceptance run", f"the run is {data.get('status')}: it did not finish",
                                INCOMPLETE))
    for check in required:
        if check not in passed and not any(f.check == check for f in failures):
            why = "skipped" if check in seen else "not run"
            failures.append(Failure(check, CHECKS[check].words, f"not proven ({why})", FAIL, not_run=check not in seen))
    if any(f.kind == INCOMPLETE for f in failures):
        outcome = INCOMPLETE
    elif failures:
        outcome = FAIL
    else:
        outcome = PASS
    failures.sort(key=lambda f: f.kind != outcome)  # the failures that decide the outcome first
    return Disposition(outcome, failures, sorted(passed))


def merge_retest(first: dict[str, Any], retest: dict[str, Any]) -> dict[str, Any]:
    """The unit's record after a retest: each retested test's latest result replaces the earlier one."""
    latest = {t["nodeid"]: t for t in retest.get("tests", [])}
    tests = [latest.pop(t["nodeid"], t) for t in first.get("tests", [])] + list(latest.values())
    return {**first, "tests": tests, "status": retest.get("status", first.get("status"))}
