"""Lab time: the station-clock seconds a phone spends on the bench, as data (docs/labtime.md).

Each test record carries `lab_time_s` (station clock at setup start to teardown end); this
module reads them back per test, per claim and per phone, and plans a night from them: a test's
expected lab time is what the store measured for it on that phone model, scaled by the profile's
sample size now over the sample size then, or the documented default where the store has none.
A night's makespan puts the phones on their bays (longest first, each bay one phone at a time).
"""
from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# Lab seconds per test on one phone when the store has measured none for its model: the emulated
# station's figures, measured by benchmarks/bench_labtime.py (docs/labtime.md). Keys are test keys.
DEFAULT_LAB_TIME_S: Mapping[str, float] = {
    "suites/test_sla_runtime.py::test_npu_thermal_trip_soak": 2536.0,
    "suites/test_sla_instruments.py::test_sustained_use": 2636.0,
    "suites/test_sla_runtime.py::test_token_latency_std": 393.0,
    "suites/test_sla_instruments.py::test_sustained_and_peak_power": 178.0,
    "suites/test_instruments.py::test_probes_warm_under_load_and_cool_at_idle": 61.0,
    "suites/test_sla_instruments.py::test_voice_and_power_sanity": 102.0,
    "suites/test_sla_runtime.py::test_token_latency_under_gpu_load": 76.0,
    "suites/test_sla_runtime.py::test_redundancy_slowdown": 68.0,
    "suites/test_sla_runtime.py::test_first_token": 47.0,
    "suites/test_sla_runtime.py::test_runtime_counters": 31.0,
}
DEFAULT_OTHER_TEST_S = 5.0  # any test not listed above (the others took 124 s together on EMU0001)


def test_key(nodeid: str, dut: str | None) -> str:
    """The test without its phone: `suites/x.py::test_a[EMU0001]` -> `suites/x.py::test_a`.

    Other parameters stay (`test_b[scope-EMU0001]` -> `test_b[scope]`)."""
    match = re.fullmatch(r"(.*?)\[(.*)\]", nodeid)
    if match is None or dut is None:
        return nodeid
    rest = [part for part in match.group(2).split("-") if part != dut]
    return f"{match.group(1)}[{'-'.join(rest)}]" if rest else match.group(1)


def per_test(data: Mapping[str, Any], dut: str | None = None) -> dict[str, float]:
    """Lab seconds per test key (of one phone, or summed over the phones) in a run record."""
    out: dict[str, float] = {}
    for test in data.get("tests") or []:
        seconds = test.get("lab_time_s")
        if seconds is None or (dut is not None and test.get("dut") != dut):
            continue
        key = test_key(test["nodeid"], test.get("dut"))
        out[key] = out.get(key, 0.0) + float(seconds)
    return out


def per_claim(data: Mapping[str, Any], dut: str | None = None) -> dict[int, float]:
    """Lab seconds per claim: a test's lab time counts for every claim its verdicts decide (one
    study feeding several claims counts in full for each: the sum over claims is not the total)."""
    out: dict[int, float] = {}
    for test in data.get("tests") or []:
        seconds = test.get("lab_time_s")
        if seconds is None or (dut is not None and test.get("dut") != dut):
            continue
        for claim in sorted({v.get("claim") for v in test.get("verdicts") or [] if v.get("claim") is not None}):
            out[claim] = out.get(claim, 0.0) + float(seconds)
    return out


def per_claim_share(data: Mapping[str, Any], dut: str | None = None) -> dict[int, float]:
    """Lab seconds per claim with a study's time split evenly over the claims it decides: what
    each claim costs once studies are shared (these add up to the time of the tests that decide a
    claim; per_claim gives what each claim rides on)."""
    out: dict[int, float] = {}
    for test in data.get("tests") or []:
        seconds = test.get("lab_time_s")
        if seconds is None or (dut is not None and test.get("dut") != dut):
            continue
        claims = sorted({v.get("claim") for v in test.get("verdicts") or [] if v.get("claim") is not None})
        for claim in claims:
            out[claim] = out.get(claim, 0.0) + float(seconds) / len(claims)
    return out


