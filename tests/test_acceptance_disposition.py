"""Judging an acceptance run: PASS only when every required check is proven; failing verdicts and
failed assertions FAIL the unit in plain words; lost equipment makes it INCOMPLETE; the retest
policy decides what runs again."""
from __future__ import annotations

import pytest

from phonebench.bench.procedures.acceptance.display import big, operator_lines
from phonebench.bench.procedures.acceptance.disposition import CHECKS, REQUIRED, RetestPolicy, disposition_of, merge_retest

BY_CHECK = {check: f"suites/test_x.py::test_{check.replace('-', '_')}[fixture]" for check in CHECKS}


def run(*tests: dict, status: str = "complete") -> dict:
    """A results.json record: every required check passed, unless overridden by `tests`."""
    overridden = {t["nodeid"] for t in tests}
    base = [{"nodeid": BY_CHECK[c], "acceptance_check": c, "outcome": "passed", "verdicts": [], "message": ""}
            for c in REQUIRED if BY_CHECK[c] not in overridden]
    return {"status": status, "tests": base + list(tests)}


def failing(check: str, **verdict) -> dict:
    v = {"name": "x", "value": 1.0, "unit": "u", "outcome": "fail", "limit": 0.0, "comparator": "<=", "detail": ""}
    v.update(verdict)
    return {"nodeid": BY_CHECK[check], "acceptance_check": check, "outcome": "failed", "verdicts": [v],
            "message": "verdicts failed: ..."}


def errored(check: str, message: str, outcome: str = "failed") -> dict:
    return {"nodeid": BY_CHECK[check], "acceptance_check": check, "outcome": outcome, "verdicts": [],
            "message": message}


def test_the_check_a_test_proves_is_its_declaration_not_its_name():
    renamed = {"nodeid": "suites/test_y.py::test_something_else[fixture]", "acceptance_check": "weights",
               "outcome": "passed", "verdicts": [], "message": ""}
    undeclared = {"nodeid": BY_CHECK["weights"], "outcome": "passed", "verdicts": [], "message": ""}
    base = [t for t in run()["tests"] if t["acceptance_check"] != "weights"]
    assert disposition_of({"status": "complete", "tests": [*base, renamed]}).outcome == "pass"
    j = disposition_of({"status": "complete", "tests": [*base, undeclared]})
    assert j.outcome == "fail" and "weights" not in j.passed  # a test that declares nothing proves nothing


def test_every_required_check_proven_is_a_pass():
    j = disposition_of(run())
    assert j.outcome == "pass" and j.reason is None and set(REQUIRED) <= set(j.passed)


def test_a_failing_verdict_fails_the_unit_in_plain_words():
    j = disposition_of(run(failing("adapter", name="tokens_differing_from_golden", value=17, unit="tokens", comparator="==")))
    assert j.outcome == "fail"
    assert j.reason == ("Overflow adapter installed and results bit-exact: tokens_differing_from_golden = 17 tokens, "
                        "limit == 0")
    insufficient = disposition_of(run(failing("latency", outcome="insufficient-samples", value=3.0)))
    assert insufficient.outcome == "fail" and "(insufficient-samples)" in insufficient.reason  # never a pass


def test_an_assertion_fails_the_unit_but_lost_equipment_makes_it_incomplete():
    assert disposition_of(run(errored("identity", "AssertionError: no serial\nassert ''"))).outcome == "fail"
    lost_phone = disposition_of(run(errored("power", "phonebench.core.errors.DeviceDisconnected: fixture (127.0.0.1:5555): lost "
                                            "the connection during `sleep 1`")))
    assert lost_phone.outcome == "incomplete" and "DeviceDisconnected" in lost_phone.reason
    lost_scope = disposition_of(run(errored("latency", "phonebench.core.errors.InstrumentError: scope at TCPIP::x: no answer",
                                   outcome="error")))
    assert lost_scope.outcome == "incomplete"
    bench_bug = disposition_of(run(errored("weights", "KeyError: 'pages'")))
    assert bench_bug.outcome == "incomplete"  # the bench failed, not the unit: never judged, never passed
    # A failing verdict elsewhere does not hide that the attempt was incomplete.
    both = disposition_of(run(failing("adapter"), errored("power", "phonebench.core.errors.DeviceDisconnected: gone")))
    assert both.outcome == "incomplete" and both.failures[0].check == "power"


