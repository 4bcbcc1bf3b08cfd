"""The cover loop's warm-up may end on a bound of the remaining rise (the nightly's
`warmup_bound_c`): the bound covers a first-order approach up to its time constant, ends the
warm-up only once it is small, and joins the cover verdicts' uncertainty."""
from __future__ import annotations

import numpy as np
import pytest

from phonebench.bench.checks import thermal as thermal_check
from phonebench.bench.specs.sla import load_profile
from phonebench.core.verdict import Outcome

PERIOD_S = 3.0


def approach(t: np.ndarray, tau_s: float, *, rise_c: float = 6.0, noise_c: float = 0.05,
             seed: int = 1) -> np.ndarray:
    """A cover warming towards 40 degC with one time constant, read with thermocouple noise."""
    rng = np.random.default_rng(seed)
    return 40.0 - rise_c * np.exp(-t / tau_s) + rng.normal(0.0, noise_c, t.size)


@pytest.mark.parametrize("tau_s", [200.0, 400.0, 600.0])
@pytest.mark.parametrize("seed", range(5))
def test_the_bound_covers_what_is_left_of_an_approach_no_slower_than_its_time_constant(tau_s, seed):
    t = np.arange(0.0, 1800.0, PERIOD_S)
    y = approach(t, tau_s, seed=seed)
    for end in (300.0, 600.0, 900.0, 1200.0):
        window = (t > end - thermal_check.SLOPE_WINDOW_S) & (t <= end)
        left = 6.0 * np.exp(-end / tau_s)  # what the noiseless approach has still to rise
        assert thermal_check.remaining_rise_bound(t[window], y[window]) >= left - 0.05


def test_a_flat_or_falling_cover_has_nothing_left_and_too_few_readings_bound_nothing():
    t = np.arange(0.0, 120.0, PERIOD_S)
    assert thermal_check.remaining_rise_bound(t, 40.0 - 0.001 * t) == 0.0
    assert thermal_check.remaining_rise_bound(t[:2], np.array([40.0, 40.1])) == np.inf
    assert thermal_check.remaining_rise_bound(t[:4], np.array([40.0, np.nan, np.nan, 40.2])) == np.inf


def warm_up(setup: thermal_check.ThermalSetup, y: np.ndarray) -> thermal_check.ThermalRun:
    """Feed readings (both cover probes alike, the room at 25 degC) until the warm-up ends."""
    run = thermal_check.ThermalRun(setup)
    for i, celsius in enumerate(y):
        elapsed = (i + 1) * PERIOD_S
        run.t_s.append(elapsed)
        for channel, value in (("T1", celsius), ("T2", celsius - 1.0), ("T3", 25.0)):
            run.probes.setdefault(channel, []).append(value)
        if thermal_check.warmed_up(run, elapsed):
            break
    return run


def test_the_warm_up_ends_on_the_bound_before_the_steady_window_and_never_before_its_least_time():
    t = np.arange(PERIOD_S, 3600.0, PERIOD_S)
    y = approach(t, 400.0)
    steady = warm_up(thermal_check.ThermalSetup(warmup_s=300.0), y)
    bounded = warm_up(thermal_check.ThermalSetup(warmup_s=300.0, remaining_rise_c=1.0), y)
    assert steady.stable and steady.remaining_rise_c is None
    assert bounded.measure_from and not bounded.stable and bounded.remaining_rise_c <= 1.0
    ends = (steady.t_s[steady.measure_from - 1], bounded.t_s[bounded.measure_from - 1])
    assert thermal_check.BOUND_FROM_S <= ends[1] < ends[0]
    late = warm_up(thermal_check.ThermalSetup(warmup_s=1100.0, remaining_rise_c=1.0), y)
    assert late.t_s[late.measure_from - 1] >= 1100.0  # the least warm-up still holds


def test_a_bound_ended_warm_up_carries_its_bound_into_the_cover_verdicts():
    profile = load_profile("nightly")
    cover = {"cover_max": profile.get(thermal_check.COVER_MAX),
             "cover_spread": profile.get(thermal_check.COVER_SPREAD)}
    setup = thermal_check.setup_for(cover["cover_max"])
    assert setup.remaining_rise_c == cover["cover_max"].parameters["warmup_bound_c"]
    assert thermal_check.setup_for(load_profile("default").get(thermal_check.COVER_MAX)).remaining_rise_c is None
    t = np.arange(PERIOD_S, 3600.0, PERIOD_S)
    run = warm_up(setup, approach(t, 400.0))
    y = approach(t, 400.0, seed=2)
    for i in range(run.measure_from, run.measure_from + 20):  # the measurement's readings
        for channel, value in (("T1", y[i]), ("T2", y[i] - 1.0), ("T3", 25.0)):
            run.probes[channel].append(value)
        run.t_s.append((i + 1) * PERIOD_S)
    run.status = [0] * len(run.t_s)
    # The probes calibrated, as a lab's are: the cover is referred to 25 degC from T3, and an
    # uncalibrated ambient probe's 1 degC tolerance would leave this cover inconclusive (U ~2.0).
    run.calibration = {"corrections": {f"{ch}_offset_c": 0.0 for ch in ("T1", "T2", "T3")},
                       "uncertainties": {f"{ch}_offset_c": 0.05 for ch in ("T1", "T2", "T3")},
                       "certificates": ["CAL-T-1"]}
    verdicts = {v.name: v for v in thermal_check._thermal_verdicts(run, **cover)}
    hottest = verdicts["cover_temp_max"]
    components = {c.name: c for c in hottest.uncertainty.components}
    assert components["remaining rise"].standard == pytest.approx(run.remaining_rise_c / np.sqrt(3))
    assert hottest.uncertainty.expanded >= run.remaining_rise_c  # the upper bound covers what is left
    assert "ended on a bound" in hottest.explanation and hottest.outcome is Outcome.PASS
