"""One shape for a check (docs/writing-tests.md): `<what>_check(resources..., *, entries..., options...)
-> CheckResult`. The resources it uses come positionally, the SLA entries it judges keyword-only,
each typed SlaEntry and named after what it judges, then its options; never a whole profile or a
mapping of entries. A resource is an instrument role's protocol (drivers.registry.PROTOCOLS), the
phone (Device), its runtime, or a probe built from an instrument (CoverProbe, ShieldProbe): it is
never a keyword-only option, however optional it is."""
from __future__ import annotations

import importlib
import inspect
import pkgutil
import typing
from collections.abc import Mapping, Sequence

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
