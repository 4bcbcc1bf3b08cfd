"""The one judge: every rule that decides a verdict's outcome, in one stated order.

A check measures and states findings (`Finding`); it never sets an outcome. The judge starts from
the measurement's own decision — its statistic against the limit (`decide_statistic`, `compare`,
`census`), kept in the verdict as `basis` — and runs RULES over the typed record, in this order,
each rule seeing the outcome the rules before it left:

1. guard band — under the guarded decision rule (ILAC-G8) a PASS needs value + U within the limit
   and a FAIL value - U beyond it; otherwise INCONCLUSIVE, and INCONCLUSIVE without a U. At a
   confidence bound a PASS needs bound + U without the statistic's own sampling error, which the
   bound's confidence already states (counted twice, honest units 35 ms inside a limit were
   INCONCLUSIVE); a FAIL, on the bound's far side, still needs bound - all of U beyond the limit.
2. sequential stop — a sequential test's decided "fail" fails even below the sample count; a run
   stopped undecided never passes (INSUFFICIENT).
3. invalid — a measurement or condition the bench cannot trust (a clock outside the phone's time
   domain, a condition not shown, a load that showed no effect) is INVALID.
4. outside validity — the value rests on a correction applied outside the range it is valid for
   (a cover temperature referred to 25 °C from a room outside 23-27 °C): neither a PASS nor a FAIL
   is shown, INCONCLUSIVE with the reason.
5. contradiction — the phone's account disagrees with the bench's (corroboration failed), or its
   tokens are not the model's: FAIL, even where rule 3 found the measurement unusable (a caught
   lie stays a FAIL).
6. unsettled — the bench could not settle what a PASS needs (no reference tokens, an interval too
   wide, a verify that could not run): a PASS becomes INCONCLUSIVE.
7. evidence required — a PASS resting on less than the SLA entry's `evidence` is INCONCLUSIVE.
8. reported never passes — a PASS on the phone's word alone is INFO: shown and kept, never a PASS
   (the trust boundary is the whole phone).

Judging again gives the same verdict: the rules start from the basis every time and rewrite their
notes (`Verdict.ruling`), so a finding added later is judged as if it had been there first.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from .killpoints import kill_point
from .verdict import (COMPARATORS, DecisionRule, Evidence, Finding, FindingKind, Outcome, Verdict, VerdictFields,
                      VerdictOptions)

if TYPE_CHECKING:  # annotations only: typing.Unpack is Python 3.11's
    from typing_extensions import Unpack

# What an entry's `evidence` requirement accepts: "measured" needs the bench's own measurement;
# "corroborated" also accepts the phone's report checked against one; "any" accepts both and
# leaves the phone's word alone to rule 8 (INFO, never a PASS).
EVIDENCE_ACCEPTED: Mapping[str, tuple[Evidence, ...]] = {
    "measured": (Evidence.MEASURED,),
    "corroborated": (Evidence.MEASURED, Evidence.CORROBORATED),
    "any": (Evidence.MEASURED, Evidence.CORROBORATED),
}


@dataclass(frozen=True)
class Ruling:
    """The outcome a rule leaves, and its note when it changed it (None: unchanged)."""

    outcome: Outcome
    note: str | None = None


Rule = Callable[[Verdict, Outcome], Ruling]


def _kinds(verdict: Verdict, *kinds: FindingKind) -> list[Finding]:
    return [f for f in verdict.findings if f.kind in kinds]


def guard_band(verdict: Verdict, outcome: Outcome) -> Ruling:
    if verdict.decision_rule is DecisionRule.SIMPLE or outcome not in (Outcome.PASS, Outcome.FAIL) \
            or verdict.limit is None:
        return Ruling(outcome)
    if verdict.uncertainty is None or not math.isfinite(verdict.uncertainty.expanded):
        return Ruling(Outcome.INCONCLUSIVE, "guarded decision without an uncertainty")
    x = verdict.bound if verdict.bound is not None else verdict.value
    if x is None:
        return Ruling(outcome)
    # A confidence bound already states the statistic's sampling error on the side it bounds: a
    # PASS there adds only the rest of U (the band); a FAIL, on the far side, still needs all of U.
    whole = verdict.uncertainty.expanded
    at_confidence_bound = verdict.bound is not None and verdict.confidence is not None
    band = verdict.uncertainty.beyond_sampling if at_confidence_bound else whole
    limit = verdict.limit
    test = COMPARATORS[verdict.comparator]
    if verdict.comparator in ("<=", "<"):
        passes, fails = test(x + band, limit), not test(x - whole, limit)
    elif verdict.comparator in (">=", ">"):
        passes, fails = test(x - band, limit), not test(x + whole, limit)
    else:  # "==": within U of the value on both sides
        passes, fails = abs(x - limit) <= 0 and band == 0, abs(x - limit) > whole
    if passes:
        return Ruling(Outcome.PASS)
    if fails:
        return Ruling(Outcome.FAIL)
    if band != whole:
        return Ruling(Outcome.INCONCLUSIVE, f"within its expanded uncertainty beyond sampling ±{band:.4g} "
                                            f"{verdict.unit} of the limit (guarded decision; a FAIL needs "
                                            f"±{whole:.4g} {verdict.unit})")
    return Ruling(Outcome.INCONCLUSIVE, f"within its expanded uncertainty ±{whole:.4g} {verdict.unit} of the limit "
                                        "(guarded decision)")


def sequential_stop(verdict: Verdict, outcome: Outcome) -> Ruling:
    if _kinds(verdict, FindingKind.STOP_FAIL) and outcome is not Outcome.FAIL:
        return Ruling(Outcome.FAIL, "; ".join(f.detail for f in _kinds(verdict, FindingKind.STOP_FAIL)) or None)
    if _kinds(verdict, FindingKind.STOP_UNDECIDED) and outcome.is_good:
        return Ruling(Outcome.INSUFFICIENT,
                      "; ".join(f.detail for f in _kinds(verdict, FindingKind.STOP_UNDECIDED)) or None)
    return Ruling(outcome)


def outside_validity(verdict: Verdict, outcome: Outcome) -> Ruling:
    found = _kinds(verdict, FindingKind.OUTSIDE_VALIDITY)
    if found and outcome in (Outcome.PASS, Outcome.FAIL):
        return Ruling(Outcome.INCONCLUSIVE, "; ".join(f.detail for f in found))
    return Ruling(outcome)


def contradiction(verdict: Verdict, outcome: Outcome) -> Ruling:
    found = _kinds(verdict, FindingKind.CONTRADICTED, FindingKind.NOT_THE_MODELS)
    return Ruling(Outcome.FAIL, "; ".join(f.detail for f in found)) if found else Ruling(outcome)


def unsettled(verdict: Verdict, outcome: Outcome) -> Ruling:
    found = _kinds(verdict, FindingKind.UNSETTLED)
    if found and outcome is Outcome.PASS:
        return Ruling(Outcome.INCONCLUSIVE, "; ".join(f.detail for f in found))
    return Ruling(outcome)


def evidence_required(verdict: Verdict, outcome: Outcome) -> Ruling:
    required = verdict.evidence_required
    if outcome is not Outcome.PASS or required in (None, "any") or verdict.evidence in EVIDENCE_ACCEPTED[required]:
        return Ruling(outcome)
    if verdict.evidence is Evidence.REPORTED:
        return Ruling(Outcome.INCONCLUSIVE, "reported: only the phone's word, which is never a PASS")
    rests_on = verdict.evidence.value if verdict.evidence else "unstated evidence"
    return Ruling(Outcome.INCONCLUSIVE, f"rests on {rests_on}, but profile {verdict.profile!r} requires {required} "
                                        f"evidence for {verdict.metric or verdict.name}")


def reported_never_passes(verdict: Verdict, outcome: Outcome) -> Ruling:
    if outcome is Outcome.PASS and verdict.evidence is Evidence.REPORTED:
        return Ruling(Outcome.INFO, "reported: only the phone's word, shown and kept, never a PASS")
    return Ruling(outcome)


def invalid(verdict: Verdict, outcome: Outcome) -> Ruling:
    found = _kinds(verdict, FindingKind.INVALID)
    return Ruling(Outcome.INVALID, "; ".join(f.detail for f in found)) if found else Ruling(outcome)


# The stated order (module docstring); tests/test_judge.py shows this order is the one that runs.
RULES: tuple[Rule, ...] = (guard_band, sequential_stop, invalid, outside_validity, contradiction, unsettled,
                           evidence_required, reported_never_passes)


def decide(verdict: Verdict, rules: Sequence[Rule] = RULES) -> Verdict:
    """The verdict with its outcome decided: RULES in order from the basis, their notes rewritten."""
    outcome = verdict.basis or verdict.outcome
    notes: list[str] = []
    for rule in rules:
        ruling = rule(verdict, outcome)
        if ruling.outcome is not outcome and ruling.note:
            notes.append(ruling.note)
        outcome = ruling.outcome
    # Findings whose rule did not change the outcome (a contradiction on a FAIL) still show.
    shown = [f.detail for f in verdict.findings if f.detail and not any(f.detail in n for n in notes)]
    return replace(verdict, outcome=outcome, ruling=(*notes, *shown))


def found(verdict: Verdict, *findings: Finding, **changes: Unpack[VerdictFields]) -> Verdict:
    """The verdict with a check's findings added (and other fields, as `Verdict.but`), judged again."""
    return decide(replace(verdict.but(**changes) if changes else verdict,
                          findings=(*verdict.findings, *findings)))


