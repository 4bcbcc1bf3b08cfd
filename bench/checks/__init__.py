"""Measurements and evaluations behind the SLA checks: plain functions the HIL suites call and the
production acceptance flow reuses with smaller sample counts.

Each check takes drivers (a RuntimeClient, a Device, a power analyzer) and the SLA entries that
judge it, and returns a CheckResult: verdicts plus the raw data they were computed from. A
verdict's `raw` lists the names of its raw data until `CheckResult.record_into` saves them and
replaces the names by the saved files' paths.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from bench.core.verdict import Verdict

Tick = Callable[[int], Any]  # progress: called with the number of steps just done


class Recorder(Protocol):
    """What record_into needs: the plugin's `record` fixture, or a test double."""

    def __call__(self, verdict: Verdict) -> Verdict: ...

    def raw(self, name: str, data: Any) -> str: ...


@dataclass
class CheckResult:
    verdicts: list[Verdict] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)  # name -> {array name: ndarray} (npz) or JSON-able

    def verdict(self, name: str) -> Verdict:
        for verdict in self.verdicts:
            if verdict.name == name:
                return verdict
        raise KeyError(f"no verdict {name!r} (have: {', '.join(v.name for v in self.verdicts)})")

    @property
    def passed(self) -> bool:
        return all(v.passed for v in self.verdicts)

    def record_into(self, record: Recorder) -> list[Verdict]:
        """Save the raw data next to the results and record every verdict (pointing at its files)."""
        paths = {name: record.raw(name, data) for name, data in self.raw.items()}
        for verdict in self.verdicts:
            verdict.raw = [paths.get(name, name) for name in verdict.raw]
            record(verdict)
        return self.verdicts


def named(verdict: Verdict, name: str, raw: str | None = None, plot: str | None = None, **extra: Any) -> Verdict:
    """Give a profile verdict its reported name (keeping the metric id), raw data and plot hint."""
    if verdict.name != name:
        verdict.extra.setdefault("metric", verdict.name)
        verdict.name = name
    if raw is not None:
        verdict.raw = [raw, *[r for r in verdict.raw if r != raw]]
    if plot is not None:
        verdict.extra["plot"] = plot
    verdict.extra.update(extra)
    return verdict


def no_tick(_: int) -> None:
    """The default progress callback: nothing to show."""
