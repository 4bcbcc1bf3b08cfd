"""SLA profiles: the product's targets as TOML entries that evaluate samples into verdicts.

A profile is a TOML file (sla_profiles/README.md has the schema):

    name = "default"
    description = "..."
    extends = "other"            # optional: start from another profile, override field by field

    [metrics.voice_latency_p99]
    statistic = "percentile"     # percentile | std | mean | proportion | max | min | count | value
    p = 0.99
    comparator = "<="
    limit = 410
    unit = "ms"
    confidence = 0.95
    min_samples = 299

Usage from a check:

    entry = load_profile("default").get("voice_latency_p99")
    verdict = entry.evaluate(latencies_ms)          # -> phonebench.core.verdict.Verdict
"""
from __future__ import annotations

import logging
import math
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypedDict, TypeGuard, cast

import numpy as np

from phonebench.core.paths import data_dir
from ..stats import verdicts as stats
from phonebench.core.decoding import read_text
from phonebench.core.errors import ConfigError
from phonebench.core.killpoints import kill_point
from phonebench.core import judge
from phonebench.core.judge import EVIDENCE_ACCEPTED
from phonebench.core.verdict import (COMPARATORS, DecisionRule, Evidence, Finding, FindingKind, PlotHint, Uncertainty,
                                     Verdict)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - python 3.10
    import tomli as tomllib

log = logging.getLogger(__name__)

PROFILE_DIR = data_dir("sla_profiles")
SAMPLED = ("percentile", "std", "mean", "proportion")  # statistics that carry a confidence
STATISTICS = SAMPLED + ("max", "min", "count", "value")
TOP_LEVEL = ("name", "description", "extends", "purpose", "reported_parts", "run_after", "metrics")
# What a profile asks: `demonstration` (each claim shown per phone at its confidence: release) or
# `regression` (the nightly: sizes chosen for the change each gate must detect against a baseline
# by `bench compare`; its entries relax the base on purpose, so that is not warned about).
PURPOSES = ("demonstration", "regression")
# Whether a claim resting partly on the phone's word (some verdicts reported, or judged on a
# condition only the phone vouches for) may pass the run: `qualified` (it passes, shown "pass*"
# with how much is reported, in the grid, the summary and junit) or `held` (`bench run` exits
# REPORTED_PARTS_HELD although every test passed).
REPORTED_PARTS = ("qualified", "held")
FIELDS = ("description", "claim", "statistic", "comparator", "limit", "unit", "confidence", "min_samples",
          "p", "independence", "min_runs", "tolerance", "conditions", "parameters", "evidence", "decision_rule")
REQUIRED = ("statistic", "comparator", "limit", "unit")
TEXT_FIELDS = ("statistic", "comparator", "unit", "independence", "evidence", "decision_rule", "description")
CLAIMS = range(1, 15)  # the rows of the claims table in docs/claims.md
# Units whose quantity can be below zero; any other (durations, power, counts, fractions) cannot,
# so a negative limit there is a typo that would pass or fail everything.
SIGNED_UNITS = frozenset({"degC", "°C", "C", "dB", "dBm", "dBV", "dBFS"})
METRIC_ID = re.compile(r"^[a-z][a-z0-9_]*$")


class _Common(TypedDict):
    """The arguments every statistic's verdict takes from an entry."""

    limit: float
    comparator: str
    min_samples: int


