"""A verdict is data: what was measured, against which limit, how sure, on what evidence, and the
outcome. Frozen: a step that adds context (a profile, a calibration, a reported name) makes a new
verdict with `Verdict.but(...)`, so a verdict already recorded can never change under a report.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from types import MappingProxyType
from typing import Any

from .killpoints import kill_point


class Outcome(str, Enum):
    """The one meaning of a verdict's outcome, used by results, summary, judge, matrix and report."""

    PASS = "pass"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"  # guarded decision: the value is within its uncertainty of the limit
    INSUFFICIENT = "insufficient-samples"  # never a pass: more data is needed to decide
    INVALID = "invalid"  # the measurement could not be trusted (clipped, NaN, probe fault)
    INFO = "info"  # recorded, no limit applies

    @property
    def is_good(self) -> bool:
        """Whether this outcome lets a test, a unit or a matrix cell count as good."""
        return self in (Outcome.PASS, Outcome.INFO)

    @property
    def severity(self) -> int:
        """Order for "the worst of several": info < pass < inconclusive < insufficient < invalid < fail."""
        return _SEVERITY[self]

    @classmethod
    def parse(cls, text: str | Outcome) -> Outcome:
        try:
            return cls(text)
        except ValueError:
            raise ValueError(f"unknown verdict outcome {text!r}; use one of "
                             f"{', '.join(o.value for o in cls)}") from None

    @classmethod
    def worst(cls, outcomes: Any) -> Outcome | None:
        parsed = [cls.parse(o) for o in outcomes]
        return max(parsed, key=lambda o: o.severity) if parsed else None


def severity_of(text: str, unknown: int = 5) -> int:
    """The severity of an outcome as stored (a string); an unknown word counts as a failure."""
    try:
        return Outcome(text).severity
    except ValueError:
        return unknown


GOOD_OUTCOMES = ("pass", "info")  # Outcome.is_good, as the strings results.json holds
BAD_OUTCOMES = ("inconclusive", "insufficient-samples", "invalid", "fail")

_SEVERITY = {Outcome.INFO: 0, Outcome.PASS: 1, Outcome.INCONCLUSIVE: 2, Outcome.INSUFFICIENT: 3,
             Outcome.INVALID: 4, Outcome.FAIL: 5}


class TestOutcome(str, Enum):
    """A bench test's outcome (pytest's phases folded into one word)."""

    __test__ = False  # not a pytest test class

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    SKIPPED = "skipped"

    @property
    def is_good(self) -> bool:
        return self is TestOutcome.PASSED

    @property
    def is_bad(self) -> bool:
        return self in (TestOutcome.FAILED, TestOutcome.ERROR)


class Evidence(str, Enum):
    """What a verdict rests on."""

    MEASURED = "measured"  # an instrument, or the bench's own clock or computation
    CORROBORATED = "corroborated"  # the DUT's report, checked against an independent measurement
    REPORTED = "reported"  # only the phone's word (any part of it): shown and kept, never a PASS
    SELF_REPORTED = "reported"  # the former name of REPORTED

    @classmethod
    def _missing_(cls, value: object) -> Evidence | None:
        return cls.REPORTED if value == "self-reported" else None  # results stored before the rename

    @property
    def independent(self) -> bool:
        return self is not Evidence.REPORTED


class DecisionRule(str, Enum):
    """How a value and its uncertainty are compared to a limit (ILAC-G8)."""

    SIMPLE = "simple"  # compare the value (or confidence bound) to the limit
    GUARDED = "guarded"  # PASS only when value + U meets the limit, FAIL only when value - U misses it


COMPARATORS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt, "==": operator.eq}


@dataclass(frozen=True)
class UncertaintyComponent:
    """One line of an uncertainty budget: a standard uncertainty in the verdict's unit."""

    name: str
    standard: float
    kind: str = "B"  # "A": from the samples' statistics; "B": from specifications, calibration, resolution
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "standard": _finite(self.standard), "kind": self.kind, "note": self.note}


