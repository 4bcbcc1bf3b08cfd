"""The one judge (core/judge.py): its rules run in the stated order, from the basis, once over the
typed record; checks give findings, and no module outside the judge writes an outcome."""
from __future__ import annotations

import re
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from phonebench.core import judge
from phonebench.core.verdict import (DecisionRule, Evidence, Finding, FindingKind, Outcome, Uncertainty, Verdict)

ROOT = Path(__file__).resolve().parents[1]


def _passing(**fields: object) -> Verdict:
    return judge.decide(Verdict("first_token_p99", 210.0, "ms", Outcome.PASS, limit=300.0, bound=240.0, **fields))


def test_the_rules_run_in_the_order_the_module_states():
    stated = re.findall(r"^\d\. ([a-z ]+) —", judge.__doc__ or "", flags=re.M)
    assert [rule.__name__.replace("_", " ") for rule in judge.RULES] == stated


def test_swapping_two_rules_changes_the_outcome_and_the_stated_order_is_what_runs():
    """A PASS on the phone's word whose reference tokens are missing: rule 6 (unsettled) first makes
    it INCONCLUSIVE and rule 8 then has no PASS to turn into INFO; swapped, it would be INFO."""
    verdict = judge.found(_passing(evidence=Evidence.REPORTED),
                          Finding(FindingKind.UNSETTLED, "no reference for the model's tokens"))
    rules = list(judge.RULES)
    i, j = rules.index(judge.unsettled), rules.index(judge.reported_never_passes)
    swapped = list(rules)
    swapped[i], swapped[j] = swapped[j], swapped[i]
    assert judge.decide(verdict, rules).outcome is Outcome.INCONCLUSIVE
    assert judge.decide(verdict, swapped).outcome is Outcome.INFO
    assert verdict.outcome is judge.decide(verdict, rules).outcome  # what ran is the stated order
    assert verdict.explanation.startswith("no reference for the model's tokens")


def test_judging_again_is_the_same_verdict_and_a_late_finding_counts_as_an_early_one():
    early = judge.found(_passing(evidence=Evidence.REPORTED), Finding(FindingKind.UNSETTLED, "wide"))
    late = judge.found(judge.decide(_passing(evidence=Evidence.REPORTED)), Finding(FindingKind.UNSETTLED, "wide"))
    assert early == late == judge.decide(early) and early.ruling == ("wide",)
    assert Verdict.from_dict(early.to_dict()) == early  # results.json keeps basis, findings and notes apart


@pytest.mark.parametrize("finding, outcome", [
    (FindingKind.CONTRADICTED, Outcome.FAIL), (FindingKind.NOT_THE_MODELS, Outcome.FAIL),
    (FindingKind.UNSETTLED, Outcome.INCONCLUSIVE), (FindingKind.INVALID, Outcome.INVALID),
    (FindingKind.STOP_FAIL, Outcome.FAIL), (FindingKind.STOP_UNDECIDED, Outcome.INSUFFICIENT),
    (FindingKind.OUTSIDE_VALIDITY, Outcome.INCONCLUSIVE),
])
def test_each_finding_does_what_its_rule_says_and_none_makes_a_pass(finding, outcome):
    assert judge.found(_passing(evidence=Evidence.MEASURED), Finding(finding, "x")).outcome is outcome
    failed = judge.decide(Verdict("m", 400.0, "ms", Outcome.FAIL, limit=300.0, bound=380.0))
    assert judge.found(failed, Finding(finding, "x")).outcome is not Outcome.PASS


def test_the_guard_band_and_the_evidence_requirement_are_the_judges():
    close = _passing(evidence=Evidence.MEASURED, decision_rule=DecisionRule.GUARDED,
                     uncertainty=Uncertainty(expanded=80.0))
    assert close.outcome is Outcome.INCONCLUSIVE and "guarded decision" in close.explanation
    weak = judge.decide(replace(_passing(evidence=Evidence.CORROBORATED), evidence_required="measured"))
    assert weak.outcome is Outcome.INCONCLUSIVE and "requires measured" in weak.explanation
    assert judge.decide(replace(weak, evidence_required="any")).outcome is Outcome.PASS