@dataclass(frozen=True)
class SlaEntry:
    """One target: what statistic of which samples must meet which limit, how surely."""

    metric: str
    statistic: str
    comparator: str
    limit: float
    unit: str
    description: str = ""
    claim: int | None = None  # row of the claims table in docs/claims.md
    confidence: float | None = None
    min_samples: int = 0
    p: float | None = None
    independence: stats.Independence = "sample"
    min_runs: int = stats.MIN_RUNS
    tolerance: float | None = None
    conditions: Mapping[str, Any] = field(default_factory=dict)  # must hold while measuring
    parameters: Mapping[str, Any] = field(default_factory=dict)  # how to measure (informative)
    evidence: str = "any"  # the least independent evidence a PASS may rest on (EVIDENCE_ACCEPTED)
    decision_rule: DecisionRule = DecisionRule.SIMPLE
    profile: str = ""
    source: str = ""  # file that last defined or overrode this entry

    @property
    def n_required(self) -> int:
        """Samples a verdict needs (with independent samples), the profile's minimum included."""
        if self.statistic == "percentile":
            return max(self.min_samples, stats.min_samples_percentile(self.p, self.confidence))
        if self.statistic == "proportion" and 0.0 < self.limit < 1.0:
            return max(self.min_samples, stats.min_samples_proportion(self.limit, self.confidence, self.comparator))
        if self.statistic in ("std", "mean"):
            return max(self.min_samples, 2)
        return max(self.min_samples, 1)

    def evaluate(self, data: Any, *, evidence: Evidence | None = None, uncertainty: Uncertainty | None = None,
                 name: str | None = None, raw: str | Sequence[str] = (), plot: str | PlotHint | None = None,
                 n: int | None = None, bound: float | None = None, findings: Sequence[Finding] = (),
                 detail: str | None = None, detail_prefix: str = "", detail_suffix: str = "",
                 extra: Mapping[str, Any] | None = None, **context: Any) -> Verdict:
        """Verdict for samples (array, or list of runs), a value, a count, or (successes, n).

        `evidence` says what the data rests on and `uncertainty` is the value's expanded
        uncertainty (for the guarded decision rule). Other keyword arguments are the measurement
        context checked against `conditions` (e.g. ``gpu_load=0.82`` for ``gpu_load_min = 0.70``);
        a condition that is not shown to hold makes the verdict INVALID, not a pass. A PASS on
        evidence weaker than the entry requires becomes INCONCLUSIVE: the claim is not shown.

        The keywords between `uncertainty` and `**context` are the verdict's own data, so a check
        builds each verdict in this one call (the record step then only points it at saved files):
        its reported `name` (where it differs, the metric id is kept in `metric`), the `raw` data
        names it points at, the `plot` hint (a kind or a PlotHint), `n`, the decision's `bound` and
        `extra` facts. They are applied after the statistic, the conditions, the decision rule and
        the evidence requirement have decided, so they never change how the numbers are judged.
        `findings` are the check's own findings that the numbers cannot show (a contradiction, an
        unusable run); core/judge.py decides the outcome from all of it, in its stated order.
        `detail` replaces the statistic's detail, `detail_prefix` and `detail_suffix` join it with "; ".
        """
        if "outcome" in context:  # not a condition: the judge decides outcomes
            raise TypeError(f"{self.metric}: evaluate() takes a check's findings, never an outcome")
        kill_point("verdict")  # a verdict being computed (core/killpoints.py), as judge.compare() has it
        verdict = self._dispatch(data)
        problems = self._unmet_conditions(context)
        unmet = (Finding(FindingKind.INVALID, f"invalid: {'; '.join(problems)}"),) if problems else ()
        given = (raw,) if isinstance(raw, str) else tuple(raw)
        text = verdict.detail if detail is None else detail
        text = "; ".join(part for part in (detail_prefix, text, detail_suffix) if part)
        shown = verdict.name if name is None else name  # reported under another name: `metric` keeps the id
        # One replace, not a chain of copies: the entry's requirements and the verdict's own data on
        # top of the decided numbers, then the judge.
        return judge.decide(replace(
            verdict, name=shown, metric=verdict.metric if shown == verdict.name else self.metric,
            profile=self.profile, claim=self.claim, description=self.description, evidence=evidence,
            uncertainty=uncertainty, decision_rule=self.decision_rule, evidence_required=self.evidence,
            findings=(*verdict.findings, *unmet, *findings),
            raw=(*given, *[r for r in verdict.raw if r not in given]),
            plot=verdict.plot if plot is None else PlotHint(plot) if isinstance(plot, str) else plot,
            n=verdict.n if n is None else n, bound=verdict.bound if bound is None else bound, detail=text,
            extra={**verdict.extra, "conditions": dict(self.conditions),
                   "context": {k: _plain(v) for k, v in context.items()}, **(extra or {})}))

    def _dispatch(self, data: Any) -> Verdict:
        common = _Common(limit=self.limit, comparator=self.comparator, min_samples=self.min_samples)
        # _entry accepts a sampled statistic only with its confidence, and a percentile only with its p.
        confidence, p = cast(float, self.confidence), cast(float, self.p)
        if self.statistic == "percentile":
            return stats.percentile_verdict(self.metric, data, p=p, unit=self.unit, confidence=confidence,
                                            independence=self.independence, min_runs=self.min_runs, **common)
        if self.statistic == "std":
            return stats.std_verdict(self.metric, data, unit=self.unit, confidence=confidence,
                                     independence=self.independence, min_runs=self.min_runs, **common)
        if self.statistic == "mean":
            return stats.mean_verdict(self.metric, data, unit=self.unit, confidence=confidence,
                                      independence=self.independence, min_runs=self.min_runs, **common)
        if self.statistic == "proportion":
            successes, n = _successes(data, self.metric)
            return stats.proportion_verdict(self.metric, successes, n, unit=self.unit,
                                            confidence=confidence, **common)
        if self.statistic in ("max", "min"):
            return stats.extreme_verdict(self.metric, data, unit=self.unit,
                                         statistic="max" if self.statistic == "max" else "min", **common)
        if self.statistic == "count":
            return stats.count_verdict(self.metric, data, unit=self.unit, **common)
        value = None if data is None else float(np.asarray(data, dtype=float))
        return stats.value_verdict(self.metric, value, limit=self.limit, unit=self.unit,
                                   comparator=self.comparator, tolerance=self.tolerance)

    def _unmet_conditions(self, context: Mapping[str, Any]) -> list[str]:
        problems = []
        for key, want in self.conditions.items():
            name, op = (key[:-4], ">=") if key.endswith("_min") else (key[:-4], "<=") if key.endswith("_max") \
                else (key, "==")
            if name not in context:
                problems.append(f"condition {name} {op} {want!r} not shown (pass {name}=... to evaluate)")
            else:
                try:
                    met = bool(COMPARATORS[op](context[name], want))
                except TypeError:
                    met = False
                if not met:
                    problems.append(f"condition {name} {op} {want!r} not met ({name} = {context[name]!r})")
        return problems