def rebased(verdict: Verdict, basis: Outcome, **changes: Unpack[VerdictFields]) -> Verdict:
    """The verdict on a decision the check's own statistic made (e.g. an exact interval against a
    claimed band), the rules run again over it."""
    return decide(replace(verdict.but(**changes) if changes else verdict, basis=basis, outcome=basis))


def sequential(verdict: Verdict, decision: str) -> Verdict:
    """A sequential test's verdict on the samples it took, held to its stop rule's decision
    (bench/stats/sequential.py: "pass", "fail" or "continue")."""
    if decision == "fail":
        return found(verdict, Finding(FindingKind.STOP_FAIL, ""))  # the rule's own account is in the detail
    if decision == "continue":
        return found(verdict, Finding(FindingKind.STOP_UNDECIDED, "stopped before the sequential test decided"))
    return verdict


@dataclass(frozen=True)
class LookBounds:
    """The other bounds a sequential look may need, each computed only when the stop rule asks
    (each is a fresh evaluation of the samples): with each run as the unit, and on the statistic's
    other side."""

    per_run: Callable[[], float | None]
    opposite: Callable[[], float | None]


def sequential_look(verdict: Verdict, *, limit: float | None, comparator: str, unit: str,
                    bounds: LookBounds) -> Verdict | None:
    """A look before a sequential series' last: the verdict the series stops on, or None to go on
    sampling (the stop rule; the plan's looks and their Bonferroni share: bench/stats/sequential.py).

    - INVALID stops: more samples of a measurement that cannot be trusted show nothing.
    - PASS only if the bound also holds with each run as the unit (a rare stall may not have
      shown in a look's first runs, and the consecutive-series bound alone then covers the truth
      less often than it states: benchmarks/bench_sequential_std.py); the verdict keeps the
      larger bound.
    - FAIL when the look's bound on the other side is already past the limit (whatever more
      samples show), or when it failed for something other than the bound (a finding); a bound
      past the limit alone only says "not shown yet".
    - Anything else (inconclusive, insufficient) goes on: more samples may decide.
    """
    within = COMPARATORS[comparator]
    if verdict.outcome is Outcome.INVALID:
        return verdict
    if verdict.outcome is Outcome.PASS:
        per_run = bounds.per_run()
        if per_run is None or limit is None or not within(per_run, limit):
            return None
        if comparator not in ("<=", "<"):
            bound = verdict.bound
        elif verdict.bound is None:  # max() would fail; a sampled statistic's PASS is decided on its bound
            raise TypeError(f"{verdict.name}: a PASS without its confidence bound")
        else:
            bound = max(verdict.bound, per_run)
        return verdict.but(bound=bound, extra={"per_inference_bound": per_run},
                           detail=f"{verdict.detail}; each inference as the unit: bound {per_run:.4g} {unit}")
    if verdict.outcome is not Outcome.FAIL:
        return None
    if verdict.bound is None or limit is None or within(verdict.bound, limit):
        return verdict  # the bound is within the limit, yet it failed: for something other than the bound
    opposite = bounds.opposite()
    if opposite is None or within(opposite, limit):
        return None
    return verdict.but(extra={"settling_bound": opposite},
                       detail=f"{verdict.detail}; settled: the opposite bound {opposite:.4g} {unit} is past "
                              f"the limit too")


