"""Claims 3-5 and 14 rest on what the bench observes, not on what the phone says about itself.

The station clock (host or emulated time server), token arrivals stamped over a streaming ADB
read, the report checked against them, the GPU load against the GPU's own counters, the counters
against physics and /proc/vmstat, and the lying personas that each turn their check to FAIL while
the honest phone passes. The claims run end to end on every transport (`over_adb`: adb-shell
direct, and through a private adb server with the shell protocol), stamped on the emulated SCPI
time server; a time server of another world is a station error. In-process phones
(tests/device_double.py), stamping on their world's clock, serve the GPU-load cases.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from phonebench.bench.phone.adapters import shipped_numerics
from phonebench.bench.results.compare import compare_runs
from phonebench.bench.checks import counters, token_power, tokens
from phonebench.bench.checks.targets import targets
from phonebench.core.errors import InstrumentError, InvalidMeasurement
from phonebench.core.verdict import Evidence, Outcome, Verdict
from phonebench.bench.specs.sla import SlaProfile, load_profile
from device_double import PhoneDevice, WorldClock, make_device
from phonebench.drivers.clock import HostClock, ScpiClock
from phonebench.drivers import gpuload as gpuload_driver
from phonebench.drivers.gpuload import GpuLoad, read_gpu_busy
from phonebench.drivers.power import KeysightN6705C
from phonebench.drivers.runtime import RuntimeClient
from phonebench.emulation.phones import emulated_phone
from phonebench.emulation.instruments.clock import ClockServer
from phonebench.emulation.instruments.power_analyzer import PowerAnalyzerServer
from phonebench.emulation.npu_personas import phone_spec
from phonebench.emulation.runtime_personas import PERSONAS
from tests.adb_helpers import EmulatedStation, adb_key, adb_server, over_adb  # noqa: F401 - fixtures
from phonebench.core import signing

NPU = "SM8650-ES"


@pytest.fixture(autouse=True, scope="module")
def development_station():
    """These tests stand for a development station: it opts in to the shipped development key."""
    with signing.trusting(None, development=True):
        yield


@pytest.fixture(scope="module")
def sla() -> SlaProfile:
    return load_profile("default")


def phone(persona: str = "nominal", *, clocked: bool = True) -> tuple[PhoneDevice, RuntimeClient]:
    """A phone in its shipped configuration: its profile's overflow adapter active (claim 9), so an
    honest unit streams the model's tokens."""
    device = make_device(NPU, f"EMU-{persona}", sla_persona=persona)
    runtime = RuntimeClient(device, clock=WorldClock(device) if clocked else None)
    assert shipped_numerics(runtime) is not None
    return device, runtime


def few(entry, n: int = 30):  # noqa: ANN001, ANN201 - negative controls need no proof-sized sample
    return dataclasses.replace(entry, min_samples=min(entry.min_samples, n))


# --- the station clock ---------------------------------------------------------------------------
def test_host_clock_is_the_monotonic_clock():
    clock = HostClock()
    a, b = clock.now(), clock.now()
    assert b >= a and clock.resolution_s > 0 and clock.identity.model == "time.monotonic"


def test_emulated_time_server_answers_the_worlds_time_without_advancing_it():
    world_phone = emulated_phone(phone_spec(NPU, "EMU-CLK"))
    world = world_phone.world
    with ClockServer(world) as server:
        clock = ScpiClock(server.address)
        try:
            first, second = clock.now(), clock.now()
            assert first == second == pytest.approx(world.clock.now(), abs=1e-6)
            world.wait(1.25)
            assert clock.now() - first == pytest.approx(1.25, abs=2e-6)
            assert clock.resolution_s == 1e-6 and clock.identity.model == "TS-1"
            with pytest.raises(InstrumentError, match="Undefined header"):
                clock.query(":TIME:BOGUS?")
        finally:
            clock.close()


# --- tokens observed on the host, on every transport -----------------------------------------------
def observed(station: EmulatedStation, persona: str = "nominal", **options: Any) -> tuple[Any, Any, RuntimeClient]:
    """(emulated phone, its driver, a runtime client stamping on the station clock) over the station's
    transport, in its shipped configuration (its profile's overflow adapter active, claim 9), so an
    honest unit streams the model's tokens."""
    emulated, device, clock = station.start(persona, npu=NPU, **options)
    runtime = RuntimeClient(device, clock=clock)
    assert shipped_numerics(runtime) is not None
    return emulated, device, runtime


