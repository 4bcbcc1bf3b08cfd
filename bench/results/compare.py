"""Did tonight's build regress? One run's statistics against a baseline run's, per claim and model.

For each measured statistic (a verdict's value, with the standard error its own confidence bound
or uncertainty budget gives) the comparison pools a model's phones (the mean of their values; a
claim is about a runtime build on a phone model) and, beside it, compares phone by phone. The
difference comes with a 95 % confidence interval and a two-sided p-value; Holm's step-down
correction over every model-level comparison of the night keeps the probability of any false
alarm at or below ALPHA, whatever the number of claims and models. A comparison is *regressed*
when the corrected test says the change is real and it is worse than the practical threshold the
SLA entry states (`parameters.regression`, e.g. "5 %"; 5 % when unstated), *improved* when real
and better by the threshold, *unchanged* otherwise. The direction of "worse" is the limit's
(`<=`: higher is worse). Statistics without a stated uncertainty are listed, not called.

Each comparison also carries what the nightly hands over: the build range of its phone model
(the baseline's builds → tonight's, from the runs' phone records: bench/results/handover.py) and
what its gate could see on this night (the change it detects with 95 % power, and whether a change
of its threshold's size passes most nights unseen: bench/results/detectable.py).

The standard error of a verdict is read from its one-sided confidence bound, (bound − value) /
z(confidence), or from its expanded uncertainty (k = 2): the run-level uncertainty its check
computed with its own dependence model (block bootstrap, order statistics), so dependent samples
are not treated as independent here.
"""
from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from scipy import stats

from ..specs.claims import claim_for
from .builds import phone_build, phone_model, run_builds
from .detectable import Detectable, detectable
from .handover import BuildRange

ALPHA = 0.05
PERCENTILE = re.compile(r"^p\d+(\.\d+)?$")
DEFAULT_THRESHOLD = 0.05
HIGHER_IS_WORSE = {"<=": True, "<": True, ">=": False, ">": False}
IMPROVED, UNCHANGED, REGRESSED, NOT_CALLED = "improved", "unchanged", "regressed", "not called"


@dataclass(frozen=True)
class Statistic:
    value: float
    se: float | None
    n_phones: int


@dataclass
class Comparison:
    metric: str  # the verdict's name, with its statistic when that is not the usual one (e.g. "first_token_p99 (p90)")
    claim: int | None
    unit: str
    model: str
    phone: str | None  # None: pooled over the model's phones
    baseline: Statistic
    tonight: Statistic
    threshold: float
    higher_is_worse: bool
    p: float | None = None
    p_holm: float | None = None
    call: str = NOT_CALLED
    builds: BuildRange | None = None  # the model's (or phone's) builds, baseline → tonight
    detectable: Detectable | None = None  # set with the call: what this gate could see tonight

    @property
    def difference(self) -> float:
        return self.tonight.value - self.baseline.value

    @property
    def relative(self) -> float | None:
        return self.difference / abs(self.baseline.value) if self.baseline.value else None

    @property
    def se(self) -> float | None:
        if self.baseline.se is None or self.tonight.se is None:
            return None
        return math.hypot(self.baseline.se, self.tonight.se)

    def interval(self, level: float = 0.95) -> tuple[float, float] | None:
        if self.se is None:
            return None
        z = float(stats.norm.ppf(0.5 + level / 2))
        return self.difference - z * self.se, self.difference + z * self.se


@dataclass
class Night:
    comparisons: list[Comparison] = field(default_factory=list)
    alpha: float = ALPHA
    family: int = 0  # the model-level comparisons Holm's correction ran over

    @property
    def regressions(self) -> list[Comparison]:
        return [c for c in self.comparisons if c.phone is None and c.call == REGRESSED]

    @property
    def blind(self) -> list[Comparison]:
        """The model-level gates under which a change of their threshold's size passes most nights unseen."""
        return [c for c in self.comparisons
                if c.phone is None and c.detectable is not None and not c.detectable.sees_threshold]


def verdict_se(v: dict[str, Any]) -> float | None:
    """The standard error a verdict's own uncertainty statement implies (None: it states none, or
    its figure is stated at an ambient it could not be referred to: not like with like)."""
    ambient = (v.get("extra") or {}).get("ambient") or {}
    if "raw_value" in ambient and not ambient.get("applied"):  # an as-read value beside referred ones
        return None
    value, bound, confidence = v.get("value"), v.get("bound"), v.get("confidence")
    if isinstance(bound, (int, float)) and isinstance(confidence, (int, float)) and 0.5 < confidence < 1 \
            and isinstance(value, (int, float)) and bound != value:
        return abs(bound - value) / float(stats.norm.ppf(confidence))
    expanded = (v.get("uncertainty") or {}).get("expanded")
    return float(expanded) / 2.0 if isinstance(expanded, (int, float)) and expanded > 0 else None


def _model(data: dict[str, Any], dut: str) -> str:
    return phone_model((data.get("duts") or {}).get(dut), fallback=dut)


