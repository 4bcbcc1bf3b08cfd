"""A fleet, not clones (issue 31): every emulated unit draws its own process variation from its
SoC's stated spread, reproducibly; the SoC's NPU throughput (what the fingerprint measures) sets
how long compute-bound work takes; no two phones of the default fleet agree to nine digits."""
from __future__ import annotations

import itertools

import numpy as np

from phonebench.emulation.npu_personas import default_fleet, get_persona
from phonebench.emulation.phones import emulated_phone
from phonebench.emulation.runtime_timing import Conditions, TokenTimer, timing_profile
from phonebench.emulation.unit_variation import NOMINAL, TRUNCATE_SIGMA, SPREADS, draw, for_spec


def test_every_unit_of_the_default_fleet_has_its_own_variation():
    fleet = default_fleet()
    variations = [for_spec(s) for s in fleet]
    for a, b in itertools.combinations(variations, 2):
        assert a != b
    assert variations == [for_spec(s) for s in fleet]  # a seed makes it repeatable


def test_a_units_factors_stay_inside_its_socs_truncated_spread():
    spread = SPREADS["SM8650"]
    for serial in (f"U{i:04d}" for i in range(200)):
        unit = draw("SM8650", 70.4, 0, serial)
        assert abs(unit.leakage - 1.0) <= TRUNCATE_SIGMA * spread.leakage + 1e-12
        assert abs(unit.npu_speed - 1.0) <= TRUNCATE_SIGMA * spread.npu_speed + 1e-12
        assert abs(unit.audio_latency_s) <= TRUNCATE_SIGMA * spread.audio_latency_s + 1e-12


def test_prompt_processing_follows_the_socs_npu_throughput():
    """The SoC the fingerprint's timing signature measures at 110 GMAC/s processes a prompt in
    70.4/110 of the reference SoC's time; a decode step, bound by DRAM, barely moves."""
    fast = draw("MT6991", get_persona("MT6991-MP").die.npu_gmac_per_s, 1, "X")
    cond = Conditions()

    def mean_times(unit):
        timer = TokenTimer(timing_profile("nominal"), np.random.default_rng(3), unit)
        prefill, decode = [], []
        for _ in range(400):
            timer.start_run()
            prefill.append(timer.prefill(32, cond).total_s)
            decode.append(timer.decode(cond).total_s)
        return np.mean(prefill), np.mean(decode)

    (p_ref, d_ref), (p_fast, d_fast) = mean_times(NOMINAL), mean_times(fast)
    assert abs(p_fast / p_ref - fast.compute_scale) < 1e-9  # the same draws, scaled
    assert 0.95 < d_fast / d_ref < 1.0


def test_two_phones_of_one_soc_draw_different_power_and_answer_latency():
    one, two = (emulated_phone(s) for s in default_fleet()[:2])  # both SM8650
    assert one.world.phase_power_w("decode") != two.world.phase_power_w("decode")
    assert one.world.phase_power_w("idle") != two.world.phase_power_w("idle")
    assert one.world.variation.audio_latency_s != two.world.variation.audio_latency_s
