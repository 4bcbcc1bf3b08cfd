"""Which build did it? A search over a catalogue's range with A/B steps as the oracle.

The first step is the range itself, good against bad, on every model asked about: a model whose
gates all settle on "no change" has *no culprit in the range*; one with a gate called regressed
or improved is searched for the metrics that moved, in their direction (a model's search follows
only its own evidence, so a change on one model never sends another model's search anywhere).

The search keeps, per model, a last build like the good one (`lo`) and a first build known to
differ (`hi`) and A/Bs `lo` against the build halfway: *differs* (a tracked metric called in its
direction) moves `hi` there, *same* (every tracked metric settled, none in that direction) moves
`lo`. Models whose searches stand at the same `lo`, `hi` share their steps (one A/B on all their
units); they part when their answers differ. When `lo` and `hi` are adjacent, `hi` is the culprit,
and the step that last moved `hi` measured its effect. Then the culprit is A/B'd against the bad
build: a change left over means a second build added part of it, and its own search follows.

Real ranges: a build that cannot be installed is skipped and said (the nearest other build is
tried; when only skipped builds stand between `lo` and `hi`, the culprit is one of them or `hi`,
and the report lists them). A step that stays undecided is repeated with more blocks (the
oracle's `attempt`), then said: that model's search ends with the range it narrowed to.
Steps: one for the range, ceil(log2(n - 1)) to narrow n builds, one for what is left over:
log2(32) + 2 = 7 for one culprit in 32 builds.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from .protocol import BuildUnusable
from .records import AbResult, GateResult
from .sequential import IMPROVED, REGRESSED, SETTLED, Call

log = logging.getLogger(__name__)

Verdict = Literal["differs", "same", "undecided"]
DIFFERS: Verdict = "differs"
SAME: Verdict = "same"
UNDECIDED_STEP: Verdict = "undecided"
ATTEMPTS = 2  # an undecided step is run once more with more blocks, then said


class Oracle(Protocol):
    def __call__(self, a: str, b: str, *, models: Sequence[str], metrics: Sequence[str], attempt: int) -> AbResult:
        """An A/B of build a against build b on the models' units (raises BuildUnusable)."""


@dataclass
class Step:
    index: int  # 1-based, in the order run
    a: str
    b: str
    purpose: str  # "range", "search" or "left over"
    models: tuple[str, ...]
    metrics: tuple[str, ...]
    attempt: int
    result: AbResult | None  # what was measured (partial when a build could not be installed)
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    note: str = ""

    @property
    def lab_minutes(self) -> float:
        return self.result.lab_minutes if self.result is not None else 0.0


@dataclass(frozen=True)
class Culprit:
    model: str
    build: str
    after: str  # the last build found like the good one
    candidates: tuple[str, ...]  # what it may be: more than one when builds between could not be installed
    step: int  # the step that measured its effect
    effects: tuple[GateResult, ...]  # that step's gates on this model


@dataclass
class ModelSearch:
    model: str
    status: Literal["culprit", "no culprit", "undecided"]
    directions: dict[str, Call] = field(default_factory=dict)  # metric -> how good vs bad moved
    culprits: list[Culprit] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class BisectResult:
    good: str
    bad: str
    builds: tuple[str, ...]
    metrics: tuple[str, ...]
    steps: list[Step] = field(default_factory=list)
    models: dict[str, ModelSearch] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # build -> why

    @property
    def lab_minutes(self) -> float:
        """Steps run one after another: their lab minutes add up."""
        return sum(s.lab_minutes for s in self.steps)


@dataclass
class _Track:
    model: str
    lo: int
    hi: int
    evidence: int  # the step that last moved hi
    checking: bool = False  # hi is the bad build, lo a culprit: is anything left over?


def verdict_of(result: AbResult, model: str, directions: Mapping[str, Call] | None) -> Verdict:
    """A step's answer for one model: with `directions` (metric -> the change tracked), differs when a
    tracked metric is called in its direction; without, differs when any gate is a change."""
    gates = [g for g in result.gates if g.model == model and (directions is None or g.metric in directions)]
    if not gates:
        return UNDECIDED_STEP
    if any(g.call in (REGRESSED, IMPROVED) and (directions is None or g.call == directions[g.metric]) for g in gates):
        return DIFFERS
    return SAME if all(g.call in SETTLED for g in gates) else UNDECIDED_STEP


StepDone = Callable[[BisectResult, Step], None]


def bisect(builds: Sequence[str], oracle: Oracle, *, models: Sequence[str], metrics: Sequence[str],
           attempts: int = ATTEMPTS, result: BisectResult | None = None,
           on_step: StepDone | None = None) -> BisectResult:
    """Search `builds` (good first, bad last, in catalogue order) for the builds that changed `metrics`
    on `models`. BuildUnusable of the good or bad build propagates: nothing can be compared.
    `result`: the record to fill as the search goes (kept by the caller if the search stops);
    `on_step`: called after every step."""
    if len(builds) < 2:
        raise ValueError(f"a range needs a good and a bad build, got {list(builds)}")
    result = result or BisectResult(builds[0], builds[-1], tuple(builds), tuple(metrics))
    return _Search(result, oracle, tuple(models), attempts, on_step).run()


