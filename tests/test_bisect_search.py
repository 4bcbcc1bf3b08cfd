"""bench/ab/bisect.py: the search over a catalogue's range, against a fake oracle that knows the
truth (a culprit's place, partial culprits, builds that do not install, steps that stay undecided),
and once through the real runner and rule on a planted catalogue."""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest

from phonebench.bench.ab.bisect import bisect
from phonebench.bench.ab.protocol import BuildUnusable
from phonebench.bench.ab.records import AbResult, GateResult, Unit
from phonebench.bench.ab.run import plan_for, run_ab
from phonebench.bench.ab.sequential import IMPROVED, NO_CHANGE, REGRESSED, UNDECIDED, AbPlan
from phonebench.bench.ab.simulated import Noise, PlantedBuild, SimulatedBench

N = 32
BUILDS = [f"b{i:02d}" for i in range(N)]
MODELS = ("SM8650", "MT6989")
METRICS = ("first_token", "token_median")
PLAN = AbPlan.spaced(3, 10)


class FakeOracle:
    """Calls each gate from the truth: a change of 1.5 % or more is called (the rule's job is tested
    elsewhere). `culprits`: build index -> model -> metric -> factor; `unusable`: build -> kind;
    `undecided`: (a, b) pairs left undecided for that many attempts."""

    def __init__(self, culprits: dict[int, dict[str, dict[str, float]]], unusable: dict[str, str] | None = None,
                 undecided: dict[tuple[str, str], int] | None = None) -> None:
        self.culprits, self.unusable, self.undecided = culprits, unusable or {}, undecided or {}
        self.calls: list[tuple[str, str, tuple[str, ...], int]] = []

    def effect(self, a: str, b: str, model: str, metric: str) -> float:
        lo, hi = BUILDS.index(a), BUILDS.index(b)
        return math.prod(c.get(model, {}).get(metric, 1.0) for i, c in self.culprits.items() if lo < i <= hi) - 1

    def __call__(self, a: str, b: str, *, models: Sequence[str], metrics: Sequence[str], attempt: int) -> AbResult:
        self.calls.append((a, b, tuple(models), attempt))
        for build in (a, b):
            if build in self.unusable:
                raise BuildUnusable(build, self.unusable[build], "fake", partial=None)
        result = AbResult(a, b, PLAN, tuple(metrics), tuple(Unit(f"{m}-1", m) for m in models), attempt)
        result.lab_s = {f"{m}-1": 600.0 for m in models}
        for model in models:
            for metric in metrics:
                change = self.effect(a, b, model, metric)
                call = (UNDECIDED if self.undecided.get((a, b), 0) >= attempt else
                        REGRESSED if change >= 0.015 else IMPROVED if change <= -0.015 else NO_CHANGE)
                result.gates.append(GateResult(metric, "ms", model, call, change, (change - 0.01, change + 0.01),
                                               None, None, 10, (f"{model}-1",), 5, "fake"))
        return result


def run(oracle: FakeOracle, builds: Sequence[str] = BUILDS):
    return bisect(builds, oracle, models=MODELS, metrics=METRICS)


@pytest.mark.parametrize("position", [1, 16, 31])
def test_one_culprit_first_middle_last_in_at_most_log2_n_plus_2_steps(position):
    oracle = FakeOracle({position: {"MT6989": {"first_token": 1.06, "token_median": 1.06}}})
    result = run(oracle)
    assert len(result.steps) <= math.log2(N) + 2
    mt = result.models["MT6989"]
    assert mt.status == "culprit" and [c.build for c in mt.culprits] == [BUILDS[position]]
    culprit = mt.culprits[0]
    assert culprit.after == BUILDS[position - 1] and culprit.candidates == (BUILDS[position],)
    assert {g.metric: round(g.change, 3) for g in culprit.effects} == {"first_token": 0.06, "token_median": 0.06}
    assert result.models["SM8650"].status == "no culprit"
    # the other model is left after the range step: no lab time is spent on it
    assert all(calls[2] == ("MT6989",) for calls in oracle.calls[1:])
    assert result.lab_minutes == pytest.approx(sum(10.0 for _ in result.steps))


def test_no_change_in_the_range_is_said_in_one_step():
    result = run(FakeOracle({}))
    assert len(result.steps) == 1
    for search in result.models.values():
        assert search.status == "no culprit" and "no culprit in the range" in search.notes[0]


def test_two_partial_culprits_are_both_found_with_their_own_effects():
    oracle = FakeOracle({9: {"SM8650": {"first_token": 1.03}}, 22: {"SM8650": {"first_token": 1.03}}})
    result = run(oracle)
    culprits = result.models["SM8650"].culprits
    assert [c.build for c in culprits] == [BUILDS[9], BUILDS[22]]
    for c in culprits:
        assert next(g for g in c.effects if g.metric == "first_token").change == pytest.approx(0.03)
    assert "nothing left over" in result.models["SM8650"].notes[-1]


