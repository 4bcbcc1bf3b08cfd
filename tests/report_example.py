"""A synthetic run that uses every report section and plot kind, written through the real
RunRecorder: for the report and store tests, the benchmarks, and for seeing what a report looks
like without a station (`bench report --example DIR`). Seeded, so it is the same every time."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from phonebench.core.records import TestRecord
from phonebench.bench.stats.verdicts import value_verdict
from phonebench.bench.results.run_record import RunRecorder
from phonebench.core.verdict import Outcome, PlotHint, Uncertainty, UncertaintyComponent, Verdict
from phonebench.core.judge import compare


@dataclass
class ExampleDut:
    name: str = "bay1"
    serial: str = "EMU0001"
    soc_manufacturer: str = "Qualcomm"
    soc_model: str = "SM8650"
    microcode: str = "npu-mc 4.2.1-MP"
    fingerprint: str = "known"  # known | unknown | mismatch | inconsistent
    rule: str = "saturate"
    width_bits: int = 20
    adapter: str | None = "none"
    latency_ok: bool = True

    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "address": "127.0.0.1:5555", "serial": self.serial,
                "soc_manufacturer": self.soc_manufacturer, "soc_model": self.soc_model,
                "board_platform": self.soc_model.lower(), "hardware": "qcom", "product_model": "Phone X",
                "build_fingerprint": "vendor/phone/x:15/AP1/1:user/release-keys", "runtime_version": "1.0",
                "runtime_contract": "llmrt/1", "model": "assistant-35b-int4", "microcode": self.microcode,
                "capabilities": ["probe"]}


@dataclass
class ExampleRun:
    duts: list[ExampleDut] = field(default_factory=lambda: [ExampleDut()])
    station: str = "example-station"
    extra_checks: int = 0  # plain single-value checks added per DUT (for size benchmarks)
    seed: int = 0
    finish: bool = True


def write_example_run(results_dir: str | Path, run_id: str, spec: ExampleRun | None = None,
                      sinks: list[Any] | None = None) -> RunRecorder:
    spec = spec or ExampleRun()
    rng = np.random.default_rng(spec.seed)
    rec = RunRecorder(Path(results_dir), {"name": spec.station, "file": None, "emulated": True, "location": "lab",
                                          "sla_profile": "default", "host": "example-host",
                                          "duts": {d.name: "127.0.0.1:5555" for d in spec.duts},
                                          "instruments": {}}, run_id=run_id, sinks=sinks)
    for dut in spec.duts:
        rec.add_dut(dut.name, dut.identity())
    rec.add_instrument("scope", {"family": "keysight-infiniivision", "address": "TCPIP::127.0.0.1::5025::SOCKET",
                                 "attached_to": spec.duts[0].name,
                                 "identity": {"manufacturer": "KEYSIGHT TECHNOLOGIES", "model": "DSOX3024T",
                                              "serial": "MY0001", "firmware": "07.50", "address": "127.0.0.1"},
                                 "calibration": {"date": "2025-01-10", "due": "2026-01-10", "status": "valid"}})
    for dut in spec.duts:
        for record in _dut_tests(rec, dut, rng, spec.extra_checks):
            rec.add_test(record)
    if spec.finish:
        rec.finish()
    return rec


def _dut_tests(rec: RunRecorder, dut: ExampleDut, rng: np.random.Generator, extra: int) -> list[TestRecord]:
    tests = []
    node = f"suites/test_numerics.py::test_fingerprint[{dut.name}]"
    fp = Verdict("fingerprint", None, "", Outcome.PASS if dut.fingerprint == "known" else Outcome.FAIL,
                 statistic="class", extra={"soc": dut.soc_model, "microcode": dut.microcode, "rule": dut.rule,
                                           "width_bits": dut.width_bits, "verdict": dut.fingerprint,
                                           "profile": dut.microcode if dut.fingerprint == "known" else None,
                                           "adapter": dut.adapter})
    exact = compare("bit_exact_after_adapter", 0.0, "mismatches", 0.0, "==", statistic="count")
    tests.append(TestRecord(node, dut.name, "passed" if fp.passed else "failed", 1.2, verdicts=[fp, exact]))

    node = f"suites/test_latency.py::test_voice_latency[{dut.name}]"
    scale = 1.0 if dut.latency_ok else 1.4
    samples = rng.gamma(9.0, 20.0 * scale, size=1000)
    raw = rec.save_raw(node, "voice_latency", {"samples": samples})
    p99 = float(np.quantile(samples, 0.99))
    v = compare("voice_latency_p99", p99, "ms", 410.0, statistic="p99", bound=p99 * 1.03, confidence=0.95,
                n=1000, n_required=459, raw=[raw], plot=PlotHint("samples"), claim=1, evidence="measured",
                uncertainty=Uncertainty.combine([UncertaintyComponent("onset detection", 2.0)]))
    std = float(samples.std(ddof=1))
    s = compare("voice_latency_std", std, "ms", 87.0, statistic="std", bound=std * 1.05, confidence=0.95,
                n=1000, raw=[raw], plot=PlotHint("samples"), claim=1, evidence="measured")
    tests.append(TestRecord(node, dut.name, "passed" if v.passed and s.passed else "failed", 30.0,
                            markers=["acceptance"], verdicts=[v, s]))

    node = f"suites/test_power.py::test_sustained_power[{dut.name}]"
    t = np.arange(0.0, 60.0, 0.01)
    watts = 4.1 + 0.5 * np.sin(t / 3.0) + rng.normal(0, 0.15, t.size)
    raw = rec.save_raw(node, "power", {"t": t, "y": watts})
    avg = float(watts.mean())
    v = compare("sustained_power_mean", avg, "W", 4.2, statistic="mean", raw=[raw], claim=6, evidence="measured",
                plot=PlotHint("trace", average=avg, labels=("power",)))
    tests.append(TestRecord(node, dut.name, "passed" if v.passed else "failed", 60.0, verdicts=[v]))

    node = f"suites/test_thermal.py::test_cover_temperature[{dut.name}]"
    t = np.arange(0.0, 600.0, 1.0)
    cover = 25 + 16 * (1 - np.exp(-t / 120))
    raw = rec.save_raw(node, "cover", {"t": t, "y": cover, "y2": cover - 1.2})
    v = compare("back_cover_temperature_max", float(cover.max()), "degC", 41.7, statistic="max", raw=[raw],
                claim=7, evidence="measured", plot=PlotHint("trace", labels=("hotspot A", "hotspot B")))
    trip = value_verdict("npu_trip_temperature", 72.4, limit=72.0, unit="degC", comparator="==",
                         tolerance=2.0).but(claim=8, evidence="corroborated")  # by the shield thermocouple
    tests.append(TestRecord(node, dut.name, "passed" if v.passed and trip.passed else "failed", 600.0,
                            verdicts=[v, trip]))

    node = f"suites/test_ripple.py::test_redundancy_threshold[{dut.name}]"
    amp = np.arange(0.0, 61.0, 5.0)
    rate = 1e-6 * (1 + 11 * (amp / 50.0) ** 2)
    state = amp > 30
    raw = rec.save_raw(node, "sweep", {"x": amp, "y": rate, "state": state})
    v = compare("redundancy_engage_threshold", 32.5, "mV", 35.0, statistic="threshold", raw=[raw], claim=10,
                evidence="corroborated",
                plot=PlotHint("sweep", x_label="ripple amplitude (±mV)", y_label="INT4 MAC error rate",
                              limit_axis="x", log_y=True))
    tests.append(TestRecord(node, dut.name, "passed", 45.0, verdicts=[v]))

    if extra:
        node = f"suites/test_counters.py::test_counters[{dut.name}]"
        checks = [compare(f"counter_{i:04d}", float(rng.uniform(0, 1)), "ratio", 0.99) for i in range(extra)]
        tests.append(TestRecord(node, dut.name, "passed" if all(c.passed for c in checks) else "failed", 1.0,
                                verdicts=checks))
    return tests