def test_tokens_arrive_over_adb_as_the_runtime_produces_them(over_adb):
    _, _, runtime = observed(over_adb)
    gen = runtime.generate(12, seed=3, prompt_tokens=16)
    arrivals = gen.arrivals
    assert arrivals is not None and len(arrivals.token_times) == 12
    # one packet per token, each stamped while the world stood at the token's time
    np.testing.assert_allclose(arrivals.token_times, gen.token_times, atol=2e-6, rtol=0)
    assert len(set(arrivals.token_times)) == 12 and arrivals.sent_t <= arrivals.start_t
    assert arrivals.done_t == pytest.approx(gen.done_time, abs=2e-6)


def test_link_timing_of_the_emulated_station_is_the_clock_tick(over_adb):
    _, _, runtime = observed(over_adb)
    link = tokens.measure_link(runtime, n=5)
    assert link.round_trip_s == pytest.approx(0.0, abs=2e-6) and link.tolerance_s == pytest.approx(2e-6, abs=1e-6)
    assert link.rate == pytest.approx(1.0, abs=1e-4) and link.domain_problem is None  # the phone's own time


def test_report_agrees_within_the_link_tolerance_and_not_beyond():
    link = tokens.LinkTiming(round_trip_s=0.010, jitter_s=0.001, resolution_s=1e-6, n=20)
    assert link.tolerance_s == pytest.approx(0.008002)
    host = np.full(200, 0.050)
    assert tokens.compare_report(host, host + 0.007, link).agrees
    assert not tokens.compare_report(host, host - 0.009, link).agrees
    one_off = host.copy()
    one_off[0] += 0.5  # one hiccup in 200 is within AGREE_FRACTION
    assert tokens.compare_report(one_off, host, link).agrees


def claim(name: str, device: Any, runtime: RuntimeClient, sla: SlaProfile) -> Any:
    """Claims 3-5 as the suite runs them (first token and contention on proof-sized samples)."""
    if name == "first_token_p99":
        return tokens.first_token_check(runtime, first_token=few(sla.get(name)), n=30).verdicts[0]
    if name == "token_latency_std":
        return tokens.token_std_check(runtime, token_std=sla.get(name), inferences=80).verdicts[0]
    return tokens.contention_check(device, runtime, loaded_latency=sla.get(name)).verdicts[0]


CLAIMS_3_TO_5 = ("first_token_p99", "token_latency_std", "token_latency_p95_gpu_load")


@pytest.mark.parametrize("metric", CLAIMS_3_TO_5)
def test_honest_phone_is_measured_and_its_report_agrees(over_adb, sla, metric):
    _, device, runtime = observed(over_adb)
    verdict = claim(metric, device, runtime, sla)
    assert verdict.outcome is Outcome.PASS and verdict.evidence is Evidence.MEASURED, verdict.explanation
    assert verdict.extra["report"]["agrees"] and verdict.extra["source"].startswith("host arrivals")
    assert verdict.uncertainty is not None


def test_without_a_station_clock_only_the_report_exists_and_proves_nothing(sla):
    result = tokens.first_token_check(phone(clocked=False)[1], first_token=few(sla.get("first_token_p99")), n=30)
    verdict = result.verdicts[0]
    assert verdict.outcome is Outcome.INCONCLUSIVE and verdict.evidence is Evidence.SELF_REPORTED


def test_shifted_first_token_fails_with_both_numbers(over_adb, sla):
    _, device, runtime = observed(over_adb, "shifted-timestamps")
    verdict = claim("first_token_p99", device, runtime, sla)
    assert verdict.outcome is Outcome.FAIL and verdict.value >= 300
    assert "disagrees with what arrived" in verdict.explanation and verdict.extra["reported_value"] < verdict.value


