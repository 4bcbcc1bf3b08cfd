"""A verdict is data: what was measured, against which limit, how sure, and the outcome."""
from __future__ import annotations

import math
import operator
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any


class Outcome(str, Enum):
    PASS = "pass"
    FAIL = "fail"
    INSUFFICIENT = "insufficient-samples"  # never a pass: more data is needed to decide
    INVALID = "invalid"  # the measurement could not be trusted (clipped, NaN, probe fault)
    INFO = "info"  # recorded, no limit applies


COMPARATORS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt, "==": operator.eq}


@dataclass
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
    raw: list[str] = field(default_factory=list)  # raw-data files (relative to the run folder)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.outcome in (Outcome.PASS, Outcome.INFO)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["outcome"] = self.outcome.value
        for key in ("value", "bound", "limit"):
            if isinstance(data[key], float) and not math.isfinite(data[key]):
                data[key] = None  # JSON has no NaN/inf
        return data


def compare(name: str, value: float | None, unit: str, limit: float | None, comparator: str = "<=",
            **kwargs: Any) -> Verdict:
    """A single-value check (no sampling statistics): pass when `value comparator limit`."""
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