@dataclass(frozen=True)
class SlaProfile:
    name: str
    description: str
    path: Path
    entries: Mapping[str, SlaEntry]
    chain: tuple[Path, ...] = ()  # files this profile was built from, base first
    loosened: tuple[str, ...] = ()  # overrides that relax the base profile (logged as warnings)
    purpose: str = "demonstration"  # PURPOSES
    reported_parts: str = "qualified"  # REPORTED_PARTS
    # {test function: the test function it runs right after}: a run on this profile moves the one to
    # follow the other (the rest keep their order), so the heat one test leaves in the phone
    # shortens the next one's warm-up. Empty: the suites' own order.
    run_after: Mapping[str, str] = field(default_factory=dict)

    def get(self, metric: str) -> SlaEntry:
        try:
            return self.entries[metric]
        except KeyError:
            raise ConfigError(f"SLA profile {self.name!r} ({self.path}) has no metric {metric!r}",
                              hint=f"known metrics: {', '.join(sorted(self.entries))}") from None

    def pick(self, **metrics: str) -> dict[str, SlaEntry]:
        """Several entries by metric id, keyed by the names a check's parameters give them:
        ``voice_check(scope, stimulus, device, **profile.pick(latency_p99="voice_latency_p99", ...))``."""
        return {name: self.get(metric) for name, metric in metrics.items()}

    def __contains__(self, metric: object) -> bool:
        return metric in self.entries

    def __iter__(self) -> Iterator[SlaEntry]:
        return iter(self.entries.values())

    def __len__(self) -> int:
        return len(self.entries)