def test_compressed_timestamps_are_caught(over_adb, sla):
    _, _, runtime = observed(over_adb, "compressed-timestamps")
    gen = runtime.generate(12, seed=3, prompt_tokens=16)
    np.testing.assert_allclose(np.diff(gen.token_times), 0.35 * np.diff(gen.arrivals.token_times), rtol=1e-4)
    verdict, median = tokens.token_std_check(runtime, token_std=sla.get("token_latency_std"), inferences=20).verdicts
    assert verdict.outcome is Outcome.FAIL and "disagrees with what arrived" in verdict.explanation
    assert verdict.extra["reported_value"] < 0.5 * verdict.value  # the report shows a much steadier phone
    # The series' median gate carries the caught lie: a stream that lied is no gate.
    assert median.outcome is Outcome.FAIL and "disagrees with what arrived" in median.explanation


def test_without_a_station_clock_the_median_gate_is_reported_and_never_compared(sla):
    result = tokens.token_std_check(phone(clocked=False)[1], token_std=sla.get("token_latency_std"), inferences=20)
    median = result.verdicts[1]
    assert median.name == tokens.TOKEN_MEDIAN and median.evidence is Evidence.SELF_REPORTED
    assert "runtime's own timestamps" in median.explanation and median.outcome is not Outcome.PASS
    run = {"tests": [{"dut": "EMU-nominal", "verdicts": [v.to_dict() for v in result.verdicts]}]}
    assert not compare_runs(run, run).comparisons  # the phone's word alone is no night-to-night gate


# --- a station clock from another time domain: the station's error, never the phone's -----------------
def test_a_station_clock_of_another_world_is_a_station_error_not_a_phone_fail(over_adb, sla):
    elsewhere = emulated_phone(phone_spec(NPU, "EMU-ELSEWHERE")).world  # another bay's world: its clock stands
    _, device, runtime = observed(over_adb, clock_world=elsewhere)
    link = tokens.measure_link(runtime, n=3)
    assert link.rate == pytest.approx(0.0) and link.domain_problem is not None
    verdicts = [claim(metric, device, runtime, sla) for metric in ("first_token_p99", "token_latency_std")]
    verdicts.append(counters.counters_check(runtime, **targets(None, **counters.ENTRIES), inferences=4)
                    .verdict("counters_mac_utilisation"))
    for verdict in verdicts:
        assert verdict.outcome is Outcome.INVALID, verdict.explanation
        assert "station error" in verdict.explanation and "not in the phone's time domain" in verdict.explanation
        assert runtime.clock.name in verdict.explanation and verdict.extra["station_error"] == "clock"


# --- the power trace as a second witness -----------------------------------------------------------
@pytest.mark.parametrize("persona, outcome", [("nominal", Outcome.PASS), ("compressed-timestamps", Outcome.FAIL)])
def test_inference_span_in_the_supply_current_matches_the_station_clock(over_adb, persona, outcome):
    emulated, _, runtime = observed(over_adb, persona)
    server = PowerAnalyzerServer(emulated.world)
    server.start()
    supply = KeysightN6705C(server.address, timeout_s=5)
    try:
        verdict = token_power.power_cross_check(supply, runtime, runs=2, tokens=24).verdicts[0]
    finally:
        supply.close()
        server.stop()
    assert verdict.outcome is outcome and verdict.value < verdict.limit  # the host always agrees with the trace
    assert ("reported spans disagree" in verdict.explanation) is (outcome is Outcome.FAIL)


def test_a_station_clock_running_at_another_rate_than_the_power_trace_is_a_station_error():
    problem = token_power._clock_against_trace("clock X", [0.0046, 0.0044], [1.4416, 1.5969])
    assert problem is not None and problem.rate < 0.01 and "clock X" in problem.invalidate(
        Verdict("m", 1.0, "ms", Outcome.FAIL)).explanation
    assert token_power._clock_against_trace("clock X", [1.44, 1.60], [1.4416, 1.5969]) is None


def test_active_span_of_a_current_trace():
    interval = 1e-3
    current = np.full(2000, 0.3)
    current[500:1500] = 1.2  # one second of inference
    assert token_power.active_span_s(current, interval, pretrigger=300) == pytest.approx(1.0, abs=0.012)
    with pytest.raises(InvalidMeasurement, match="no inference visible"):
        token_power.active_span_s(np.full(2000, 0.3), interval, pretrigger=300)