class _Search:
    def __init__(self, result: BisectResult, oracle: Oracle, models: tuple[str, ...], attempts: int,
                 on_step: StepDone | None) -> None:
        self.builds, self.oracle, self.attempts, self.on_step = result.builds, oracle, attempts, on_step
        self.result = result
        self.result.models = {m: ModelSearch(m, "no culprit") for m in models}
        self.tracks: list[_Track] = []

    def run(self) -> BisectResult:
        last = len(self.builds) - 1
        for model, (verdict, step) in self._ab(0, last, list(self.result.models), "range", None).items():
            search = self.result.models[model]
            if verdict == DIFFERS:
                gates = [g for g in step.result.gates if g.model == model] if step.result else []
                search.directions = {g.metric: g.call for g in gates if g.call in (REGRESSED, IMPROVED)}
                search.status = "culprit"
                self.tracks.append(_Track(model, 0, last, step.index))
            elif verdict == SAME:
                search.notes.append(f"no culprit in the range: {self.builds[0]} and {self.builds[-1]} do not "
                                    f"differ beyond the threshold (step {step.index})")
            else:
                search.status = "undecided"
                search.notes.append(f"undecided whether {self.builds[0]} and {self.builds[-1]} differ after "
                                    f"{self.attempts} attempt(s) (step {step.index})")
        while self.tracks:
            key = min((t.lo, t.hi, t.checking) for t in self.tracks)
            group = [t for t in self.tracks if (t.lo, t.hi, t.checking) == key]
            if key[2]:
                self._left_over(group)
            else:
                self._narrow(group)
        return self.result

    # --- one move of a group of searches standing at the same lo, hi -----------------------------
    def _narrow(self, group: list[_Track]) -> None:
        lo, hi = group[0].lo, group[0].hi
        mid = self._midpoint(lo, hi)
        if mid is None:
            for track in group:
                self._found(track)
            return
        try:
            answers = self._ab(lo, mid, [t.model for t in group], "search", self._directions(group))
        except BuildUnusable as exc:
            if exc.build != self.builds[mid]:
                raise
            self._skip(exc)
            return
        for track in group:
            verdict, step = answers[track.model]
            if verdict == DIFFERS:
                track.hi, track.evidence = mid, step.index
            elif verdict == SAME:
                track.lo = mid
            else:
                self._end(track, f"the culprit is after {self.builds[lo]} and at or before {self.builds[hi]}: "
                                 f"{self.builds[lo]} vs {self.builds[mid]} stayed undecided after "
                                 f"{self.attempts} attempt(s) (step {step.index})")

    def _left_over(self, group: list[_Track]) -> None:
        lo, hi = group[0].lo, group[0].hi
        answers = self._ab(lo, hi, [t.model for t in group], "left over", self._directions(group))
        for track in group:
            verdict, step = answers[track.model]
            if verdict == DIFFERS:
                track.checking, track.evidence = False, step.index
            else:
                what = ("nothing left over" if verdict == SAME else "undecided whether anything is left over")
                self.result.models[track.model].notes.append(
                    f"{self.builds[lo]} vs {self.builds[hi]}: {what} (step {step.index})")
                self.tracks.remove(track)

    def _found(self, track: _Track) -> None:
        candidates = tuple(self.builds[i] for i in range(track.lo + 1, track.hi + 1))
        step = self.result.steps[track.evidence - 1]
        effects = tuple(g for g in step.result.gates if g.model == track.model) if step.result else ()
        culprit = Culprit(track.model, self.builds[track.hi], self.builds[track.lo], candidates, track.evidence,
                          effects)
        self.result.models[track.model].culprits.append(culprit)
        if track.hi == len(self.builds) - 1:
            self.tracks.remove(track)
        else:  # did this build do all of it?
            track.lo, track.hi, track.checking = track.hi, len(self.builds) - 1, True

    def _end(self, track: _Track, note: str) -> None:
        search = self.result.models[track.model]
        search.notes.append(note)
        if not search.culprits:
            search.status = "undecided"
        self.tracks.remove(track)

    # --- helpers ---------------------------------------------------------------------------------
    def _midpoint(self, lo: int, hi: int) -> int | None:
        """The untried build nearest the middle of (lo, hi), or None when none is left."""
        inside = [i for i in range(lo + 1, hi) if self.builds[i] not in self.result.skipped]
        return min(inside, key=lambda i: (abs(2 * i - lo - hi), i)) if inside else None

    def _directions(self, group: list[_Track]) -> dict[str, dict[str, Call]]:
        return {t.model: self.result.models[t.model].directions for t in group}

    def _skip(self, exc: BuildUnusable) -> None:
        self.result.skipped[exc.build] = f"{exc.kind}: {exc}"
        log.info("bisect: %s", exc)

    def _ab(self, lo: int, hi: int, models: list[str], purpose: str,
            directions: dict[str, dict[str, Call]] | None) -> dict[str, tuple[Verdict, Step]]:
        """One A/B step, repeated with more blocks for the models it left undecided: each model's
        answer with the step that gave it."""
        answers: dict[str, tuple[Verdict, Step]] = {}
        metrics = self.result.metrics if directions is None else \
            tuple(m for m in self.result.metrics if any(m in d for d in directions.values()))
        pending = list(models)
        for attempt in range(1, self.attempts + 1):
            step = Step(len(self.result.steps) + 1, self.builds[lo], self.builds[hi], purpose, tuple(pending),
                        metrics, attempt, None)
            self.result.steps.append(step)
            try:
                step.result = self.oracle(step.a, step.b, models=pending, metrics=metrics, attempt=attempt)
            except BuildUnusable as exc:
                step.result, step.note = exc.partial, f"skipped {exc.build}: {exc.kind}"
                self._done(step)
                raise
            for model in pending:
                step.verdicts[model] = verdict_of(step.result, model, None if directions is None else directions[model])
                answers[model] = (step.verdicts[model], step)
            pending = [m for m in pending if step.verdicts[m] == UNDECIDED_STEP]
            if pending:
                step.note = f"undecided on {', '.join(pending)}: " + \
                    ("repeated with more blocks" if attempt < self.attempts else "said")
            self._done(step)
            if not pending:
                break
        return answers

    def _done(self, step: Step) -> None:
        if self.on_step is not None:
            self.on_step(self.result, step)
