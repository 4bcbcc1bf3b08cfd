"""The operator page's state (phonebench.bench.operator.shift) and the acceptance disposition's words for it:
Retest only where the retest policy allows, steps that never ran marked "not run", and a FAIL in
words an operator acts on."""
from __future__ import annotations

from phonebench.bench.procedures.acceptance.disposition import disposition_of
from phonebench.bench.operator.shift import Shift

RETESTABLE = frozenset({"latency", "power", "redundancy"})


def shift_with(result: dict, attempts: int, retries: int = 1) -> Shift:
    shift = Shift(["A"], retries, RETESTABLE)
    shift.apply({"fixture": "A", "event": "ready"})
    shift.apply({"fixture": "A", "event": "started", "serial": "LN0001"})
    shift.apply({"fixture": "A", "event": "plan", "steps": [{"check": c, "words": c} for c in
                                                            ("serial", "redundancy", "latency", "weights")]})
    shift.apply({"fixture": "A", "event": "step", "check": "serial", "state": "done"})
    shift.apply({"fixture": "A", "event": "step", "check": "redundancy", "state": "running"})
    shift.apply({"fixture": "A", "event": "step", "check": "redundancy", "state": "fail"})
    shift.apply({"fixture": "A", "event": "step", "check": "latency", "state": "running"})
    shift.apply({"fixture": "A", "event": "result", "serial": "LN0001", "attempts": attempts, "cycle_s": 60.0,
                 **result})
    return shift


def fixture(shift: Shift) -> dict:
    return shift.view()["fixtures"][0]


FAIL = {"outcome": "fail", "reason": "r", "failures": [
    {"check": "redundancy", "words": "Redundancy", "reason": "r", "kind": "fail", "not_run": False},
    {"check": "weights", "words": "Weights", "reason": "not proven (not run)", "kind": "fail", "not_run": True}]}


def test_a_retestable_fail_is_offered_a_retest_while_the_policy_has_attempts_left():
    assert fixture(shift_with(FAIL, attempts=1, retries=1))["may_retest"]  # a check never reached does not decide


def test_no_retest_after_the_policys_last_attempt():
    assert not fixture(shift_with(FAIL, attempts=2, retries=1))["may_retest"]  # the run's own retest used it
    assert not fixture(shift_with(FAIL, attempts=1, retries=0))["may_retest"]  # --retries 0: none at all
    assert fixture(shift_with(FAIL, attempts=2, retries=1))["may_repair"]


def test_no_retest_of_a_failure_that_does_not_heal():
    weights = {"outcome": "fail", "reason": "r", "failures": [
        {"check": "weights", "words": "Weights", "reason": "bad page", "kind": "fail", "not_run": False}]}
    assert not fixture(shift_with(weights, attempts=1))["may_retest"]


def test_an_incomplete_run_is_offered_a_retest_within_the_policy():
    incomplete = {"outcome": "incomplete", "reason": "phone lost", "failures": []}
    assert fixture(shift_with(incomplete, attempts=1))["may_retest"]
    assert not fixture(shift_with(incomplete, attempts=2))["may_retest"]


def test_steps_that_never_ran_say_so():
    steps = {s["check"]: s["state"] for s in fixture(shift_with(FAIL, attempts=1))["steps"]}
    assert steps == {"serial": "done", "redundancy": "fail", "latency": "not finished", "weights": "not run"}


def _run(verdict: dict, check: str = "redundancy") -> dict:
    return {"status": "complete", "tests": [{"nodeid": "t::x", "outcome": "failed", "acceptance_check": check,
                                             "message": "", "verdicts": [verdict]}]}


def test_a_yes_no_failure_reads_as_the_tests_sentence():
    verdict = {"name": "acceptance_redundancy_engaged", "value": 0, "unit": "bool", "limit": 1, "comparator": "==",
               "outcome": "fail", "detail": "redundancy did NOT engage at ±50 mV ripple (auto mode)"}
    failure = disposition_of(_run(verdict), required=("redundancy",)).failures[0]
    assert failure.plain_text() == "Redundancy under supply ripple: redundancy did NOT engage at ±50 mV ripple " \
                                   "(auto mode)"
    assert failure.reason.startswith("acceptance_redundancy_engaged = 0 bool, limit == 1")  # the engineering detail


def test_a_measured_failure_reads_as_its_description_against_what_is_allowed():
    verdict = {"name": "acceptance_power_mean", "value": 5.14, "unit": "W", "limit": 4.5, "comparator": "<=",
               "outcome": "fail", "description": "Sustained power over generate runs", "detail": "n=10"}
    text = disposition_of(_run(verdict, "power"), required=()).failures[0].plain_text()
    assert text == "Power draw sanity check: Sustained power over generate runs: measured 5.14 W, allowed ≤ 4.5 W"
    assert "None" not in text