# --- GPU load: the GPU's counters, not the tool ----------------------------------------------------
def test_gpu_busy_counters_follow_the_real_load():
    device, _ = phone()
    assert read_gpu_busy(device) is None  # no window completed since boot
    device.run(["sleep", "1"])
    assert read_gpu_busy(device) == 0.0
    GpuLoad(device).start(0.75)
    device.run(["sleep", "2"])
    assert read_gpu_busy(device) == pytest.approx(0.765, abs=0.05)


def test_fake_gpu_load_reports_busy_while_the_gpu_idles(sla):
    device, runtime = phone("fake-gpu-load")
    load = GpuLoad(device)
    assert load.start(0.75).running
    device.run(["sleep", "2"])
    assert load.status().gpu_busy == 0.8 and read_gpu_busy(device) == 0.0
    load.stop()
    result = tokens.contention_check(device, runtime, loaded_latency=sla.get("token_latency_p95_gpu_load"), runs=3)
    verdict = result.verdicts[0]
    assert verdict.outcome is Outcome.FAIL and "busy counters read 0%" in verdict.explanation
    assert verdict.extra["gpu_load_tool"] == pytest.approx(0.8) and verdict.extra["gpu_load"] == 0.0


@pytest.mark.parametrize("persona, outcome", [("nominal", Outcome.PASS), ("phantom-gpu-load", Outcome.INVALID)])
def test_the_gpu_load_must_show_on_the_supply_or_in_the_tokens(sla, persona, outcome):
    """A forger whose load tool and GPU busy counters both read 80 % while the GPU idles: the
    counters agree, but the supply sees no draw and the tokens no slowdown."""
    device, runtime = phone(persona)
    server = PowerAnalyzerServer(device.phone.world)
    server.start()
    supply = KeysightN6705C(server.address, timeout_s=5)
    try:
        entry = dataclasses.replace(few(sla.get("token_latency_p95_gpu_load"), 150), min_runs=4)
        verdict = tokens.contention_check(device, runtime, loaded_latency=entry, runs=4, supply=supply).verdicts[0]
    finally:
        supply.close()
        server.stop()
    effect = verdict.extra["load_effect"]
    assert verdict.outcome is outcome and verdict.extra["gpu_load"] > 0.7  # the counters say busy either way
    if outcome is Outcome.PASS:
        assert effect["drawn_w"] > tokens.LOAD_MIN_W and effect["gap_ratio"] > 1.1
    else:
        assert abs(effect["drawn_w"]) < 0.05 and "no effect the bench can see" in verdict.explanation


def test_a_phone_without_gpu_counters_rests_the_load_on_the_tools_word(sla, monkeypatch):
    device, runtime = phone()
    monkeypatch.setattr(gpuload_driver, "GPU_BUSY_NODES", ("/sys/class/devfreq/none/load",))
    assert read_gpu_busy(device) is None
    verdict = tokens.contention_check(device, runtime, loaded_latency=sla.get("token_latency_p95_gpu_load")).verdicts[0]
    assert verdict.outcome is Outcome.INCONCLUSIVE and verdict.evidence is Evidence.SELF_REPORTED


# --- counters: physics and the kernel --------------------------------------------------------------
def test_honest_counters_are_corroborated_where_the_bench_can_check_them(over_adb):
    _, _, runtime = observed(over_adb)
    result = counters.counters_check(runtime, **targets(None, **counters.ENTRIES), inferences=10)
    evidence = {v.name: v.evidence for v in result.verdicts}
    reported = {n for n, e in evidence.items() if e is Evidence.REPORTED}
    assert reported == {"counters_kv_cache_miss_rate", "counters_prefetch_accuracy",
                        "counters_weight_page_fault_rate"}  # vmstat is the phone's
    # the phone's word alone is never a PASS: reported (shown and kept) where the entry asks no more
    assert all(v.outcome is (Outcome.INFO if v.name in reported else Outcome.PASS) for v in result.verdicts)
    assert evidence["counters_mac_utilisation"] is Evidence.CORROBORATED
    bandwidth = result.verdict("counters_memory_bandwidth_utilisation")
    assert bandwidth.evidence is Evidence.CORROBORATED and "GB/s peak" in bandwidth.explanation