@dataclass(frozen=True)
class Uncertainty:
    """Expanded uncertainty U = k * u_c, with the budget it was combined from (root sum of squares)."""

    expanded: float
    coverage_factor: float = 2.0
    components: tuple[UncertaintyComponent, ...] = ()

    @classmethod
    def combine(cls, components: list[UncertaintyComponent] | tuple[UncertaintyComponent, ...],
                coverage_factor: float = 2.0) -> Uncertainty:
        combined = math.sqrt(sum(c.standard ** 2 for c in components))
        return cls(expanded=coverage_factor * combined, coverage_factor=coverage_factor,
                   components=tuple(components))

    @property
    def combined(self) -> float:
        return self.expanded / self.coverage_factor

    def to_dict(self) -> dict[str, Any]:
        return {"expanded": _finite(self.expanded), "coverage_factor": self.coverage_factor,
                "components": [c.to_dict() for c in self.components]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Uncertainty:
        return cls(expanded=_float(data.get("expanded")), coverage_factor=float(data.get("coverage_factor", 2.0)),
                   components=tuple(UncertaintyComponent(str(c["name"]), _float(c.get("standard")),
                                                         str(c.get("kind", "B")), str(c.get("note", "")))
                                    for c in data.get("components", ())))


@dataclass(frozen=True)
class PlotHint:
    """How the report draws a verdict's raw data; presentation only, never used in a decision."""

    kind: str  # samples | trace | sweep
    labels: tuple[str, ...] = ()
    x_label: str | None = None
    y_label: str | None = None
    average: float | None = None  # a horizontal line (e.g. a sustained average)
    log_y: bool = False
    limit_axis: str = "y"
    state_label: str | None = None
    steady: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return {f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> PlotHint | None:
        if not data:
            return None
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["labels"] = tuple(str(x) for x in kwargs.get("labels") or ())
        return cls(**kwargs)


@dataclass(frozen=True)
class Verdict:
    name: str
    value: float | None
    unit: str
    outcome: Outcome
    limit: float | None = None
    comparator: str = "<="
    statistic: str = "value"  # e.g. p99, std, mean, max, rate
    bound: float | None = None  # the confidence bound the decision was made on
    confidence: float | None = None
    n: int | None = None
    n_required: int | None = None
    detail: str = ""
    metric: str | None = None  # the SLA profile's metric id, when the reported name differs
    claim: int | None = None  # row of the product's claims table (docs/claims.md)
    profile: str | None = None  # the SLA profile that judged it
    description: str = ""
    evidence: Evidence | None = None  # None: the check did not say (never enough where evidence is required)
    decision_rule: DecisionRule = DecisionRule.SIMPLE
    uncertainty: Uncertainty | None = None
    calibration: Mapping[str, Any] | None = None  # the instruments' calibration state behind the value
    plot: PlotHint | None = None
    raw: tuple[str, ...] = ()  # raw-data names, then files relative to the run folder once saved
    extra: Mapping[str, Any] = field(default_factory=dict)  # check-specific facts (measured, reported, …)

    def __post_init__(self) -> None:
        object.__setattr__(self, "outcome", Outcome.parse(self.outcome))
        if self.evidence is not None and not isinstance(self.evidence, Evidence):
            object.__setattr__(self, "evidence", Evidence(self.evidence))
        if not isinstance(self.decision_rule, DecisionRule):
            object.__setattr__(self, "decision_rule", DecisionRule(self.decision_rule))
        if not isinstance(self.raw, tuple):
            object.__setattr__(self, "raw", tuple(self.raw))
        if not isinstance(self.extra, MappingProxyType):
            object.__setattr__(self, "extra", MappingProxyType(dict(self.extra)))

    @property
    def passed(self) -> bool:
        return self.outcome.is_good

    def but(self, **changes: Any) -> Verdict:
        """A copy with some fields changed; `extra=` entries are merged into the existing ones."""
        if "extra" in changes:
            changes["extra"] = {**self.extra, **changes["extra"]}
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Enum):
                value = value.value
            elif isinstance(value, (Uncertainty, PlotHint)):
                value = value.to_dict()
            elif isinstance(value, Mapping):
                value = dict(value)
            elif isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, float):
                value = _finite(value)  # JSON has no NaN/inf
            out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        if kwargs.get("uncertainty") is not None:
            kwargs["uncertainty"] = Uncertainty.from_dict(kwargs["uncertainty"])
        kwargs["plot"] = PlotHint.from_dict(kwargs.get("plot"))
        return cls(**kwargs)


