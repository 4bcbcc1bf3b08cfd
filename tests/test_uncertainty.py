"""phonebench.bench.stats.uncertainty: the budgets name their components, calibration shrinks them, and a guarded
SLA entry turns a value within U of its limit into INCONCLUSIVE (the negative control)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from phonebench.bench.stats import uncertainty as unc
from phonebench.bench.specs.sla import load_profile
from phonebench.bench.results.summary import verdict_text
from phonebench.core.verdict import Evidence, Outcome, Uncertainty


def names(u) -> set[str]:
    return {c.name for c in u.components}


def test_standard_errors_of_the_statistics():
    x = np.random.default_rng(0).normal(10, 2, 400)
    assert unc.standard_error(x, "mean") == pytest.approx(2 / 20, rel=0.1)
    assert unc.standard_error(x, "std") == pytest.approx(2 / math.sqrt(2 * 399), rel=0.1)
    assert 0 < unc.standard_error(x, "p99") < 1.0
    assert unc.standard_error(x, "max") == 0.0 and math.isnan(unc.standard_error(x[:1], "mean"))


def test_voice_budget_components_and_calibration():
    latency_ms = np.random.default_rng(1).normal(250, 24, 299)
    bare = unc.voice_budget(latency_ms, "p99", 1e3, sample_interval_s=1e-4, typical_s=0.25)
    assert names(bare) == {"repeatability", "sample interval", "onset detector residual", "fixture delay",
                           "channel skew", "scope timebase"}
    fixture = next(c for c in bare.components if c.name == "fixture delay")
    assert fixture.standard == pytest.approx(1.0 / math.sqrt(3)) and "not subtracted" in fixture.note
    calibration = {"corrections": {"fixture_delay_s": 2.9e-4, "ch2_deskew_s": 3.5e-8},
                   "uncertainties": {"fixture_delay_s": 2e-6, "ch2_deskew_s": 1e-10}, "certificates": ["CAL-1"]}
    calibrated = unc.voice_budget(latency_ms, "p99", 1e3, sample_interval_s=1e-4, calibration=calibration,
                                  fixture_delay_s=2.9e-4, typical_s=0.25)
    assert calibrated.expanded < bare.expanded
    assert next(c for c in calibrated.components if c.name == "fixture delay").standard == pytest.approx(2e-3)
    # subtracted, without its record: the calibration's +-20 % acceptance, rectangular
    told = unc.voice_budget(latency_ms, "p99", 1e3, sample_interval_s=1e-4, fixture_delay_s=2.9e-4)
    assert next(c for c in told.components if c.name == "fixture delay").standard == \
        pytest.approx(0.2 * 0.29 / math.sqrt(3))
    dialog = unc.voice_budget(latency_ms * 10, "p99", 1.0, sample_interval_s=1e-4, dialog=True)
    assert "end-of-speech bias" in names(dialog) and dialog.coverage_factor == 2.0


def test_power_and_thermal_budgets():
    power = unc.power_budget(np.full(10, 3.95) + np.arange(10) * 1e-3, "mean", power_w=3.95, volts=3.85)
    assert names(power) == {"repeatability", "analyzer current accuracy", "analyzer voltage accuracy",
                            "current zero offset"}
    assert 0.01 < power.expanded < 0.05
    zeroed = unc.power_budget(np.full(10, 3.95), "mean", power_w=3.95, volts=3.85,
                              calibration={"corrections": {"current_zero_a": 1.8e-3},
                                           "uncertainties": {"current_zero_a": 1e-5}})
    assert zeroed.expanded < power.expanded / 2
    cover = unc.thermal_budget(np.full(60, 39.0), "max", channels=("T1", "T2"))
    spread = unc.thermal_budget(np.full(60, 2.0), "max", channels=("T1", "T2"), difference=True)
    assert spread.expanded == pytest.approx(cover.expanded * math.sqrt(2), rel=0.05)
    assert "resolution" in names(cover) and "reference thermometer" not in names(cover)


def test_at_a_confidence_bound_the_guard_band_leaves_out_the_sampling_error_the_bound_already_states():
    """An honest night's voice p99 (2026-12-06, `make run`, EMU0002): 299 trials, the slowest near
    375 ms against 410 ms. The order-statistic bound already carries the p99's sampling error;
    adding it again as U made the unit INCONCLUSIVE 35 ms inside the limit."""
    entry = load_profile("default").get("voice_latency_p99")
    rng = np.random.default_rng(7)
    trials = np.concatenate([rng.normal(0.300, 0.012, 294), [0.330, 0.333, 0.336, 0.352, 0.3745]])
    budget = unc.voice_budget(trials * 1e3, "p99", 1e3, sample_interval_s=1e-4, typical_s=0.3)
    assert budget.expanded > 410 - 374.5  # counted twice, the band would hold this unit
    assert budget.beyond_sampling < budget.expanded / 10
    honest = entry.evaluate(trials * 1e3, evidence=Evidence.MEASURED, uncertainty=budget)
    assert honest.outcome is Outcome.PASS and honest.bound == pytest.approx(374.5)
    # Negative control: a unit whose bound sits within the Type B band of the limit stays INCONCLUSIVE.
    near = np.concatenate([trials[:-1], [0.4095]]) * 1e3
    held = entry.evaluate(near, evidence=Evidence.MEASURED, uncertainty=budget)
    assert held.outcome is Outcome.INCONCLUSIVE and "beyond sampling" in held.explanation
    # On the bound's far side the sampling error still counts: one trial past the limit is no FAIL.
    past = entry.evaluate(np.concatenate([trials[:-1], [0.415]]) * 1e3, evidence=Evidence.MEASURED,
                          uncertainty=budget)
    assert past.basis is Outcome.FAIL and past.outcome is Outcome.INCONCLUSIVE
    # A bound that is the value itself (a max) keeps the whole U: no confidence carries the sampling.
    cover = load_profile("default").get("back_cover_temperature_max")
    readings = np.full(60, 41.0)
    reading_budget = unc.thermal_budget(readings, "max", channels=("T1", "T2"))
    assert cover.evaluate(readings, evidence=Evidence.MEASURED, uncertainty=reading_budget,
                          ambient_c=25.0).outcome is Outcome.INCONCLUSIVE
    assert Uncertainty.from_dict(budget.to_dict()).beyond_sampling == pytest.approx(budget.beyond_sampling)


def test_guarded_entry_is_inconclusive_within_u_and_the_summary_shows_it():
    entry = load_profile("default").get("back_cover_temperature_max")
    budget = unc.thermal_budget(np.full(60, 41.2), "max", channels=("T1", "T2"))
    near = entry.evaluate(np.full(60, 41.2), evidence=Evidence.MEASURED, uncertainty=budget, ambient_c=25.0)
    assert near.outcome is Outcome.INCONCLUSIVE and "expanded uncertainty" in near.explanation
    far = entry.evaluate(np.full(60, 38.0), evidence=Evidence.MEASURED, uncertainty=budget, ambient_c=25.0)
    assert far.outcome is Outcome.PASS and far.uncertainty is budget
    hot = entry.evaluate(np.full(60, 44.0), evidence=Evidence.MEASURED, uncertainty=budget, ambient_c=25.0)
    assert hot.outcome is Outcome.FAIL
    simple = load_profile("default").get("cover_temp_spread")
    assert simple.evaluate(np.full(60, 2.0), evidence=Evidence.MEASURED, uncertainty=budget).outcome is Outcome.PASS
    text = verdict_text(far)
    assert "max 38 °C vs limit ≤ 41.7 °C" in text and f"U ±{budget.expanded:.4g} °C" in text
