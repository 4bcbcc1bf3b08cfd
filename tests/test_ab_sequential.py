"""bench/ab: the A/B's sequential rule, its schedule and runner, and its operating characteristics
by a small seeded Monte-Carlo through the rule's own code."""
from __future__ import annotations

import math

import numpy as np
import pytest

from phonebench.bench.ab.operating import detectable_change, simulate
from phonebench.bench.ab.protocol import BuildUnusable
from phonebench.bench.ab.records import Unit
from phonebench.bench.ab.run import plan_for, run_ab
from phonebench.bench.ab.schedule import block_log_ratio, planned_seconds, unit_order
from phonebench.bench.ab.sequential import (IMPROVED, NO_CHANGE, REGRESSED, UNDECIDED, AbPlan, decide,
                                            pooled)
from phonebench.bench.ab.simulated import Noise, PlantedBuild, SimulatedBench

SIGMA = 0.013  # one block's log-ratio spread: about the emulated first token's (docs/ab-and-bisect.md)


# --------------------------------------------------------------------------- the rule

def test_pooling_weighs_every_block_alike_and_keeps_each_units_variance():
    est = pooled({"u1": [0.01, 0.03], "u2": [0.02, 0.02, 0.02, 0.02]})
    assert est is not None
    assert est.effect == pytest.approx(0.12 / 6)
    assert est.blocks == 6 and est.units == 2
    # u2 has no scatter: all the variance is u1's, over its one degree of freedom
    assert est.se == pytest.approx(math.sqrt(2 * np.var([0.01, 0.03], ddof=1)) / 6)
    assert est.df == pytest.approx(1.0)
    assert pooled({"u1": [0.01]}) is None


def test_the_three_calls_and_the_direction_of_worse():
    plan = AbPlan((3,), threshold=0.03)
    up = {"u": [0.06, 0.061, 0.059]}
    assert decide(up, plan, 3).call == REGRESSED
    assert decide(up, plan, 3, higher_is_worse=False).call == IMPROVED
    assert decide({"u": [-0.06, -0.061, -0.059]}, plan, 3).call == IMPROVED
    assert decide({"u": [0.001, -0.001, 0.0]}, plan, 3).call == NO_CHANGE
    # real (the interval excludes 0) but shown inside the threshold: no change beyond it, its size stated
    small = decide({"u": [0.005, 0.0051, 0.0049]}, plan, 3)
    assert small.call == NO_CHANGE and small.estimate.relative == pytest.approx(0.005, abs=1e-4)
    wide = decide({"u": [0.05, -0.05, 0.01]}, plan, 3)
    assert wide.call == UNDECIDED and "neither" in wide.detail  # the last look: said, not continued


def test_looks_outside_the_plan_continue_and_errors_are_spent_over_the_looks():
    plan = AbPlan((3, 5, 10), alpha=0.05, beta=0.05, family=2)
    assert decide({"u": [0.1, 0.1, 0.1, 0.1]}, plan, 4).call == "continue"
    spent = sum(plan.alpha_at(i) for i in range(3))
    assert spent == pytest.approx(0.05 / 4)  # two sides, two comparisons
    assert sum(plan.beta_at(i) for i in range(3)) == pytest.approx(0.05)
    with pytest.raises(ValueError):
        AbPlan((3, 2))


# --------------------------------------------------------------------------- operating characteristics

@pytest.fixture(scope="module")
def plan() -> AbPlan:
    return AbPlan.spaced(3, 10, family=4)


def test_identical_builds_raise_no_alarm_beyond_the_stated_rate(plan):
    oc = simulate(plan, change=0.0, sigma=SIGMA, reps=400, rng=np.random.default_rng(1))
    # alpha is shared by the 4 comparisons: one comparison's own rate is at most 0.05 / 4
    assert oc.false_alarm <= 0.05 / 4 + 3 * math.sqrt(0.0125 / 400)
    assert oc.no_change >= 0.95


def test_a_change_of_the_threshold_is_called_regressed_with_the_stated_power(plan):
    oc = simulate(plan, change=0.03, sigma=SIGMA, reps=400, rng=np.random.default_rng(2))
    assert oc.regressed >= 0.93  # 0.95 stated, 400 draws
    assert oc.no_change <= 0.05
    assert oc.mean_blocks < plan.max_blocks  # sequential: it stops early on average


