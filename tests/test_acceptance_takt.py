"""The takt plan's parts: the sequential rules decide early only when their bound allows, fail
at the first bad sample, fall back to the fixed-n rule at the last look; the shared-instrument
calendar never double-books and counts the waiting."""
from __future__ import annotations

import numpy as np
import pytest

from phonebench.bench.procedures.acceptance.takt import BUDGETS, SharedInstrument, budget_total
from phonebench.bench.procedures.acceptance.disposition import CHECKS
from phonebench.bench.stats.sequential import SequentialPlan, mean_rule, tolerance_factor, tolerance_rule

PLAN = SequentialPlan((5, 8), confidence=0.90)


def test_tolerance_factor_matches_published_tables():
    # One-sided normal tolerance factors (p = 0.99, 95 %): n = 5 -> 5.741, n = 10 -> 3.981.
    assert tolerance_factor(5, 0.99, 0.95) == pytest.approx(5.741, abs=0.01)
    assert tolerance_factor(10, 0.99, 0.95) == pytest.approx(3.981, abs=0.01)


def test_a_tight_good_unit_passes_at_the_first_look_and_not_before():
    x = [248.0, 251.0, 246.0, 250.0, 249.0]
    assert tolerance_rule(x[:4], 410, PLAN).decision == "continue"
    result = tolerance_rule(x, 410, PLAN)
    assert result.decision == "pass" and result.n == 5 and result.bound < 410


def test_a_late_sample_fails_at_once_and_a_wide_unit_goes_to_the_census():
    assert tolerance_rule([250.0, 420.0], 410, PLAN).decision == "fail"
    assert tolerance_rule([250.0, np.inf], 410, PLAN).decision == "fail"  # no answer
    wide = [200.0, 390.0, 220.0, 380.0, 260.0]
    assert tolerance_rule(wide, 410, PLAN).decision == "continue"  # bound past the limit: undecided
    assert tolerance_rule(wide + [300.0, 310.0, 320.0], 410, PLAN).decision == "pass"  # census at n_max


def test_the_mean_rule_passes_fails_or_waits():
    assert mean_rule([3.50, 3.51], 4.2, SequentialPlan((2, 3, 4), 0.9)).decision == "pass"
    assert mean_rule([4.80, 4.81], 4.2, SequentialPlan((2, 3, 4), 0.9)).decision == "fail"
    assert mean_rule([4.0, 4.4], 4.2, SequentialPlan((2, 3, 4), 0.9)).decision == "continue"
    with pytest.raises(ValueError, match="looks"):
        SequentialPlan((4, 3))


def test_every_check_has_a_budget_and_the_plan_fits_a_minute():
    assert set(BUDGETS) == set(CHECKS)
    assert budget_total() + 10.0 <= 60.0
    assert all(b.hold_s >= b.budget_s for b in BUDGETS.values())


def test_the_shared_calendar_books_the_earliest_free_slot():
    scope = SharedInstrument("scope")
    first = scope.book("A", 100.0, 30.0)
    scope.release(first, 118.0)  # used 18 s of its 30 s hold
    second = scope.book("B", 105.0, 30.0)
    assert second.start == 118.0 and scope.waited_s["B"] == pytest.approx(13.0)
    early = scope.book("A", 50.0, 20.0)  # fits before the first slot: no wait
    assert (early.start, scope.waited_s["A"]) == (50.0, 0.0)
    scope.release(second, 140.0)
    assert scope.conflicts == 0 and scope.busy_s == pytest.approx(40.0)
    late = scope.book("A", 60.0, 35.0)  # 70..100 is too short a gap for 35 s: after B
    assert late.start == 140.0