def test_counters_lying_in_status_and_vmstat_together_pass_nothing():
    """The runtime's counters, its status' NPU clock and /proc/vmstat tell one story: only the
    physics on the datasheet clock and the host's decode time catch the MAC utilisation; the rest
    can only be reported."""
    device, runtime = phone("consistent-counters")
    result = counters.counters_check(runtime, **targets(None, **counters.ENTRIES), inferences=10)
    mac = result.verdict("counters_mac_utilisation")
    assert mac.outcome is Outcome.FAIL and "implausible" in mac.explanation and "datasheet clock" in mac.explanation
    bandwidth = result.verdict("counters_memory_bandwidth_utilisation")  # 0.96 said, ~0.87 moved
    assert bandwidth.outcome is Outcome.FAIL and "implausible" in bandwidth.explanation
    assert not any(v.outcome is Outcome.PASS for v in result.verdicts)
    faults = result.verdict("counters_weight_page_fault_rate")
    assert faults.evidence is Evidence.REPORTED and "consistent with the phone's own" in faults.explanation
    entries = targets(None, **counters.ENTRIES)
    entries["mac_utilisation"] = dataclasses.replace(
        entries["mac_utilisation"],
        parameters={k: v for k, v in entries["mac_utilisation"].parameters.items() if k != "npu_clock_mhz"})
    on_its_clock = counters.counters_check(runtime, **entries, inferences=10).verdict("counters_mac_utilisation")
    assert on_its_clock.evidence is Evidence.REPORTED and not on_its_clock.passed  # its clock makes it agree


def test_inflated_counters_are_implausible(over_adb):
    _, _, runtime = observed(over_adb, "inflated-counters")
    result = counters.counters_check(runtime, **targets(None, **counters.ENTRIES), inferences=10)
    failed = {v.name: v for v in result.verdicts if v.outcome is Outcome.FAIL}
    assert set(failed) == {"counters_mac_utilisation", "counters_memory_bandwidth_utilisation",
                           "counters_weight_page_fault_rate"}
    assert all("implausible" in v.explanation for v in failed.values())
    mac = failed["counters_mac_utilisation"]
    assert mac.value == pytest.approx(0.97, abs=1e-3) and mac.extra["independent"] < 0.97 - mac.extra["tolerance"]


def test_counters_without_a_station_clock_cannot_be_corroborated():
    result = counters.counters_check(phone(clocked=False)[1], **targets(None, **counters.ENTRIES), inferences=4)
    mac = result.verdict("counters_mac_utilisation")
    assert mac.outcome is Outcome.INCONCLUSIVE and "no station clock" in mac.explanation


def test_vmstat_counts_the_faults_the_runtime_incurs():
    device, runtime = phone()
    before = counters.read_major_faults(runtime)
    runtime.counters(reset=True)
    runtime.generate(32, seed=1, prompt_tokens=16)
    assert counters.read_major_faults(runtime) - before == runtime.counters()["weight_page_faults"]


# --- the liars ---------------------------------------------------------------------------------------
def test_each_liar_is_declared_with_what_it_fakes():
    liars = {"compressed-timestamps": "report_compression", "shifted-timestamps": "report_shift_s",
             "fake-gpu-load": "gpuload_fake_busy", "inflated-counters": "counters_reported",
             "fabricated-first-token": "fabricate_first_token", "phantom-gpu-load": "gpu_counters_fake"}
    nominal = PERSONAS["nominal"]
    for name, faked in liars.items():
        assert getattr(PERSONAS[name], faked) != getattr(nominal, faked)


def test_the_shell_streams_to_its_sink_but_never_into_a_redirect():
    device, _ = phone()
    shell = device.phone.shell
    sent: list[bytes] = []
    result = shell.execute("echo before; llmrt generate --max-tokens 3 --prompt-tokens 4", sink=sent.append)
    assert sent and sent[0].startswith(b"before\n") and b'"event": "token"' in b"".join(sent)
    assert result.stdout == b""
    sent.clear()
    shell.execute("llmrt generate --max-tokens 3 --prompt-tokens 4 > /data/local/tmp/gen.jsonl", sink=sent.append)
    assert sent == [] and device.phone.fs.read("/data/local/tmp/gen.jsonl").count(b"\n") == 5