# --------------------------------------------------------------------------- the basis: a statistic's decision

def statistic_outcome(bound: float | None, limit: float | None, comparator: str, *, n: int, n_required: int,
                      runs: int = 1, min_runs: int = 0, tolerance: float | None = None,
                      unit: str = "") -> tuple[Outcome, str]:
    """The basis: a statistic against the limit on its confidence bound, (outcome, why) — INSUFFICIENT
    below the sample or run count or without a bound, INFO with no limit, else PASS or FAIL; with
    comparator "==" and a tolerance, |bound - limit| <= tolerance."""
    if comparator == "==" and tolerance is not None and limit is not None and bound is not None:
        ok = abs(bound - limit) <= tolerance
        return census(ok), f"|{bound:g} - {limit:g}| {'<=' if ok else '>'} {tolerance:g} {unit}"
    if n < n_required or runs < min_runs:
        why = f"{n} samples, {n_required} needed" if n < n_required else f"{runs} runs, {min_runs} needed"
        return Outcome.INSUFFICIENT, f"insufficient: {why}"
    if limit is None:
        return Outcome.INFO, ""
    if bound is None or (isinstance(bound, float) and math.isnan(bound)):
        return Outcome.INSUFFICIENT, "insufficient: no confidence bound at this sample size"
    return (Outcome.PASS if COMPARATORS[comparator](bound, limit) else Outcome.FAIL), ""