def test_two_units_pooled_decide_sooner_and_a_noisy_unit_costs_blocks_not_correctness(plan):
    rng = np.random.default_rng(3)
    one = simulate(plan, change=0.03, sigma=SIGMA, reps=300, rng=rng)
    two = simulate(plan, change=0.03, sigma=[SIGMA, SIGMA], reps=300, rng=rng)
    noisy = simulate(plan, change=0.0, sigma=[SIGMA, 4 * SIGMA], reps=300, rng=rng)
    assert two.mean_blocks < one.mean_blocks
    assert noisy.false_alarm <= 0.03  # Welch's df keep the noisy unit from faking a change


def test_heavy_tailed_blocks_keep_the_false_alarm_rate(plan):
    oc = simulate(plan, change=0.0, sigma=SIGMA, reps=300, rng=np.random.default_rng(4), tails=4)
    assert oc.false_alarm <= 0.03


def test_detectable_change_is_where_the_power_is_reached():
    plan = AbPlan.spaced(3, 10)
    found = detectable_change(plan, sigma=SIGMA, reps=150, rng=np.random.default_rng(5), step=0.005)
    assert 0.015 <= found <= 0.04
    assert detectable_change(plan, sigma=1.0, reps=50, rng=np.random.default_rng(6), ceiling=0.1) == 0.1


# --------------------------------------------------------------------------- schedule and runner

def test_abba_blocks_install_only_when_the_build_changes():
    slots = unit_order(2, "A")
    assert "".join(s.side for s in slots) == "ABBAABBA"
    assert [s.install for s in slots] == [True, True, False, True, False, True, False, True]
    assert "".join(s.side for s in unit_order(1, "B")) == "BAAB"
    assert planned_seconds(2, 30.0, 10.0) == 8 * 30.0 + 5 * 10.0
    assert block_log_ratio((1.0, 1.0), (2.0, 2.0)) == pytest.approx(math.log(2.0))


def _bench(changes: dict, noise: Noise, seed: int = 0, **options) -> SimulatedBench:
    builds = [PlantedBuild("A"), PlantedBuild("B", changes)]
    units = [Unit("u1", "m1"), Unit("u2", "m1"), Unit("u3", "m2")]
    return SimulatedBench(builds, units, noise, np.random.default_rng(seed), **options)


NOISE = Noise({"first_token": SIGMA, "sustained_power": 0.001}, {"inferences": 30.0, "generate": 10.0}, 20.0)


def test_the_runner_calls_each_model_apart_and_counts_installs_as_lab_time():
    bench = _bench({"m1": {"first_token": 1.06}}, NOISE)
    metrics = ("first_token", "sustained_power")
    result = run_ab(bench, "A", "B", metrics=metrics, plan=plan_for(metrics, ["m1", "m2"]))
    assert result.gate("first_token", "m1").call == REGRESSED
    assert result.gate("first_token", "m1").change == pytest.approx(0.06, abs=0.02)
    assert result.gate("first_token", "m2").call == NO_CHANGE
    assert result.gate("sustained_power", "m1").call == NO_CHANGE
    assert result.gate("sustained_power", "m1").look == 3  # settled at the first look: measured no further
    segments = [s for s in result.segments if s.unit == "u1"]
    installs = sum(s.install is not None for s in segments)
    assert result.lab_s["u1"] == pytest.approx(installs * 20.0 + 30.0 * len(segments) + 10.0 * 12)
    # counterbalanced within a model: u1 starts ABBA, u2 BAAB
    assert [s.side for s in result.segments if s.unit == "u2"][:4] == ["B", "A", "A", "B"]


def test_abba_cancels_a_warming_phone_that_alternation_would_read_as_a_change():
    drifting = Noise({"first_token": 0.002}, {"inferences": 30.0}, 20.0, drift=0.01)
    result = run_ab(_bench({}, drifting), "A", "B", metrics=("first_token",), plan=AbPlan.spaced(3, 6))
    assert {g.call for g in result.gates} == {NO_CHANGE}
    # the same drift read by plain alternation (A then B) is a 1 % "change" per segment
    assert abs(result.gate("first_token", "m1").change) < 0.002


def test_an_uninstallable_build_stops_the_ab_keeping_what_was_measured():
    builds = [PlantedBuild("A"), PlantedBuild("B", unusable="crash-on-start")]
    bench = SimulatedBench(builds, [Unit("u1", "m1")], NOISE, np.random.default_rng(0))
    with pytest.raises(BuildUnusable) as caught:
        run_ab(bench, "A", "B", metrics=("first_token",), plan=AbPlan.spaced(3, 6))
    assert caught.value.build == "B" and caught.value.kind == "crash-on-start"
    partial = caught.value.partial
    assert partial is not None and partial.stopped["u1"].startswith("build B")
    assert partial.lab_s["u1"] == pytest.approx(20.0 + 30.0 + 20.0)  # install A, its segment, the failed install