def _statistics(data: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """(label, phone) -> the verdict, for every measured numeric verdict with a limit direction. The
    label is the verdict's name and its statistic, so a nightly's p90 is never compared with a
    release run's p99 of the same claim."""
    found = {}
    for test in data.get("tests") or []:
        for v in test.get("verdicts") or []:
            if isinstance(v.get("value"), (int, float)) and not isinstance(v.get("value"), bool) \
                    and v.get("comparator") in HIGHER_IS_WORSE and v.get("evidence") in ("measured", "corroborated"):
                found[(label(v), str(test.get("dut")))] = v
    return found


def label(v: dict[str, Any]) -> str:
    """A verdict's name, with its percentile in brackets when the name says another (a nightly's
    p90 of first_token_p99 is "first_token_p99 (p90)")."""
    name, statistic = str(v["name"]), str(v.get("statistic") or "")
    return f"{name} ({statistic})" if PERCENTILE.match(statistic) and not name.endswith(statistic) else name


def _pool(values: list[tuple[float, float | None]]) -> Statistic:
    mean = sum(v for v, _ in values) / len(values)
    known = [se for _, se in values if se is not None]
    se = math.sqrt(sum(s * s for s in known)) / len(values) if len(known) == len(values) else None
    return Statistic(mean, se, len(values))


def compare_runs(tonight: dict[str, Any], baseline: dict[str, Any], thresholds: dict[str, float] | None = None,
                 alpha: float = ALPHA) -> Night:
    """Every statistic both runs measured, per model (pooled) and per phone, called as above."""
    return compare_models(tonight, {None: baseline}, thresholds, alpha)


def compare_models(tonight: dict[str, Any], baselines: dict[str | None, dict[str, Any]],
                   thresholds: dict[str, float] | None = None, alpha: float = ALPHA) -> Night:
    """Tonight's run against a baseline run per phone model (key None: for every model without its
    own), as one family: Holm's correction runs once over all of the night's model-level comparisons."""
    night = Night(alpha=alpha)
    for model, baseline in baselines.items():
        only = {model} if model is not None else None
        others = {m for m in baselines if m is not None} if model is None else set()
        night.comparisons.extend(_comparisons(tonight, baseline, thresholds or {}, only, others))
    _call(night)
    return night


def _comparisons(tonight: dict[str, Any], baseline: dict[str, Any], thresholds: dict[str, float],
                 only: set[str] | None, skip: set[str]) -> list[Comparison]:
    now, then = _statistics(tonight), _statistics(baseline)
    wanted = (lambda model: model in only) if only is not None else (lambda model: model not in skip)
    now_duts, then_duts = tonight.get("duts") or {}, baseline.get("duts") or {}
    runs = (_run_id(baseline), _run_id(tonight))
    found: list[Comparison] = []
    by_model: dict[tuple[str, str], dict[str, list]] = defaultdict(lambda: {"now": [], "then": []})
    for (metric, dut), v in now.items():
        model = _model(tonight, dut)
        if not wanted(model):
            continue
        old = then.get((metric, dut))
        by_model[(metric, model)]["now"].append((float(v["value"]), verdict_se(v)))
        if old is not None:
            c = _comparison(v, metric, model, dut, Statistic(float(old["value"]), verdict_se(old), 1),
                            Statistic(float(v["value"]), verdict_se(v), 1), thresholds)
            c.builds = BuildRange(_one(phone_build(then_duts.get(dut))), _one(phone_build(now_duts.get(dut))), *runs)
            found.append(c)
    for (metric, dut), v in then.items():
        by_model[(metric, _model(baseline, dut))]["then"].append((float(v["value"]), verdict_se(v)))
    sample = {metric: v for (metric, _), v in now.items()}
    for (metric, model), sides in sorted(by_model.items()):
        if sides["now"] and sides["then"]:
            c = _comparison(sample[metric], metric, model, None, _pool(sides["then"]), _pool(sides["now"]), thresholds)
            c.builds = BuildRange(tuple(run_builds(baseline, model)), tuple(run_builds(tonight, model)), *runs)
            found.append(c)
    return found


def _run_id(data: dict[str, Any]) -> str | None:
    return str(data["run_id"]) if data.get("run_id") else None


def _one(build: str | None) -> tuple[str, ...]:
    return (build,) if build else ()


def _comparison(v: dict[str, Any], metric: str, model: str, phone: str | None, baseline: Statistic,
                tonight: Statistic, thresholds: dict[str, float]) -> Comparison:
    threshold = thresholds.get(str(v.get("metric") or v["name"]), thresholds.get(str(v["name"]), DEFAULT_THRESHOLD))
    return Comparison(metric, claim_for(v.get("claim"), v.get("metric"), v.get("name")), str(v.get("unit") or ""), model, phone, baseline,
                      tonight, threshold, HIGHER_IS_WORSE[str(v["comparator"])])


def _call(night: Night) -> None:
    """p-values, Holm's correction over the model-level family (phones are shown, not counted)."""
    for c in night.comparisons:
        if c.se and c.se > 0:
            c.p = float(2 * stats.norm.sf(abs(c.difference) / c.se))
    family = sorted((c.p, index, c) for index, c in enumerate(night.comparisons)
                    if c.phone is None and c.p is not None)  # the index keeps equal p-values in order
    running, m = 0.0, len(family)
    night.family = m
    for rank, (p_value, _, c) in enumerate(family):
        running = max(running, min(1.0, (m - rank) * p_value))
        c.p_holm = running
    for c in night.comparisons:
        c.detectable = detectable(c.se, c.baseline.value, c.threshold, m, night.alpha)
        p = c.p_holm if c.phone is None else (min(1.0, c.p * max(m, 1)) if c.p is not None else None)
        if p is None or c.relative is None:
            continue
        worse = (c.difference > 0) == c.higher_is_worse
        if p < night.alpha and abs(c.relative) >= c.threshold:
            c.call = REGRESSED if worse else IMPROVED
        else:
            c.call = UNCHANGED


def parse_threshold(text: object) -> float:
    """`"5 %"`, `"5%"`, `0.05` -> 0.05."""
    if isinstance(text, (int, float)):
        return float(text)
    raw = str(text).strip()
    return float(raw.rstrip("% ").strip()) / 100.0 if raw.endswith("%") else float(raw)
