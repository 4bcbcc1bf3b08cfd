"""Measurements and evaluations behind the SLA checks: plain functions the HIL suites call and the
production acceptance flow reuses with smaller sample counts.

One shape (tests/test_check_shape.py): `<what>_check(resources..., *, entries..., options...)
-> CheckResult`. A check takes the drivers it uses (a RuntimeClient, a Device, a power analyzer)
positionally, then each SlaEntry it judges as a keyword-only parameter named after what it judges,
then its options; it returns a CheckResult: verdicts plus the raw data they were computed from.

A verdict lives in two steps. The check builds it whole with `SlaEntry.evaluate` (its name, raw
names, plot, detail and facts as keywords); `CheckResult.record_into` records it, saving the raw
data and replacing the verdict's raw names by the saved files' paths.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict

from phonebench.core.verdict import PlotHint, Verdict

Tick = Callable[[int], Any]  # progress: called with the number of steps just done


class VerdictData(TypedDict, total=False):
    """Some of a verdict's own data, as SlaEntry.evaluate takes it: what a check gives several
    evaluate calls alike, passed as `**data`."""

    name: str
    raw: str | Sequence[str]
    plot: str | PlotHint | None


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
        # The record step, the verdict's second and last: its raw names become the saved files.
        self.verdicts = [record(v.but(raw=tuple(paths.get(name, name) for name in v.raw))) for v in self.verdicts]
        return self.verdicts


def no_tick(_: int) -> None:
    """The default progress callback: nothing to show."""