def test_each_model_follows_its_own_culprit():
    oracle = FakeOracle({5: {"SM8650": {"token_median": 1.05}}, 27: {"MT6989": {"first_token": 0.94}}})
    result = run(oracle)
    assert [c.build for c in result.models["SM8650"].culprits] == [BUILDS[5]]
    assert [c.build for c in result.models["MT6989"].culprits] == [BUILDS[27]]
    assert result.models["MT6989"].directions == {"first_token": IMPROVED}  # an improvement is found too
    # after the range step the two searches share steps while they stand at the same builds
    assert result.steps[1].models == MODELS


def test_an_uninstallable_build_is_skipped_and_said():
    oracle = FakeOracle({20: {"SM8650": {"first_token": 1.06}}}, unusable={BUILDS[15]: "bad-signature"})
    result = run(oracle)
    assert result.skipped == {BUILDS[15]: "bad-signature: build b15: bad-signature: fake"}
    assert [c.build for c in result.models["SM8650"].culprits] == [BUILDS[20]]
    assert any(s.note == f"skipped {BUILDS[15]}: bad-signature" for s in result.steps)


def test_when_only_skipped_builds_stand_before_the_culprit_all_are_named():
    oracle = FakeOracle({20: {"SM8650": {"first_token": 1.06}}},
                        unusable={BUILDS[18]: "disk-full", BUILDS[19]: "crash-on-start"})
    culprit = run(oracle).models["SM8650"].culprits[0]
    assert culprit.build == BUILDS[20] and culprit.candidates == (BUILDS[18], BUILDS[19], BUILDS[20])


def test_an_unusable_good_build_cannot_be_compared():
    with pytest.raises(BuildUnusable):
        run(FakeOracle({}, unusable={BUILDS[0]: "digest-mismatch"}))


def test_an_undecided_step_is_repeated_with_more_blocks_then_said():
    culprit = {12: {"SM8650": {"first_token": 1.06}}}
    once = FakeOracle(culprit, undecided={(BUILDS[0], BUILDS[15]): 1})
    result = run(once)
    assert [c.build for c in result.models["SM8650"].culprits] == [BUILDS[12]]
    assert [(s.a, s.b, s.attempt) for s in result.steps[1:3]] == [(BUILDS[0], BUILDS[15], 1),
                                                                  (BUILDS[0], BUILDS[15], 2)]
    twice = FakeOracle(culprit, undecided={(BUILDS[0], BUILDS[15]): 2})
    search = run(twice).models["SM8650"]
    assert search.status == "undecided" and not search.culprits
    assert f"after {BUILDS[0]} and at or before {BUILDS[31]}" in search.notes[-1]


def test_a_range_left_undecided_is_said():
    search = run(FakeOracle({}, undecided={(BUILDS[0], BUILDS[31]): 2})).models["MT6989"]
    assert search.status == "undecided" and "undecided whether" in search.notes[0]


def test_through_the_runner_and_rule_on_a_planted_catalogue():
    noise = Noise({"first_token": 0.013, "token_median": 0.012}, {"inferences": 27.0}, 20.0)
    planted = [PlantedBuild(b) for b in BUILDS]
    planted[13] = PlantedBuild(BUILDS[13], {"MT6989": {"first_token": 1.06, "token_median": 1.06}})
    units = [Unit("e1", "SM8650"), Unit("e2", "SM8650"), Unit("e3", "MT6989")]
    bench = SimulatedBench(planted, units, noise, np.random.default_rng(7))

    def oracle(a: str, b: str, *, models: Sequence[str], metrics: Sequence[str], attempt: int) -> AbResult:
        return run_ab(bench, a, b, metrics=metrics, plan=plan_for(metrics, models, last=10 * attempt),
                      models=models, attempt=attempt)

    result = bisect(BUILDS, oracle, models=MODELS, metrics=METRICS)
    assert [c.build for c in result.models["MT6989"].culprits] == [BUILDS[13]]
    assert result.models["SM8650"].status == "no culprit"
    assert len(result.steps) <= 7


def test_the_report_says_each_step_the_culprit_and_what_was_skipped(tmp_path):
    import json

    from phonebench.bench.ab.report import bisect_text, write_bisect

    oracle = FakeOracle({20: {"SM8650": {"first_token": 1.06}}}, unusable={BUILDS[15]: "crash-on-start"})
    result = run(oracle)
    text = "\n".join(bisect_text(result))
    assert "culprit b20 (after b19)" in text and "first_token +6.00 %" in text
    assert f"skipped {BUILDS[15]}: crash-on-start" in text
    assert "MT6989: no culprit: no culprit in the range" in text
    assert text.splitlines()[-1] == f"{len(result.steps)} A/B steps, {result.lab_minutes:.1f} lab minutes"
    saved = json.loads(write_bisect(result, tmp_path).read_text())
    assert saved["models"]["SM8650"]["culprits"][0]["build"] == "b20"
    assert [s["index"] for s in saved["steps"]] == list(range(1, len(result.steps) + 1))
