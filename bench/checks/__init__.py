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
from dataclasses import fields, replace
from typing import Any, Protocol

from phonebench.core.verdict import PlotHint, Verdict

PLOT_FIELDS = {f.name for f in fields(PlotHint)} - {"kind"}
Tick = Callable[[int], Any]  # progress: called with the number of steps just done


class Recorder(Protocol):
    """What record_into needs: the plugin's `record` fixture, or a test double."""

    def __call__(self, verdict: Verdict) -> Verdict: ...

    def raw(self, name: str, data: Any) -> str: ...


@dataclass
class CheckResult:
    """What every check returns: its verdicts, the raw data they point at by name, and the check's
    own typed record of what it measured (voice trials, power runs, a soak) for callers that need
    more than the verdicts."""

    verdicts: list[Verdict] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)  # name -> {array name: ndarray} (npz) or JSON-able
    measurement: Any = None

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
        self.verdicts = [record(v.but(raw=tuple(paths.get(name, name) for name in v.raw))) for v in self.verdicts]
        return self.verdicts


def named(verdict: Verdict, name: str, raw: str | None = None, plot: str | PlotHint | None = None,
          **extra: Any) -> Verdict:
    """Give a profile verdict its reported name (keeping the metric id), raw data and plot hint;
    keyword arguments naming a PlotHint field (labels, x_label, ...) go into the plot hint, the
    others into the verdict's extra data."""
    hints = {k: extra.pop(k) for k in list(extra) if k in PLOT_FIELDS}
    if "labels" in hints:
        hints["labels"] = tuple(hints["labels"])
    changes: dict[str, Any] = {"extra": extra}
    if verdict.name != name:
        changes.update(name=name, metric=verdict.metric or verdict.name)
    if raw is not None:
        changes["raw"] = (raw, *[r for r in verdict.raw if r != raw])
    if plot is not None:
        changes["plot"] = PlotHint(plot, **hints) if isinstance(plot, str) else replace(plot, **hints)
    elif hints:
        raise ValueError(f"{name}: plot hints {sorted(hints)} without a plot kind")
    return verdict.but(**changes)


def no_tick(_: int) -> None:
    """The default progress callback: nothing to show."""
