"""Synthetic nights for the nightly's history (tests and benchmarks/bench_trend.py): complete runs
of two phones per model, one statistic set per phone, a planted step at a chosen build."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import numpy as np

Z95 = 1.6448536


@dataclass
class Plan:
    models: tuple[str, ...] = ("Model A", "Model B")
    phones_per_model: int = 2
    statistics: dict[str, float] = field(default_factory=lambda: {"first_token_p99": 130.0,
                                                                  "token_latency_std": 9.0,
                                                                  "sustained_power_mean": 3.9})
    rel_noise: float = 0.01  # night-to-night scatter of each phone's value
    step_night: int | None = None  # from this night on, `step_model` runs build "3.4.1" ...
    step_model: str = "Model A"
    step: dict[str, float] = field(default_factory=lambda: {"first_token_p99": 0.08})  # ... which moves these


def night(plan: Plan, index: int, rng: np.random.Generator, start: dt.datetime | None = None) -> dict:
    """Night `index` as a results.json record (complete), seeded by the caller's generator."""
    start = start or dt.datetime(2026, 1, 1, 1, 0)
    when = start + dt.timedelta(days=index)
    duts, tests = {}, []
    for model in plan.models:
        stepped = plan.step_night is not None and index >= plan.step_night and model == plan.step_model
        build = "3.4.1" if stepped else "3.4.0"
        for k in range(plan.phones_per_model):
            phone = f"{model[-1]}{k + 1:03d}"
            duts[phone] = {"serial": f"SN{phone}", "product_model": model, "soc_model": "SM8650",
                           "runtime_version": build}
            verdicts = []
            for name, nominal in plan.statistics.items():
                factor = 1.0 + (plan.step.get(name, 0.0) if stepped else 0.0)
                value = float(nominal * factor * (1.0 + rng.normal(0.0, plan.rel_noise)))
                verdicts.append({"name": name, "value": value, "unit": "ms", "comparator": "<=", "outcome": "pass",
                                 "evidence": "measured", "bound": value * (1 + Z95 * plan.rel_noise),
                                 "confidence": 0.95, "limit": nominal * 2})
            tests.append({"nodeid": "suites/test_sla_runtime.py::test_first_token", "dut": phone, "outcome": "passed",
                          "duration_s": 1.0, "verdicts": verdicts})
    return {"run_id": f"night-{index:04d}", "status": "complete", "started": when.isoformat() + "Z",
            "finished": (when + dt.timedelta(minutes=50)).isoformat() + "Z", "station": {"name": "nightly-rack"},
            "duts": duts, "tests": tests, "summary": {"passed": len(tests)}}