def decide_statistic(*, name: str, unit: str, limit: float | None, comparator: str, statistic: str, n: int,
                     value: float | None, bound: float | None, n_required: int, confidence: float | None = None,
                     detail: str = "", extra: Mapping[str, object] | None = None, runs: int = 1,
                     min_runs: int = 0, tolerance: float | None = None) -> Verdict:
    """A statistic's verdict (bench/stats/verdicts.py computes value and bound), decided."""
    outcome, why = statistic_outcome(bound, limit, comparator, n=n, n_required=n_required, runs=runs,
                                     min_runs=min_runs, tolerance=tolerance, unit=unit)
    return decide(Verdict(name, value, unit, outcome, limit, comparator, statistic, bound, confidence, n, n_required,
                          "; ".join(part for part in (why, detail) if part), extra=dict(extra or {})))


def invalid_statistic(*, name: str, unit: str, limit: float | None, comparator: str, statistic: str, n: int,
                      why: str, confidence: float | None = None) -> Verdict:
    """A statistic that cannot be computed from its samples (NaN, infinite, impossible counts)."""
    return Verdict(name, None, unit, Outcome.INVALID, limit, comparator, statistic, None, confidence, n,
                   detail=f"invalid: {why}")


def census(passed: bool) -> Outcome:
    """The outcome of a check that is a census or the bench's own computation (no statistic)."""
    return Outcome.PASS if passed else Outcome.FAIL


def compare(name: str, value: float | None, unit: str, limit: float | None, comparator: str = "<=",
            **fields: Unpack[VerdictOptions]) -> Verdict:
    """A single-value check (no sampling statistics): pass when `value comparator limit`."""
    kill_point("verdict")
    if comparator not in COMPARATORS:
        raise ValueError(f"unknown comparator {comparator!r}; use one of {sorted(COMPARATORS)}")
    if value is None or (isinstance(value, float) and math.isnan(value)):
        outcome = Outcome.INVALID
    elif limit is None:
        outcome = Outcome.INFO
    else:
        outcome = census(COMPARATORS[comparator](value, limit))
    return decide(Verdict(name, value, unit, outcome, limit, comparator, **fields))


def recorded(name: str, value: float | None, unit: str, **fields: Unpack[VerdictOptions]) -> Verdict:
    """A value the bench records beside the claims and does not judge (no limit: a hysteresis, the
    phone's own sensor, a counter this runtime does not expose, so possibly no value at all): INFO,
    then the rules like any verdict. Unlike `compare`, a missing value is not INVALID: nothing
    was claimed for it."""
    return decide(Verdict(name, value, unit, Outcome.INFO, **fields))