def test_a_required_check_never_proven_fails_and_a_killed_run_is_incomplete():
    skipped = run(errored("weights", "Skipped: runtime has no weights capability", outcome="skipped"))
    j = disposition_of(skipped)
    assert j.outcome == "fail" and j.reason == f"{CHECKS['weights'].words}: not proven (skipped)"
    missing = {"status": "complete", "tests": [t for t in run()["tests"] if t["nodeid"] != BY_CHECK["weights"]]}
    assert disposition_of(missing).reason.endswith("not proven (not run)")
    assert disposition_of(run(status="incomplete")).outcome == "incomplete"
    assert disposition_of(None).outcome == "incomplete"


def test_retest_policy_retests_only_retestable_failures():
    policy = RetestPolicy(retries=1)
    noisy = disposition_of(run(failing("latency"), failing("power")))
    assert sorted(noisy.retest_nodeids(policy)) == sorted([BY_CHECK["latency"], BY_CHECK["power"]])
    mixed = disposition_of(run(failing("latency"), failing("weights")))
    assert mixed.retest_nodeids(policy) == []  # a corrupted page does not heal on a retest
    assert disposition_of(run(errored("power", "phonebench.core.errors.DeviceDisconnected: x"))).retest_nodeids(policy) == []
    strict = RetestPolicy(retries=1, retestable=frozenset())
    assert noisy.retest_nodeids(strict) == []
    with pytest.raises(ValueError, match="unknown check"):
        RetestPolicy(retestable=frozenset({"latncy"}))
    with pytest.raises(ValueError):
        RetestPolicy(retries=-1)


def test_a_retest_replaces_only_the_retested_results():
    first = run(failing("latency"))
    second = {"status": "complete", "tests": [{"nodeid": BY_CHECK["latency"], "acceptance_check": "latency",
                                                "outcome": "passed", "verdicts": [], "message": ""}]}
    merged = merge_retest(first, second)
    assert len(merged["tests"]) == len(first["tests"]) and disposition_of(merged).outcome == "pass"


def test_the_operator_sees_one_large_word_and_the_reason():
    assert big("PASS")[0].startswith("████")
    lines = operator_lines("LN070003", "fail", "Unit calibration: skin_offset_c = -5.7 degC", attempts=1,
                           cycle_s=5.2, takt_s=5.0)
    text = "\n".join(lines)
    assert "unit REJECTED" in text and "why: Unit calibration" in text and "station takt 5.0 s/unit" in text
    assert "STOP" not in text and len(big("FAIL")) == 5
    assert "WRONG UNIT" in "\n".join(operator_lines("X1", "wrong-unit", "r", attempts=0, cycle_s=0.1, takt_s=None))


def test_a_run_stopped_at_a_retestable_failure_retests_it_and_what_it_did_not_reach():
    policy = RetestPolicy()
    tests = [t for t in run(failing("latency"))["tests"] if t["acceptance_check"] not in ("power",)]
    stopped = disposition_of({"status": "complete", "tests": tests})
    assert stopped.outcome == "fail" and stopped.reason.startswith("Voice latency")
    assert next(f for f in stopped.failures if f.check == "power").not_run
    assert stopped.retest_nodeids(policy) == []  # without knowing what was skipped: no retest
    assert stopped.retest_nodeids(policy, [BY_CHECK["power"]]) == [BY_CHECK["latency"], BY_CHECK["power"]]
    weights = [t for t in run(failing("weights"))["tests"] if t["acceptance_check"] != "power"]
    assert disposition_of({"status": "complete", "tests": weights}).retest_nodeids(policy, [BY_CHECK["power"]]) == []
