"""What the nightly hands over when something moved: the build range it moved in and the command
that searches it (`bench bisect`), or the A/B that would see a change the night's gate could not
(`bench ab`). Both `bench compare` and the morning page (`bench trend --html`) name them.

The command texts are the `ab` branch's commands (bench/ab/); these two functions build the same
text until the two are one.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass

UNKNOWN = "?"


# The statistics a `bench ab` / `bench bisect` gate measures, by the statistic's name (bench/ab's
# gates): a command handed over names the gate, which is what those commands take.
GATES = {"first_token": "first_token", "token_latency_p50": "token_median",
         "power_sustained_mean": "sustained_power", "energy_per_dialog": "energy_per_dialog"}


def gate_of(statistic: str) -> str | None:
    """The A/B gate measuring `statistic` (a label such as "first_token_p99 (p50)"), if one does."""
    name = statistic.split(" (")[0]
    return next((gate for prefix, gate in GATES.items() if name.startswith(prefix)), None)


def _gate_option(statistic: str) -> list[str]:
    gate = gate_of(statistic)
    return ["--metric", gate] if gate else []  # none: every default gate


def bisect_command(good: str, bad: str, metric: str, model: str) -> str:
    """`bench bisect` over good → bad for one statistic on one phone model, quoted for a shell."""
    return shlex.join(["bench", "bisect", "--good", good, "--bad", bad, *_gate_option(metric), "--model", model,
                       "--catalogue", "PATH"])


def ab_command(old: str, new: str, metric: str, model: str) -> str:
    """`bench ab` of two builds for one statistic on one phone model, quoted for a shell."""
    return shlex.join(["bench", "ab", old, new, *_gate_option(metric), "--model", model, "--catalogue", "PATH"])


@dataclass(frozen=True)
class BuildRange:
    """The builds one phone model ran on the good side (the baseline, the night before a change)
    and the bad side (tonight, the night after), with the runs they come from."""

    good: tuple[str, ...]
    bad: tuple[str, ...]
    good_run: str | None = None
    bad_run: str | None = None

    @property
    def searchable(self) -> bool:
        """One build on each side, and not the same one: a range a bisect or an A/B can take."""
        return len(self.good) == 1 and len(self.bad) == 1 and self.good != self.bad

    @property
    def text(self) -> str:
        """"build 3.4.0 (run r1) → 3.4.1 (run r2)", or why it is no build change."""
        old, new = ", ".join(self.good) or UNKNOWN, ", ".join(self.bad) or UNKNOWN
        if self.good and self.good == self.bad:
            return f"within build {new} (run {self.good_run} → {self.bad_run}): not a build change"
        return f"build {old} (run {self.good_run}) → {new} (run {self.bad_run})"

    @property
    def why_not_searchable(self) -> str | None:
        """Why no bisect or A/B command is offered for this range (None: one is)."""
        if self.searchable:
            return None
        if not self.good or not self.bad:
            return "a side's build is not recorded"
        if self.good == self.bad:
            return "both sides ran the same build"
        return "a side's phones ran more than one build"

    def bisect(self, metric: str, model: str) -> str | None:
        return bisect_command(self.good[0], self.bad[0], metric, model) if self.searchable else None

    def ab(self, metric: str, model: str) -> str | None:
        return ab_command(self.good[0], self.bad[0], metric, model) if self.searchable else None