def load_profile(name_or_path: str | Path, search: tuple[Path, ...] = ()) -> SlaProfile:
    """Load a profile by name (from `search` dirs, then sla_profiles/) or by path to a .toml file."""
    path = _resolve(name_or_path, search, referrer=None)
    raw, provenance, loosened, files = _load_chain(path, search)
    entries = {metric: _entry(metric, table, provenance[metric], raw["name"])
               for metric, table in raw["metrics"].items()}
    purpose = raw.get("purpose", "demonstration")
    for note in loosened:  # a regression profile's sizes are chosen for its gates' power, not a demonstration
        log.log(logging.INFO if purpose == "regression" else logging.WARNING,
                "SLA profile %s loosens its base: %s", path, note)
    return SlaProfile(name=raw["name"], description=raw.get("description", ""), path=path,
                      entries=MappingProxyType(entries), chain=tuple(files),
                      loosened=tuple(loosened), purpose=purpose,
                      reported_parts=raw.get("reported_parts", "qualified"),
                      run_after=MappingProxyType(dict(raw.get("run_after", {}))))


def available_profiles(search: tuple[Path, ...] = ()) -> list[str]:
    """Profile names in `search` and sla_profiles/: the TOML files there that are SLA profiles (a
    station file's folder also holds station files, which are not)."""
    return sorted({p.stem for d in (*search, PROFILE_DIR) if d.is_dir() for p in d.glob("*.toml")
                   if d == PROFILE_DIR or _is_profile(p)})


def _is_profile(path: Path) -> bool:
    try:
        doc = _read(path)
    except ConfigError:
        return False
    return bool(doc) and set(doc) <= set(TOP_LEVEL) and ("metrics" in doc or "extends" in doc)


# --------------------------------------------------------------------------- loading

def _load_chain(path: Path, search: tuple[Path, ...], seen: tuple[Path, ...] = ()
                ) -> tuple[dict, dict, list[str], list[Path]]:
    """Merged raw profile, per-metric provenance {field: file}, loosenings, files base first."""
    if path in seen:
        raise ConfigError(f"SLA profile {path}: 'extends' loops back ({' -> '.join(map(str, seen + (path,)))})",
                          hint="remove the cycle in the 'extends' fields")
    doc = _read(path)
    unknown = set(doc) - set(TOP_LEVEL)
    if unknown:
        raise ConfigError(f"SLA profile {path}: unknown top-level field(s) {sorted(unknown)}",
                          hint=f"expected only {', '.join(TOP_LEVEL)}; metric tables go under [metrics.<id>]")
    if "purpose" in doc and doc["purpose"] not in PURPOSES:
        raise ConfigError(f"SLA profile {path}: field 'purpose' must be one of {', '.join(PURPOSES)}, got "
                          f"{doc['purpose']!r}", hint='e.g. purpose = "regression" for a nightly profile')
    if "reported_parts" in doc and doc["reported_parts"] not in REPORTED_PARTS:
        raise ConfigError(f"SLA profile {path}: field 'reported_parts' must be one of {', '.join(REPORTED_PARTS)}, "
                          f"got {doc['reported_parts']!r}",
                          hint='reported_parts = "held" stops a run whose claims pass partly on the phone\'s word')
    if "run_after" in doc and not (isinstance(doc["run_after"], dict) and all(
            isinstance(t, str) and t.isidentifier() for pair in doc["run_after"].items() for t in pair)):
        raise ConfigError(f"SLA profile {path}: field 'run_after' must map test function names to test function "
                          f"names, got {doc['run_after']!r}",
                          hint='e.g. run_after = { test_sustained_use = "test_token_latency_under_gpu_load" }')
    for key in ("name", "description"):
        if key in doc and not isinstance(doc[key], str):
            raise ConfigError(f"SLA profile {path}: field {key!r} must be a string, got {doc[key]!r}",
                              hint=f'e.g. {key} = "acceptance"')
    metrics = doc.get("metrics", {})
    if not isinstance(metrics, dict) or not all(isinstance(t, dict) for t in metrics.values()):
        raise ConfigError(f"SLA profile {path}: 'metrics' must hold tables [metrics.<id>]",
                          hint="write each target as a [metrics.<id>] table")
    if "extends" in doc:
        if not isinstance(doc["extends"], str):
            raise ConfigError(f"SLA profile {path}: field 'extends' must be a profile name or path (a string)",
                              hint="e.g. extends = \"default\"")
        base_path = _resolve(doc["extends"], search, referrer=path)
        raw, provenance, loosened, files = _load_chain(base_path, search, seen + (path,))
    else:
        raw, provenance, loosened, files = {"metrics": {}}, {}, [], []
    for metric, table in metrics.items():
        if not METRIC_ID.match(metric):
            raise ConfigError(f"SLA profile {path}, entry {metric!r}: metric ids are lower_snake_case",
                              hint=_where(path, metric, None))
        if metric in raw["metrics"]:
            loosened += _loosenings(metric, raw["metrics"][metric], table)
        else:
            raw["metrics"][metric], provenance[metric] = {}, {"__table__": path}
        merged = raw["metrics"][metric]
        for key, value in table.items():
            if key in ("conditions", "parameters") and isinstance(value, dict) and isinstance(merged.get(key), dict):
                merged[key] = {**merged[key], **value}
            else:
                merged[key] = value
            provenance[metric][key] = path
    raw["name"] = doc.get("name", path.stem)
    for key in ("purpose", "reported_parts", "run_after"):
        if key in doc:
            raw[key] = doc[key]
    if "description" in doc:
        raw["description"] = doc["description"]
    return raw, provenance, loosened, files + [path]