VERDICT_FIELDS = tuple(f.name for f in fields(Verdict))


def reported_never_passes(verdict: Verdict) -> Verdict:
    """The trust boundary is the whole phone: a PASS resting on its word alone becomes INFO, shown
    and kept, never a PASS (the one place this rule is written; the SLA entry and the record apply it)."""
    if verdict.outcome is not Outcome.PASS or verdict.evidence is not Evidence.REPORTED:
        return verdict
    return verdict.but(outcome=Outcome.INFO,
                       detail=f"reported: only the phone's word, shown and kept, never a PASS; {verdict.detail}"
                       .rstrip("; "))


def held_to_sequential_decision(verdict: Verdict, decision: str) -> Verdict:
    """A sequential test's verdict on the samples it took, held to its stop rule's decision
    (bench/stats/sequential.py: "pass", "fail" or "continue"): a decided FAIL fails even below the
    entry's sample count; a run stopped undecided never passes."""
    if decision == "fail" and verdict.outcome is not Outcome.FAIL:
        return verdict.but(outcome=Outcome.FAIL)  # the rule's own account is in the detail already
    if decision == "continue" and verdict.outcome.is_good:
        return verdict.but(outcome=Outcome.INSUFFICIENT)
    return verdict


def compare(name: str, value: float | None, unit: str, limit: float | None, comparator: str = "<=",
            **kwargs: Any) -> Verdict:
    """A single-value check (no sampling statistics): pass when `value comparator limit`."""
    kill_point("verdict")
    if comparator not in COMPARATORS:
        raise ValueError(f"unknown comparator {comparator!r}; use one of {sorted(COMPARATORS)}")
    if value is None or (isinstance(value, float) and math.isnan(value)):
        outcome = Outcome.INVALID
    elif limit is None:
        outcome = Outcome.INFO
    else:
        outcome = Outcome.PASS if COMPARATORS[comparator](value, limit) else Outcome.FAIL
    return Verdict(name=name, value=value, unit=unit, outcome=outcome, limit=limit,
                   comparator=comparator, **kwargs)


def _finite(value: float | None) -> float | None:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _float(value: Any) -> float:
    return float("nan") if value is None else float(value)


def apply_decision_rule(verdict: Verdict, rule: DecisionRule | str) -> Verdict:
    """Re-decide a verdict by `rule`. Guarded acceptance needs the verdict's expanded uncertainty U:
    PASS only when (bound or value) + U meets the limit, FAIL only when (bound or value) - U misses
    it, otherwise INCONCLUSIVE; a guarded verdict without an uncertainty is INCONCLUSIVE, never a PASS.
    """
    rule = DecisionRule(rule)
    verdict = verdict.but(decision_rule=rule)
    if rule is DecisionRule.SIMPLE or verdict.outcome not in (Outcome.PASS, Outcome.FAIL) or verdict.limit is None:
        return verdict
    if verdict.uncertainty is None or not math.isfinite(verdict.uncertainty.expanded):
        return verdict.but(outcome=Outcome.INCONCLUSIVE,
                           detail=f"guarded decision without an uncertainty; {verdict.detail}".rstrip("; "))
    x = verdict.bound if verdict.bound is not None else verdict.value
    if x is None:
        return verdict
    u = verdict.uncertainty.expanded
    test = COMPARATORS[verdict.comparator]
    if verdict.comparator in ("<=", "<"):
        passes, fails = test(x + u, verdict.limit), not test(x - u, verdict.limit)
    elif verdict.comparator in (">=", ">"):
        passes, fails = test(x - u, verdict.limit), not test(x + u, verdict.limit)
    else:  # "==": within U of the value on both sides
        passes, fails = abs(x - verdict.limit) <= 0 and u == 0, abs(x - verdict.limit) > u
    outcome = Outcome.PASS if passes else Outcome.FAIL if fails else Outcome.INCONCLUSIVE
    if outcome is Outcome.INCONCLUSIVE:
        detail = (f"within its expanded uncertainty ±{u:.4g} {verdict.unit} of the limit (guarded decision); "
                  f"{verdict.detail}").rstrip("; ")
        return verdict.but(outcome=outcome, detail=detail)
    return verdict.but(outcome=outcome)
