"""The example lab's first tests (docs/writing-tests.md walks through them)."""
from __future__ import annotations

import numpy as np
import pytest

from phonebench.bench.checks.power import battery_emulation
from phonebench.core.verdict import Evidence, PlotHint


@pytest.mark.evidence("reported")  # what the phone says about itself: never more than its word
def test_the_phone_names_its_build(dut, record):
    fingerprint = dut.getprop("ro.build.fingerprint")
    record.check("build_fingerprint_present", int(bool(fingerprint)), "bool", 1, "==", detail=fingerprint)


def test_idle_power(dut, supply, sla, record):
    battery_emulation(supply)  # the analyzer powers the phone as its battery
    trace = supply.digitize(points=2000, interval_s=0.0002)
    power = trace.power_w()
    raw = record.raw("idle-power", {"t": trace.t, "y": power})  # kept beside results.json
    verdict = sla.get("idle_power_max").evaluate(power, evidence=Evidence.MEASURED)
    record(verdict.but(raw=(raw,), plot=PlotHint("trace", labels=("power",))))
    record.check("idle_power_mean", float(np.mean(power)), "W", None, statistic="mean",
                 evidence=Evidence.MEASURED)  # no limit: recorded as information