def _read(path: Path) -> dict:
    text = read_text(path, "SLA profile")  # missing, unreadable, binary or not UTF-8: ConfigError
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:  # its message carries "(at line L, column C)"
        raise ConfigError(f"SLA profile {path}: TOML syntax error: {exc}",
                          hint="fix the TOML at that line (strings need quotes, tables [metrics.<id>])") from exc
    except RecursionError:
        raise ConfigError(f"SLA profile {path}: TOML nested too deeply", hint="a profile is flat tables") from None


def _resolve(name_or_path: str | Path, search: tuple[Path, ...], referrer: Path | None) -> Path:
    text = str(name_or_path)
    if isinstance(name_or_path, Path) or text.endswith(".toml") or "/" in text:
        path = Path(text)
        if not path.is_absolute() and referrer is not None:
            path = referrer.parent / path
        if not path.is_file():
            where = f" (extended by {referrer})" if referrer else ""
            raise ConfigError(f"SLA profile file {path} not found{where}",
                              hint="give an existing .toml path or a profile name")
        return path.resolve()
    dirs = ([referrer.parent] if referrer else []) + list(search) + [PROFILE_DIR]
    for d in dirs:
        candidate = d / f"{text}.toml"
        if candidate.is_file() and (referrer is None or candidate.resolve() != referrer.resolve()):
            return candidate.resolve()
    raise ConfigError(f"no SLA profile named {text!r}" + (f" (extended by {referrer})" if referrer else ""),
                      hint=f"available: {', '.join(available_profiles(search)) or 'none'}; "
                           f"looked in {', '.join(map(str, dirs))}")


# --------------------------------------------------------------------------- validation

