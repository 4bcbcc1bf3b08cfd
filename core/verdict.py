"""A verdict is data: what was measured, against which limit, how sure, on what evidence, what a
check found that the numbers cannot show, and the outcome. Frozen: a step that adds context (a
profile, a calibration, a reported name) makes a new verdict with `Verdict.but(...)`, so a verdict
already recorded can never change under a report. The outcome is written by one module only,
core/judge.py, from the measurement's own decision (`basis`) and the findings.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:  # annotations only: typing.Unpack is Python 3.11's
    from typing_extensions import Unpack


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
    def worst(cls, outcomes: Iterable[str | Outcome]) -> Outcome | None:
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


class FindingKind(str, Enum):
    """What a check found that its numbers alone cannot show; core/judge.py says what each does."""

    CONTRADICTED = "contradicted"  # the phone's account disagrees with the bench's: FAIL
    NOT_THE_MODELS = "not-the-models-tokens"  # streamed tokens the model would not produce: FAIL
    UNSETTLED = "unsettled"  # the bench could not settle what a PASS needs: no PASS
    INVALID = "invalid"  # the measurement or its condition cannot be trusted: INVALID
    OUTSIDE_VALIDITY = "outside-validity"  # a correction applied outside its valid range: INCONCLUSIVE
    STOP_FAIL = "sequential-fail"  # a sequential test's stop rule decided fail
    STOP_UNDECIDED = "sequential-undecided"  # a sequential test stopped before deciding


@dataclass(frozen=True)
class Finding:
    """One finding of a check, in its words (shown before the verdict's detail)."""

    kind: FindingKind
    detail: str

    def __post_init__(self) -> None:
        if not isinstance(self.kind, FindingKind):
            object.__setattr__(self, "kind", FindingKind(self.kind))

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind.value, "detail": self.detail}


COMPARATORS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt, "==": operator.eq}


@dataclass(frozen=True)
class UncertaintyComponent:
    """One line of an uncertainty budget: a standard uncertainty in the verdict's unit."""

    name: str
    standard: float
    kind: str = "B"  # "A": from the samples' statistics; "B": from specifications, calibration, resolution
    note: str = ""
    # The standard error of the decided statistic from the verdict's own samples: a confidence
    # bound on that statistic already carries it (Uncertainty.beyond_sampling).
    sampling: bool = False

    def to_dict(self) -> dict[str, Any]:
        shown = {"name": self.name, "standard": _finite(self.standard), "kind": self.kind, "note": self.note}
        return {**shown, "sampling": True} if self.sampling else shown


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

    @property
    def beyond_sampling(self) -> float:
        """The expanded uncertainty without the statistic's own sampling error: what a decision
        made at a confidence bound adds, since the bound's confidence already states the rest."""
        if not any(c.sampling for c in self.components):
            return self.expanded
        return self.coverage_factor * math.sqrt(sum(c.standard ** 2 for c in self.components if not c.sampling))

    def to_dict(self) -> dict[str, Any]:
        return {"expanded": _finite(self.expanded), "coverage_factor": self.coverage_factor,
                "components": [c.to_dict() for c in self.components]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Uncertainty:
        return cls(expanded=_float(data.get("expanded")), coverage_factor=float(data.get("coverage_factor", 2.0)),
                   components=tuple(UncertaintyComponent(str(c["name"]), _float(c.get("standard")),
                                                         str(c.get("kind", "B")), str(c.get("note", "")),
                                                         bool(c.get("sampling", False)))
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


class VerdictOptions(TypedDict, total=False):
    """A verdict's fields besides what it measured and its limit (core.judge.compare's keywords)."""

    statistic: str
    bound: float | None
    confidence: float | None
    n: int | None
    n_required: int | None
    detail: str
    metric: str | None
    claim: int | None
    profile: str | None
    description: str
    evidence: Evidence | None
    decision_rule: DecisionRule
    uncertainty: Uncertainty | None
    calibration: Mapping[str, Any] | None
    plot: PlotHint | None
    raw: tuple[str, ...]
    extra: Mapping[str, Any]


class VerdictFields(VerdictOptions, total=False):
    """A verdict's own fields a builder may set or change (never its outcome: core/judge.py's)."""

    name: str
    value: float | None
    unit: str
    limit: float | None
    comparator: str


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
    # What the judge (core/judge.py) decides from: the measurement's own decision, the findings and
    # the evidence the SLA entry requires; `ruling` holds the notes of the rules that changed it.
    basis: Outcome | None = None  # None: the outcome given at construction
    findings: tuple[Finding, ...] = ()
    evidence_required: str | None = None  # the entry's `evidence` (core.judge.EVIDENCE_ACCEPTED)
    ruling: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "outcome", Outcome.parse(self.outcome))
        object.__setattr__(self, "basis", self.outcome if self.basis is None else Outcome.parse(self.basis))
        object.__setattr__(self, "findings", tuple(f if isinstance(f, Finding) else Finding(**f)
                                                   for f in self.findings))
        object.__setattr__(self, "ruling", tuple(self.ruling))
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

    @property
    def explanation(self) -> str:
        """The judge's notes, then the check's detail: what a reader is shown."""
        return "; ".join(part for part in (*self.ruling, self.detail) if part)

    def but(self, **changes: Unpack[VerdictFields]) -> Verdict:
        """A copy with some fields changed (never the outcome: core/judge.py decides it); `extra=`
        entries are merged into the existing ones."""
        if {"outcome", "basis", "findings", "ruling"} & changes.keys():
            raise TypeError("a verdict's outcome is decided by core/judge.py: add a finding with judge.found()")
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
            elif f.name == "findings":
                value = [finding.to_dict() for finding in value]
            elif isinstance(value, Mapping):
                value = dict(value)
            elif isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, float):
                value = _finite(value)  # JSON has no NaN/inf
            out[f.name] = value
        out["detail"] = self.explanation  # a reader of results.json sees what a report shows
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        if kwargs.get("uncertainty") is not None:
            kwargs["uncertainty"] = Uncertainty.from_dict(kwargs["uncertainty"])
        kwargs["plot"] = PlotHint.from_dict(kwargs.get("plot"))
        shown = "; ".join(kwargs.get("ruling") or ())
        if shown and str(kwargs.get("detail", "")).startswith(shown):  # to_dict put the notes first
            kwargs["detail"] = str(kwargs["detail"])[len(shown):].removeprefix("; ")
        return cls(**kwargs)


VERDICT_FIELDS = tuple(f.name for f in fields(Verdict))


def verdicts_of(test: Mapping[str, Any]) -> list[Verdict]:
    """A test record's verdicts as results.json holds them, read back typed (lossless: to_dict and
    from_dict round-trip) — what every reader of a run renders and counts from."""
    return [Verdict.from_dict(v) for v in test.get("verdicts") or ()]


def _finite(value: float | None) -> float | None:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _float(value: float | str | None) -> float:
    return float("nan") if value is None else float(value)