def test_a_verdict_cannot_be_given_an_outcome_past_the_judge():
    with pytest.raises(TypeError, match="judge"):
        _passing().but(outcome=Outcome.PASS)
    with pytest.raises(TypeError, match="judge"):
        _passing().but(findings=())


def test_no_module_outside_the_judge_writes_a_verdicts_outcome():
    """`outcome=` outside core/judge.py: only other records' outcomes (a test's, a line attempt's,
    a stored fact read back), never a verdict's."""
    found = subprocess.run(["grep", "-rn", "--include=*.py", "outcome=", "bench", "fixtures", "core", "suites",
                            "reports"], cwd=ROOT, capture_output=True, text=True).stdout.splitlines()
    writes = [line for line in found if not line.startswith(("core/judge.py",
                                                              "bench/catalogue/install.py"))  # an install's outcome
              and not re.search(r"(VerdictFact|AttemptRecord|TestRecord)\(|nodeid=item.nodeid|outcome=outcome, reason",
                                line)]
    assert writes == []


def _bounds(per_run: float | None, opposite: float | None, asked: list[str]) -> judge.LookBounds:
    def per() -> float | None:
        asked.append("per_run")
        return per_run

    def other() -> float | None:
        asked.append("opposite")
        return opposite
    return judge.LookBounds(per_run=per, opposite=other)


def test_a_sequential_look_stops_only_on_what_more_samples_cannot_change():
    """The stop rule of a look before the last (the jitter series', claim 4): a PASS stops only if
    its bound holds with each run as the unit too, keeping the larger bound; a FAIL on its bound
    stops only once the opposite bound is past the limit; INVALID stops; the rest goes on. Each
    other bound is computed only when the rule needs it."""
    look = {"limit": 300.0, "comparator": "<=", "unit": "ms"}
    asked: list[str] = []
    held = judge.sequential_look(_passing(evidence=Evidence.MEASURED), **look, bounds=_bounds(260.0, None, asked))
    assert held is not None and held.outcome is Outcome.PASS and held.bound == 260.0 and asked == ["per_run"]
    assert judge.sequential_look(_passing(evidence=Evidence.MEASURED), **look,
                                 bounds=_bounds(320.0, None, [])) is None  # a stall may not have shown yet
    failed = judge.decide(Verdict("token_latency_std", 330.0, "ms", Outcome.FAIL, limit=300.0, bound=350.0))
    assert judge.sequential_look(failed, **look, bounds=_bounds(None, 290.0, [])) is None  # not settled yet
    settled = judge.sequential_look(failed, **look, bounds=_bounds(None, 310.0, []))
    assert settled is not None and settled.outcome is Outcome.FAIL and settled.extra["settling_bound"] == 310.0
    caught = judge.found(_passing(evidence=Evidence.MEASURED), Finding(FindingKind.CONTRADICTED, "lie"))
    asked.clear()
    assert judge.sequential_look(caught, **look, bounds=_bounds(None, None, asked)) is caught and asked == []
    invalid = judge.found(_passing(evidence=Evidence.MEASURED), Finding(FindingKind.INVALID, "clock"))
    assert judge.sequential_look(invalid, **look, bounds=_bounds(None, None, [])) is invalid
    unsettled = judge.found(_passing(evidence=Evidence.MEASURED), Finding(FindingKind.UNSETTLED, "wide"))
    assert judge.sequential_look(unsettled, **look, bounds=_bounds(None, None, [])) is None


@pytest.mark.parametrize("value", [3.5, None])
def test_a_recorded_value_is_info_and_stores_what_a_hand_built_info_verdict_stored(value):
    """judge.recorded is the checks' way to keep a value no claim is about (the outcome the judge's,
    not the check's): INFO even without a value, and judging it again changes nothing."""
    fields = dict(statistic="max", n=4, raw=("soak_trace",), detail="the phone's own sensor", evidence=Evidence.REPORTED,
                  extra={"engage_mv": 1.0})
    made = judge.recorded("thermal_soak_npu_max", value, "degC", **fields)
    by_hand = judge.decide(Verdict("thermal_soak_npu_max", value, "degC", Outcome.INFO, **fields))
    assert made.outcome is Outcome.INFO and made.to_dict() == by_hand.to_dict()
    assert judge.decide(made) == made