def _entry(metric: str, t: dict, prov: dict, profile: str) -> SlaEntry:
    def fail(key: str | None, expected: str) -> ConfigError:
        path = prov.get(key, prov["__table__"]) if key else prov["__table__"]
        got = f", got {t[key]!r}" if key in t else ""
        where = f", field {key!r}" if key else ""
        return ConfigError(f"SLA profile {path}, entry {metric!r}{where}: expected {expected}{got}",
                           hint=_where(path, metric, key))

    for key in t:
        if key not in FIELDS:
            raise fail(key, f"one of the known fields ({', '.join(FIELDS)}), not {key!r}")
    for key in REQUIRED:
        if key not in t:
            raise fail(None, f"field {key!r} (required: {', '.join(REQUIRED)})")
    for key in TEXT_FIELDS:  # an array or table here would reach a set lookup as an unhashable value
        if key in t and not isinstance(t[key], str):
            raise fail(key, "a string")
    statistic = t["statistic"]
    if statistic not in STATISTICS:
        raise fail("statistic", f"one of {', '.join(STATISTICS)}")
    comparator = t["comparator"]
    if comparator not in COMPARATORS:
        raise fail("comparator", f"one of {', '.join(COMPARATORS)}")
    if comparator == "==" and statistic not in ("value", "count"):
        raise fail("comparator", "a one-sided comparator (<=, <, >=, >) for a sampled statistic")
    if comparator == "==" and statistic == "value" and "tolerance" not in t:
        raise fail(None, "field 'tolerance' with comparator '==' (a measured value never equals exactly)")
    if not _is_number(t["limit"]):
        raise fail("limit", "a number")
    if not isinstance(t["unit"], str) or not t["unit"].strip():
        raise fail("unit", "a string (e.g. \"ms\", \"W\", \"fraction\")")
    if t["limit"] < 0 and t["unit"] not in SIGNED_UNITS:
        raise fail("limit", f"a limit >= 0 for a quantity in {t['unit']!r} (only {', '.join(sorted(SIGNED_UNITS))} "
                            "can be negative)")
    if statistic in SAMPLED:
        if not _is_number(t.get("confidence")) or not 0.0 < t["confidence"] < 1.0:
            raise fail("confidence", "a number strictly between 0 and 1 (e.g. 0.95)")
    elif "confidence" in t:
        raise fail("confidence", f"no confidence for statistic {statistic!r} (only for {', '.join(SAMPLED)})")
    if statistic == "percentile":
        if not _is_number(t.get("p")) or not 0.0 < t["p"] < 1.0:
            raise fail("p", "the fraction that must meet the limit, strictly between 0 and 1 (0.99 for p99)")
    elif "p" in t:
        raise fail("p", "no 'p' unless statistic = \"percentile\"")
    if statistic == "proportion" and not 0.0 <= t["limit"] <= 1.0:
        raise fail("limit", "a fraction between 0 and 1 for a proportion (0.992, not 99.2)")
    min_samples = t.get("min_samples", 0)
    if not isinstance(min_samples, int) or isinstance(min_samples, bool) or min_samples < 0:
        raise fail("min_samples", "a whole number >= 0")
    independence = t.get("independence", "sample")
    if independence not in stats.INDEPENDENCE:
        raise fail("independence", f"one of {', '.join(stats.INDEPENDENCE)}")
    if independence != "sample" and statistic not in ("percentile", "std", "mean"):
        raise fail("independence", "\"sample\" (only percentile, std and mean handle autocorrelated samples)")
    min_runs = t.get("min_runs", stats.MIN_RUNS)
    if "min_runs" in t and (independence != "run" or not isinstance(min_runs, int) or min_runs < 2):
        raise fail("min_runs", "a whole number >= 2, and only with independence = \"run\"")
    tolerance = t.get("tolerance")
    if tolerance is not None and (statistic != "value" or comparator != "==" or not _is_number(tolerance)
                                  or tolerance < 0):
        raise fail("tolerance", "a number >= 0, only with statistic = \"value\" and comparator = \"==\"")
    evidence = t.get("evidence", "any")
    if evidence not in EVIDENCE_ACCEPTED:
        raise fail("evidence", f"one of {', '.join(EVIDENCE_ACCEPTED)}")
    decision_rule = t.get("decision_rule", DecisionRule.SIMPLE.value)
    if decision_rule not in {r.value for r in DecisionRule}:
        raise fail("decision_rule", f"one of {', '.join(r.value for r in DecisionRule)}")
    claim = t.get("claim")
    if claim is not None and (not isinstance(claim, int) or isinstance(claim, bool) or claim not in CLAIMS):
        raise fail("claim", f"the claim's row number in docs/claims.md ({CLAIMS.start}-{CLAIMS.stop - 1})")
    if not isinstance(t.get("description", ""), str):
        raise fail("description", "a string")
    conditions = t.get("conditions", {})
    if not isinstance(conditions, dict) or not all(isinstance(v, (int, float, str, bool)) for v in conditions.values()):
        raise fail("conditions", "a table of numbers, strings or booleans (e.g. gpu_load_min = 0.70)")
    for key, value in conditions.items():
        if key.endswith(("_min", "_max")) and not _is_number(value):
            raise fail("conditions", f"a number for {key!r}")
    if not isinstance(t.get("parameters", {}), dict):
        raise fail("parameters", "a table")
    return SlaEntry(metric=metric, statistic=statistic, comparator=comparator, limit=float(t["limit"]),
                    unit=t["unit"], description=t.get("description", ""), claim=claim,
                    confidence=t.get("confidence"), min_samples=min_samples, p=t.get("p"),
                    independence=independence, min_runs=min_runs, tolerance=tolerance,
                    conditions=MappingProxyType(dict(conditions)),
                    parameters=MappingProxyType(dict(t.get("parameters", {}))),
                    evidence=evidence, decision_rule=DecisionRule(decision_rule),
                    profile=profile, source=str(prov.get("limit", prov["__table__"])))