def largest_requirement(samples: Iterable[tuple[str, int]]) -> tuple[str | None, int | None]:
    """(verdict name, n_required) of the verdict requiring the most samples: the one a test's lab
    time scales with when the profile changes that requirement."""
    best: tuple[str | None, int | None] = (None, None)
    for name, n_required in samples:
        if best[1] is None or n_required > best[1]:
            best = (name, int(n_required))
    return best


@dataclass(frozen=True)
class TestRate:
    """What the store measured for one test on one phone model."""

    __test__ = False  # not a pytest test class

    key: str
    lab_time_s: float  # mean over the runs measured
    runs: int
    metric: str | None = None  # the verdict requiring the most samples (a profile metric when named after one)
    n: int | None = None  # the samples it required then


@dataclass(frozen=True)
class PlannedTest:
    __test__ = False

    key: str
    lab_time_s: float
    source: str  # "store (3 runs)", "store, scaled 299 -> 150 samples", "default"


@dataclass
class PhonePlan:
    dut: str
    model: str | None
    tests: list[PlannedTest] = field(default_factory=list)

    @property
    def lab_time_s(self) -> float:
        return sum(t.lab_time_s for t in self.tests)


def plan_phone(dut: str, model: str | None, keys: Iterable[str], rates: Mapping[str, TestRate],
               n_planned: Mapping[str, int]) -> PhonePlan:
    """The expected lab time of each test key on this phone: the store's rate for the model,
    scaled by the sample count the profile requires now (n_planned[metric]) over the one its
    verdict required then; a verdict not named after a profile metric (a sanity check's own
    fixed count) is not scaled."""
    plan = PhonePlan(dut, model)
    for key in keys:
        rate = rates.get(key)
        if rate is None:
            plan.tests.append(PlannedTest(key, DEFAULT_LAB_TIME_S.get(key, DEFAULT_OTHER_TEST_S), "default"))
            continue
        seconds, source = rate.lab_time_s, f"store ({rate.runs} run{'s' if rate.runs != 1 else ''})"
        wanted = n_planned.get(rate.metric or "")
        if wanted and rate.n and wanted != rate.n:
            seconds *= wanted / rate.n
            source += f", scaled {rate.n} -> {wanted} samples"
        plan.tests.append(PlannedTest(key, seconds, source))
    return plan


def makespan(phone_seconds: Iterable[float], slots: int) -> float:
    """Longest-first list scheduling of phones onto `slots` bays tested at once (each bay one phone
    at a time): the time the last bay finishes. Within 4/3 of the optimum (Graham)."""
    if slots < 1:
        raise ValueError(f"slots must be >= 1, got {slots}")
    finish = [0.0] * slots
    for seconds in sorted(phone_seconds, reverse=True):
        heapq.heapreplace(finish, finish[0] + seconds)
    return max(finish)


def minutes(seconds: float) -> str:
    return f"{seconds / 60.0:.1f} min"


def rates_from_facts(facts: Iterable[Any]) -> dict[str, TestRate]:
    """Per test key, the mean lab time over the stored runs (phonebench.bench.store LabTimeFact rows), with the
    sample count its most demanding verdict required, so a plan can scale it to the profile's now."""
    grouped: dict[str, list[Any]] = {}
    for fact in facts:
        grouped.setdefault(test_key(fact.nodeid, fact.dut), []).append(fact)
    rates = {}
    for key, rows in grouped.items():
        metric, required = largest_requirement(s for row in rows for s in row.samples)
        rates[key] = TestRate(key, sum(r.lab_time_s for r in rows) / len(rows), len({r.run_id for r in rows}),
                              metric, required)
    return rates
