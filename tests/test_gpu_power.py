"""Claim 5's load level from its draw: the relation's identification, its inversion with
uncertainty, the three rules on the verdict, and the profile's records against a fresh
identification on emulated reference units (benchmarks/identify_gpu_power.py)."""
from __future__ import annotations

import pytest

from phonebench.bench.checks import gpu_power
from phonebench.bench.checks.gpu_power import GpuPowerRelation, gpu_level_reading, identify_gpu_power
from phonebench.bench.checks.power import battery_emulation
from phonebench.bench.specs.sla import load_profile
from phonebench.core.verdict import Evidence, Outcome, Verdict
from device_double import emulated_supplies, make_device


def _verdict() -> Verdict:
    return Verdict(name="token_latency_p95_gpu_load", value=69.0, unit="ms", outcome=Outcome.PASS,
                   evidence=Evidence.MEASURED, detail="p95 < 150 ms")


def test_identification_keeps_the_mean_slope_and_the_units_spread():
    units = [[(b, s * b + 0.01) for b in (0.2, 0.4, 0.6, 0.8)] for s in (2.3, 2.4, 2.5)]
    relation = identify_gpu_power(units, "synthetic")
    assert relation.w_per_busy == pytest.approx(2.4) and relation.offset_w == pytest.approx(0.01)
    assert relation.unit_u == pytest.approx(0.1 / 2.4) and relation.units == 3 and relation.n == 12
    with pytest.raises(ValueError):
        identify_gpu_power([[(0.2, 0.5), (0.4, 1.0)]], "too few steps")


def test_the_level_and_its_uncertainty_follow_the_record():
    relation = GpuPowerRelation(2.4, 0.0, 0.0, 0.03, units=8)
    level = relation.level(1.8)
    assert level.busy == pytest.approx(0.75)
    # Student's t at 99 % for 7 degrees of freedom, on the unit spread of a new unit: 3.50 x 0.75 x 0.03 x sqrt(9/8)
    assert level.k == pytest.approx(3.4995, abs=1e-3)
    assert level.expanded_u == pytest.approx(3.4995 * 0.75 * 0.03 * (9 / 8) ** 0.5, rel=1e-3)


def test_the_three_rules_on_the_verdict():
    relation = GpuPowerRelation(2.4, 0.0, 0.0, 0.03, units=8)
    agreed = gpu_level_reading(0.76, 1.8, 0.0, relation).on(_verdict())
    assert agreed.outcome is Outcome.PASS and agreed.extra["condition_evidence"] == "measured"
    lie = gpu_level_reading(0.80, 0.72, 0.0, relation).on(_verdict())  # a 30 % load said to be 80 %
    assert lie.outcome is Outcome.FAIL and "was not there" in lie.explanation
    loose = GpuPowerRelation(2.4, 0.0, 0.0, 0.30, units=8)
    assert gpu_level_reading(0.76, 1.8, 0.0, loose).on(_verdict()).outcome is Outcome.INCONCLUSIVE
    unknown = gpu_level_reading(0.76, 1.8, 0.0, None).on(_verdict())
    assert unknown.outcome is Outcome.PASS and unknown.extra["condition_evidence"] == "reported"
    assert "phone's word (no GPU power record" in unknown.explanation
    no_analyzer = gpu_level_reading(0.76, None, 0.0, relation).on(_verdict())
    assert no_analyzer.extra["condition_evidence"] == "reported" and "no power analyzer" in no_analyzer.explanation


def test_the_profiles_records_are_what_reference_units_give():
    """Re-identified on fresh emulated reference units (another serial series than the record's),
    each model's slope lies within the record's own unit spread of the recorded one."""
    entry = load_profile("default").get("token_latency_p95_gpu_load")
    with emulated_supplies() as attach:
        for model in ("SM8650", "MT6989", "MT6991"):
            record = GpuPowerRelation.for_model(entry.parameters, model)
            assert record is not None and record.units >= 8
            units = []
            for i in range(4):
                device = make_device(f"{model}-MP", f"CHK-{model}-{i}")
                supply = attach(device)
                battery_emulation(supply)
                units.append(gpu_power.gpu_power_steps(device, supply))
            fresh = identify_gpu_power(units, "check")
            assert abs(fresh.w_per_busy / record.w_per_busy - 1.0) < 3 * record.unit_u, model
    assert GpuPowerRelation.for_model(entry.parameters, "SM8450") is None  # no record: the level stays reported
