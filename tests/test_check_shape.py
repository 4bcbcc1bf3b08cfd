"""One shape for a check (docs/writing-tests.md): `<what>_check(resources..., *, entries..., options...)
-> CheckResult`. The resources it uses come positionally, the SLA entries it judges keyword-only,
each typed SlaEntry and named after what it judges, then its options; never a whole profile or a
mapping of entries. A resource is an instrument role's protocol (drivers.registry.PROTOCOLS), the
phone (Device), its runtime, or a probe built from an instrument (CoverProbe, ShieldProbe): it is
never a keyword-only option, however optional it is."""
from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

import phonebench.bench.checks as checks_pkg
from phonebench.bench.checks import CheckResult
from phonebench.bench.specs.sla import SlaEntry, SlaProfile
from phonebench.core.verdict import Verdict
from phonebench.drivers.registry import PROTOCOLS

# Annotations name resources by these words (the probes are Callable aliases, so the name is what
# tells them from an option such as a clock's `now`).
RESOURCES = frozenset({*(protocol.__name__ for protocol in PROTOCOLS.values()),
                       "Device", "RuntimeClient", "CoverProbe", "ShieldProbe"})

# Checks that cannot follow the rule, with the reason. None so far: keep it that way.
EXCEPTIONS: dict[str, str] = {}

def _checks() -> list[tuple[str, typing.Callable]]:
    found = []
    for info in pkgutil.iter_modules(checks_pkg.__path__):
        module = importlib.import_module(f"{checks_pkg.__name__}.{info.name}")
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            if name.endswith("_check") and not name.startswith("_") and fn.__module__ == module.__name__:
                found.append((f"{info.name}.{name}", fn))
    return sorted(found, key=lambda item: item[0])


CHECKS = _checks()


def _builders() -> list[str]:
    """Public functions of bench/checks, not checks, whose return type mentions Verdict or CheckResult."""
    found = []
    for info in pkgutil.iter_modules(checks_pkg.__path__):
        module = importlib.import_module(f"{checks_pkg.__name__}.{info.name}")
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            if name.startswith("_") or name.endswith("_check") or fn.__module__ != module.__name__:
                continue
            returned = typing.get_type_hints(fn).get("return")
            if _mentions(returned, Verdict) or _mentions(returned, CheckResult):
                found.append(f"{info.name}.{name}")
    return sorted(found)


def _mentions(hint: object, kind: type) -> bool:
    return hint is kind or any(_mentions(arg, kind) for arg in typing.get_args(hint))


def _names_a_resource(annotation: object) -> bool:
    words = str(annotation).replace("|", " ").replace("[", " ").replace("]", " ").replace(",", " ").split()
    return any(word.rsplit(".", 1)[-1] in RESOURCES for word in words)


def test_the_checks_are_found():
    names = {name for name, _ in CHECKS}
    assert {"voice.voice_check", "tokens.first_token_check", "audit.audit_check",
            "sustained.sustained_use_check", "thermal_trip.thermal_trip_check"} <= names
    assert set(EXCEPTIONS) <= names, "an exception for a check that no longer exists"


@pytest.mark.parametrize("name, check", CHECKS, ids=[name for name, _ in CHECKS])
def test_a_check_takes_resources_then_its_entries_then_options(name, check):
    if name in EXCEPTIONS:
        pytest.skip(EXCEPTIONS[name])
    hints = typing.get_type_hints(check)
    assert hints.get("return") is CheckResult, f"{name} must return CheckResult"
    params = list(inspect.signature(check).parameters.values())
    assert not any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params), f"{name}: no *args / **kwargs"
    for p in params:
        hint = hints.get(p.name)
        assert hint is not None, f"{name}: parameter {p.name} has no type hint"
        assert not _mentions(hint, SlaProfile), f"{name}: {p.name} takes a whole SlaProfile; take its entries"
        assert not (_mentions(hint, SlaEntry) and typing.get_origin(hint) in (dict, list, tuple, Mapping, Sequence)), \
            f"{name}: {p.name} is a collection of entries; take each entry as its own keyword"
    entries = [p for p in params if _mentions(hints[p.name], SlaEntry)]
    for p in entries:
        assert p.kind is p.KEYWORD_ONLY, f"{name}: entry {p.name} must be keyword-only (after the resources, `*`)"
    keyword_only = [p for p in params if p.kind is p.KEYWORD_ONLY]
    first_options = [i for i, p in enumerate(keyword_only) if p not in entries]
    if entries and first_options:
        assert max(keyword_only.index(p) for p in entries) < first_options[0], \
            f"{name}: the entries come before the options"
    for p in keyword_only:
        assert not _names_a_resource(p.annotation), \
            f"{name}: resource {p.name} is a keyword-only option; pass it before `*`, with the other resources"


def test_a_resource_is_told_from_an_option():
    assert _names_a_resource("ShieldProbe | None") and _names_a_resource("PowerAnalyzer | None")
    assert _names_a_resource("drivers.device.Device")
    assert not _names_a_resource("Callable[[], float] | None") and not _names_a_resource("ShieldRelation")


def test_verdicts_come_from_checks_not_from_public_builders():
    """A suite gets verdicts from a check (`<what>_check -> CheckResult`), never by calling a rule
    of judgement on data it measured itself: judgement shared between checks is private to the
    checks package, and the rules of judgement themselves are the one judge's (core/judge.py)."""
    assert _builders() == [], "a public verdict builder: make it a check, or private to bench/checks"


# Keywords that set what the judge decides: a check never passes them (core/judge.py decides).
_DECIDED = frozenset({"outcome", "basis", "ruling"})


def _outcomes_set(source: str) -> list[str]:
    """Where a module's code constructs a Verdict itself (its outcome is a required field) or sets
    an outcome, basis or ruling by keyword (`dataclasses.replace(verdict, outcome=...)`)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        callee = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        if callee == "Verdict":
            found.append(f"line {node.lineno}: Verdict(...)")
        found += [f"line {node.lineno}: {callee}(..., {k.arg}=...)" for k in node.keywords if k.arg in _DECIDED]
    return found


def test_the_outcome_detector_catches_a_check_deciding_its_own_outcome():
    assert _outcomes_set('v = Verdict("x", 1.0, "u", Outcome.INFO, statistic="value")') == ['line 1: Verdict(...)']
    assert _outcomes_set("v = verdict_mod.Verdict(name, None, unit, outcome)") == ["line 1: Verdict(...)"]
    assert _outcomes_set("v = replace(verdict, outcome=Outcome.PASS)") == ["line 1: replace(..., outcome=...)"]
    assert _outcomes_set('v = judge.recorded("x", 1.0, "u", statistic="value")\nw = judge.found(v)') == []


@pytest.mark.parametrize("module", sorted(Path(checks_pkg.__path__[0]).glob("*.py")), ids=lambda p: p.name)
def test_a_check_hands_the_judge_measurements_never_an_outcome(module):
    """Checks measure and state findings; the outcome is the one judge's (core/judge.py: compare,
    decide_statistic, recorded, found, rebased...). A check building a Verdict itself would
    pre-decide an outcome that the judge then decides again."""
    assert _outcomes_set(module.read_text(encoding="utf-8")) == [], \
        f"{module.name} decides an outcome itself: build the verdict with core/judge.py's constructors"
