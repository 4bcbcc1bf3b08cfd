"""What a suite may ask of the bench (docs/writing-tests.md): fixtures, never the station's nature.
An emulated station differs from hardware below the transport, so a suite that asked whether it
runs on one would be testing something a lab never runs."""
from __future__ import annotations

import ast
from pathlib import Path

SUITES = Path(__file__).resolve().parents[1] / "suites"


def _suite_trees() -> list[tuple[str, ast.Module]]:
    return [(path.name, ast.parse(path.read_text(encoding="utf-8"))) for path in sorted(SUITES.glob("*.py"))]


def test_the_suites_are_found():
    assert len(_suite_trees()) >= 5


def test_suites_never_ask_whether_the_station_is_emulated():
    asking = [f"{name}:{node.lineno}" for name, tree in _suite_trees() for node in ast.walk(tree)
              if isinstance(node, ast.Attribute) and node.attr == "emulated"]
    assert asking == []


def test_the_runtime_fixtures_are_the_plugin_s():
    """One `runtime` and one `timed_runtime` (fixtures/plugin.py), their capabilities asked by the
    `capabilities` marker; a suite may wrap them (the SLA suite's `observed_runtime`)."""
    defined = [f"{name}:{node.lineno}" for name, tree in _suite_trees() for node in ast.walk(tree)
               if isinstance(node, ast.FunctionDef) and node.name in {"runtime", "timed_runtime"}]
    assert defined == []


def test_suites_never_decide_an_outcome():
    """Outcomes come from the SLA entries, the checks and the rules in core/verdict.py; a suite
    records what they decide (issue 34: the outcome was rewritten on its way to the report)."""
    deciding = [f"{name}:{node.lineno}" for name, tree in _suite_trees() for node in ast.walk(tree)
                if isinstance(node, ast.keyword) and node.arg == "outcome"]
    assert deciding == []