def _loosenings(metric: str, base: dict, override: dict) -> list[str]:
    notes = []
    comparator = override.get("comparator", base.get("comparator"))
    if comparator != base.get("comparator") and "comparator" in override:
        notes.append(f"{metric}: comparator {base.get('comparator')!r} -> {comparator!r}")
    old, new = base.get("limit"), override.get("limit")
    if _is_number(old) and _is_number(new) and comparator in ("<=", "<", ">=", ">"):
        if (new > old) if comparator in ("<=", "<") else (new < old):
            notes.append(f"{metric}: limit {old} -> {new}")
    for key in ("confidence", "min_samples", "p"):
        old, new = base.get(key), override.get(key)
        if _is_number(old) and _is_number(new) and new < old:
            notes.append(f"{metric}: {key} {old} -> {new}")
    if "tolerance" in override and _is_number(base.get("tolerance")) and _is_number(override["tolerance"]) \
            and override["tolerance"] > base["tolerance"]:
        notes.append(f"{metric}: tolerance {base['tolerance']} -> {override['tolerance']}")
    return notes


def _where(path: Path, metric: str, key: str | None) -> str:
    """'see line N' for the metric's table (and field), found by scanning the file's text."""
    try:
        lines = read_text(path, "SLA profile").splitlines()
    except ConfigError:
        return f"edit [metrics.{metric}] in {path}"
    header = re.compile(rf"^\s*\[\s*metrics\s*\.\s*\"?{re.escape(metric)}\"?\s*(\.|\])")
    field_re = re.compile(rf"^\s*{re.escape(key)}\s*=") if key else None
    start = next((i for i, line in enumerate(lines) if header.match(line)), None)
    if start is None:
        return f"edit [metrics.{metric}] in {path}"
    if field_re is not None:
        for i in range(start + 1, len(lines)):
            if lines[i].lstrip().startswith("[") and not header.match(lines[i]):
                break
            if field_re.match(lines[i]):
                return f"see {path}:{i + 1}"
    return f"see [metrics.{metric}] at {path}:{start + 1}"


def _successes(data: Any, metric: str) -> tuple[int, int]:
    if isinstance(data, tuple) and len(data) == 2:
        return int(data[0]), int(data[1])
    outcomes = np.asarray(data)
    if outcomes.dtype != bool:
        raise TypeError(f"{metric}: a proportion takes (successes, n) or an array of booleans, "
                        f"got dtype {outcomes.dtype}")
    return int(outcomes.sum()), int(outcomes.size)


def _is_number(x: Any) -> TypeGuard[float]:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _plain(x: Any) -> Any:
    """JSON-friendly context value."""
    if isinstance(x, np.generic):
        return x.item()
    return x if isinstance(x, (int, float, str, bool, type(None))) else repr(x)
