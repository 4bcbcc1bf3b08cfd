"""Every runtime-side SLA check passes on the nominal emulated phone and fails on a faulty one.

In-process phones (tests/device_double.py) carry a persona or fault; the redundancy checks drive
the emulated N6705C over its real SCPI socket. Sample counts are the profile's where a pass must
be shown; negative controls use fewer where the failure shows anyway.
"""
from __future__ import annotations

import dataclasses
import types
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from phonebench.bench.phone.adapters import shipped_numerics
from phonebench.bench.checks import audit, counters, redundancy, thermal_trip, tokens, weights
from phonebench.bench.checks.targets import own_targets, target, targets
from phonebench.bench.results.compare import compare_runs
from phonebench.bench.specs.sla import SlaProfile, load_profile
from phonebench.core.verdict import Evidence, Outcome, Verdict
from phonebench.bench.phone.device_state import phone_clock
from device_double import PhoneDevice, WorldClock, emulated_shield_probes, emulated_supplies, make_device
from phonebench.drivers.runtime import RuntimeClient
from phonebench.emulation.runtime import RESTART_S
from phonebench.emulation.weights import WEIGHT_FILE, update_package
from tests.adb_helpers import adb_key, adb_server, over_adb  # noqa: F401 - fixtures
from phonebench.core import signing

NPU = "SM8650-ES"  # a fast accumulator path: these tests are about the SLA behaviour, not numerics


@pytest.fixture(autouse=True, scope="module")
def development_station():
    """These tests stand for a development station: it opts in to the shipped development key."""
    with signing.trusting(None, development=True):
        yield


@pytest.fixture(scope="module")
def sla() -> SlaProfile:
    return load_profile("default")


def phone(persona: str = "nominal", *faults: str, seed: int = 0) -> tuple[PhoneDevice, RuntimeClient]:
    """An in-process phone whose runtime client stamps arrivals on the phone's world clock, in its
    shipped numerics (the profile's overflow adapter), so an honest unit streams the model's tokens."""
    device = make_device(NPU, f"EMU-{persona}", sla_persona=persona, faults=list(faults), seed=seed)
    runtime = RuntimeClient(device, clock=WorldClock(device))
    assert shipped_numerics(runtime) is not None
    return device, runtime


def outcomes(result: Any) -> dict[str, Outcome]:
    return {v.name: v.outcome for v in result.verdicts}


# --- claim 3: first token ------------------------------------------------------------------------
def test_first_token_passes_nominal_and_fails_slow(sla):
    entry = sla.get("first_token_p99")
    ok = tokens.first_token_check(phone()[1], first_token=entry)
    slow = tokens.first_token_check(phone("slow")[1], first_token=entry)
    assert outcomes(ok) == {"first_token_p99": Outcome.PASS}
    assert outcomes(slow) == {"first_token_p99": Outcome.FAIL} and slow.verdicts[0].value >= 300
    assert ok.verdicts[0].n == entry.n_required and ok.verdicts[0].plot.kind == "samples"
    assert ok.raw["first_token"]["samples"].size == entry.n_required


# --- claim 4: per-token jitter -------------------------------------------------------------------
def test_token_std_passes_nominal_and_fails_jittery(sla):
    entry = sla.get("token_latency_std")
    ok = tokens.token_std_check(phone()[1], token_std=entry, inferences=80)
    jittery = tokens.token_std_check(phone("jittery")[1], token_std=entry, inferences=80)
    assert ok.verdicts[0].outcome is Outcome.PASS and ok.verdicts[0].bound < 23
    assert jittery.verdicts[0].outcome is Outcome.FAIL and jittery.verdicts[0].value > 23
    assert ok.verdicts[0].n == 80 * (tokens.STD_TOKENS - 1)


def test_token_std_is_decided_sequentially_at_the_profiles_looks(sla):
    """The profile's 1000 consecutive inferences are looked at after 500 too, each look at half the
    5 % error (benchmarks/bench_sequential_std.py: error rates and coverage): a nominal phone is
    settled at the first look, a jittery one fails (shown here with a look after 70 of 100)."""
    entry = sla.get("token_latency_std")
    assert tokens.std_plan(entry, 1000).looks == (500, 1000)
    assert tokens.std_plan(entry, 80).looks == (80,)  # shorter than the first look: the fixed design
    early = dataclasses.replace(entry, parameters={**entry.parameters, "sequential_looks": [70]})
    ok = tokens.token_std_check(phone()[1], token_std=early, inferences=100).verdicts[0]
    jittery = tokens.token_std_check(phone("jittery")[1], token_std=early, inferences=100).verdicts[0]
    assert ok.outcome is Outcome.PASS and ok.extra["inferences"] == 70
    assert ok.confidence == pytest.approx(0.975) and ok.extra["sequential"]["stopped_at"] == 70
    assert "70 of 100 consecutive inferences" in ok.explanation
    # Its upper bound is past the limit at the first look, its lower bound not yet: it goes on, and fails.
    assert jittery.outcome is Outcome.FAIL and jittery.extra["sequential"]["stopped_at"] in (70, 100)
    assert ok.bound < 23 < jittery.value and ok.bound >= ok.extra["per_inference_bound"]


def test_the_jitter_series_median_is_a_regression_gate_not_a_claim(sla):
    """Claim 4 limits the std only; the same inferences' median is recorded (INFO) with a bound tight
    enough for `bench compare` to call an 8 % slower NPU build regressed (docs/nightly.md)."""
    entry = sla.get("token_latency_std")
    ok = tokens.token_std_check(phone()[1], token_std=entry, inferences=80)
    std, median = ok.verdicts
    assert median.name == tokens.TOKEN_MEDIAN and median.outcome is Outcome.INFO and median.claim == 4
    assert median.evidence is std.evidence is Evidence.MEASURED and median.limit is None
    assert median.value == pytest.approx(np.quantile(ok.raw["token_latencies"]["samples"], 0.5, method="inverted_cdf"))
    assert median.value < median.bound and median.n == 80 * (tokens.STD_TOKENS - 1)
    device = make_device(NPU, "EMU-nominal", runtime_build="npu-slow-8pct")  # the same unit, tonight's build
    slow = tokens.token_std_check(RuntimeClient(device, clock=WorldClock(device)), token_std=entry,
                                  inferences=80).verdicts[1]
    night = compare_runs({"tests": [{"dut": "EMU-nominal", "verdicts": [slow.to_dict()]}]},
                         {"tests": [{"dut": "EMU-nominal", "verdicts": [median.to_dict()]}]})
    pooled = next(c for c in night.comparisons if c.phone is None)
    assert pooled.relative == pytest.approx(0.08, abs=0.02) and pooled.call == "regressed"


def test_token_std_with_too_few_inferences_is_insufficient_not_a_pass(sla):
    result = tokens.token_std_check(phone()[1], token_std=sla.get("token_latency_std"), inferences=10)
    assert result.verdicts[0].outcome is Outcome.INSUFFICIENT


# --- claim 5: contention -------------------------------------------------------------------------
def test_contention_passes_nominal_and_fails_contention_sensitive(sla):
    entry = sla.get("token_latency_p95_gpu_load")
    device, runtime = phone()
    ok = tokens.contention_check(device, runtime, loaded_latency=entry)
    device_s, runtime_s = phone("contention-sensitive")
    sensitive = tokens.contention_check(device_s, runtime_s, loaded_latency=entry)
    assert ok.verdicts[0].outcome is Outcome.PASS and ok.verdicts[0].extra["gpu_load"] > 0.70
    assert sensitive.verdicts[0].outcome is Outcome.FAIL
    assert device.shell("gpuload status").output.count('"running": false') == 1  # the load was stopped


def test_contention_without_enough_gpu_load_is_invalid(sla):
    device, runtime = phone("nominal", "gpu-load-weak")
    result = tokens.contention_check(device, runtime, loaded_latency=sla.get("token_latency_p95_gpu_load"))
    assert result.verdicts[0].outcome is Outcome.INVALID and "gpu_load" in result.verdicts[0].explanation


def test_latency_from_the_intended_start_counts_the_tokens_a_stall_delayed():
    corrected = tokens.expected_interval_correction(np.array([40.0, 200.0, 45.0]), 45.0)
    assert list(corrected) == [40.0, 200.0, 155.0, 110.0, 65.0, 45.0]


# --- claim 8: thermal trip -----------------------------------------------------------------------
def _preheated(persona: str) -> tuple[PhoneDevice, RuntimeClient]:
    """A phone whose board is already hot from the soak's first minutes, its NPU die cooled for a
    moment (so the runtime sees the die cross its trip temperature, not start above it)."""
    device, runtime = phone(persona)
    world = device.phone.world
    world.set_npu_frequency(1400.0)
    world.work("decode", 560.0)
    world.set_npu_frequency(1100.0)
    world.wait(20.0)
    assert world.temperatures()["npu"] < 60.0
    return device, runtime


def _soak(sla: SlaProfile, persona: str, dialogs: int = 60) -> Any:
    """With the shield thermocouple on an emulated DAQ970A: the trip's independent side."""
    success = dataclasses.replace(sla.get("long_dialog_success"), limit=0.9, min_samples=0)  # 28 dialogs prove it
    device, runtime = _preheated(persona)
    with emulated_shield_probes() as attach:
        return thermal_trip.thermal_trip_check(runtime, trip=sla.get("npu_trip_temperature"), kills=sla.get("npu_process_kills"),
                                               success=success, dialogs=dialogs, shield=attach(device)), device


def test_thermal_soak_nominal_trips_at_72_migrates_and_survives(sla):
    result, device = _soak(sla, "nominal")
    assert outcomes(result)["npu_trip_temperature"] is Outcome.PASS
    trip = result.verdict("npu_trip_temperature")
    assert trip.evidence is Evidence.CORROBORATED and abs(trip.extra["shield"]["zone_offset_c"]) < 1.0
    assert trip.extra["migration_slowdowns"] and min(trip.extra["migration_slowdowns"]) > 1.1
    assert outcomes(result)["npu_trip_process_kills"] is Outcome.PASS
    assert outcomes(result)["npu_trip_long_dialog_success"] is Outcome.PASS
    assert result.verdict("thermal_throttle_events").value > 0
    gaps = result.raw["soak_events"]["arrival_gaps"]  # every dialog's, kept: how near a break it came
    assert len(gaps) == len(result.raw["soak_events"]["completed"])
    assert all(g is not None and g["longest_s"] < thermal_trip.BREAK_MIN_S for g in gaps)
    runtime = RuntimeClient(device)
    assert runtime.config_get("npu.perf_profile") == "balanced"  # restored
    assert runtime.status().temperatures_c["npu"] < 40  # and rested


@pytest.mark.parametrize(("stall_s", "broken"), [(0.27, False), (0.9, False), (RESTART_S, True)])
def test_a_break_is_a_restart_not_a_decode_stall(stall_s, broken):
    """An honest runtime stalls now and then (0.27 s on top of a 0.045 s step broke EMU0004's soak
    when the floor was 0.3 s); a restart reloads the model for seconds. Only the restart is a break."""
    from phonebench.drivers.runtime import Arrivals, Generation

    times = list(np.cumsum(np.full(128, 0.045)))
    times[80:] = [t + stall_s for t in times[80:]]
    gen = Generation(tokens=list(range(128)), token_times=times, start_time=0.0, done_time=times[-1],
                     prompt_tokens=16, arrivals=Arrivals(0.0, 0.0, times, times[-1]))
    assert (thermal_trip.stream_break(gen) is not None) is broken
    assert RESTART_S > thermal_trip.BREAK_MIN_S  # the emulated forgers' restarts stay visible


def test_thermal_soak_fails_a_runtime_killed_at_the_trip(sla):
    result, _ = _soak(sla, "thermal-kill")
    assert outcomes(result)["npu_trip_process_kills"] is Outcome.FAIL
    assert outcomes(result)["npu_trip_long_dialog_success"] is Outcome.FAIL
    assert outcomes(result)["npu_trip_temperature"] is Outcome.INVALID  # never migrated: no trip shown


def test_thermal_soak_sees_kills_the_phone_patched_over(sla):
    """Killed at the trip, each dialog finished with made-up tokens after a migrate event, done and
    exit 0, the pid kept: the host sees the restart's break and tokens that are not the model's."""
    result, _ = _soak(sla, "patched-kills", dialogs=30)
    kills, success = result.verdict("npu_trip_process_kills"), result.verdict("npu_trip_long_dialog_success")
    assert kills.outcome is Outcome.FAIL and kills.evidence is Evidence.MEASURED
    assert kills.extra["killed_streams"] == 0 and kills.extra["pid_changes"] == 0  # the phone's story holds
    assert kills.extra["host_observed_breaks"] > 0
    assert max(g["longest_s"] for g in result.raw["soak_events"]["arrival_gaps"]) >= RESTART_S  # the restart the phone patched over
    assert success.outcome is Outcome.FAIL and success.extra["dialogs_not_the_models_output"] > 0


def test_thermal_soak_without_a_station_clock_rests_on_the_phones_word(sla):
    device, runtime = _preheated("patched-kills")
    result = thermal_trip.thermal_trip_check(RuntimeClient(device), trip=sla.get("npu_trip_temperature"),
                                             kills=sla.get("npu_process_kills"),
                                             success=dataclasses.replace(sla.get("long_dialog_success"), limit=0.9,
                                                                 min_samples=0), dialogs=10)
    kills = result.verdict("npu_trip_process_kills")
    assert kills.evidence is Evidence.SELF_REPORTED and kills.outcome is not Outcome.PASS
    assert "phone's word only" in kills.explanation


def test_thermal_soak_fails_a_phone_whose_every_npu_reading_is_7_degrees_high(sla):
    """Runtime events, status, the sysfs zone and dumpsys all read +7 degC: it trips at a real 65
    while everything it says puts the trip at 72. The shield thermocouple puts the die 7 below."""
    result, _ = _soak(sla, "thermal-offset", dialogs=30)
    verdict = result.verdict("npu_trip_temperature")
    assert verdict.outcome is Outcome.FAIL
    low, high = verdict.extra["bracket_c"]
    assert low - 1.0 <= 72.0 <= high + 1.0  # the phone's own story is consistent
    shield = verdict.extra["shield"]
    assert 6.0 < shield["zone_offset_c"] < 8.0 and shield["tolerance_c"] < 2.0
    assert "shield thermocouple" in verdict.explanation and "really near 6" in verdict.explanation


def test_thermal_soak_fails_a_trip_at_the_cpus_65_degrees(sla):
    result, _ = _soak(sla, "early-trip", dialogs=30)
    assert outcomes(result)["npu_trip_temperature"] is Outcome.FAIL
    assert 63 < result.verdict("npu_trip_temperature").value < 67


def test_thermal_soak_that_never_reaches_the_trip_shows_nothing(sla):
    device, runtime = phone()
    result = thermal_trip.thermal_trip_check(runtime, trip=sla.get("npu_trip_temperature"), kills=sla.get("npu_process_kills"),
                                             success=dataclasses.replace(sla.get("long_dialog_success"), limit=0.9), dialogs=5,
                                             tokens=8, approach_calls=5)
    assert outcomes(result)["npu_trip_temperature"] is Outcome.INVALID
    assert "no thermal trip" in result.verdict("npu_trip_temperature").explanation


# --- claim 10: redundancy ------------------------------------------------------------------------
@pytest.fixture
def bench_supply() -> Iterator[Any]:
    """(make(persona) -> (device, runtime, supply)); every server stops after the test."""
    with emulated_supplies() as attach:
        def make(persona: str = "nominal", *faults: str) -> tuple[PhoneDevice, RuntimeClient, Any]:
            device, runtime = phone(persona, *faults)
            return device, runtime, attach(device)

        yield make


def test_ripple_sweep_finds_the_engage_threshold_and_fails_late_or_missing_redundancy(sla, bench_supply):
    entry, unprotected = sla.get("redundancy_engage_threshold"), target(sla, "redundancy_unprotected_errors")
    device, runtime, supply = bench_supply()
    ok = redundancy.ripple_sweep_check(supply, runtime, engage_threshold=entry, unprotected_errors=unprotected)
    assert outcomes(ok)["redundancy_engage_threshold"] is Outcome.PASS
    assert outcomes(ok)["redundancy_unprotected_errors"] is Outcome.PASS
    # off at 30, on at 35 mV set; the digitizer sees the terminals' ripple a little above the setpoint
    assert 32.5 <= ok.verdict("redundancy_engage_threshold").value < 33.5
    assert 22.5 <= ok.verdict("redundancy_release_threshold").value < 23.5  # hysteresis: released below 25 mV
    raw = ok.raw["ripple_sweep"]
    assert np.nanmax(raw["y"]) > 0 and raw["y"][0] == 0  # MAC errors appear with ripple, none without
    assert device.phone.world.ripple_amplitude_v() == 0 and runtime.config_get("redundancy.mode") == "auto"
    for persona in ("late-redundancy", "no-redundancy"):  # never engaging is a failure, not "unmeasurable"
        _, runtime_x, supply_x = bench_supply(persona)
        bad = redundancy.ripple_sweep_check(supply_x, runtime_x, engage_threshold=entry, unprotected_errors=unprotected)
        assert outcomes(bad)["redundancy_engage_threshold"] is Outcome.FAIL, persona
        assert outcomes(bad)["redundancy_unprotected_errors"] is Outcome.FAIL, persona


def test_bit_exact_at_50mv_passes_with_redundancy_and_fails_without(sla, bench_supply):
    on, off = sla.get("redundancy_token_mismatches"), target(sla, "redundancy_off_token_mismatches")
    _, runtime, supply = bench_supply()
    ok = redundancy.bit_exact_check(supply, runtime, token_mismatches=on, off_token_mismatches=off, tokens=32)
    assert set(outcomes(ok).values()) == {Outcome.PASS} and len(ok.verdicts) == 2
    assert ok.verdict("redundancy_token_mismatches").extra["votes_detected"] > 0  # it really voted
    _, runtime_n, supply_n = bench_supply("no-redundancy")
    bad = redundancy.bit_exact_check(supply_n, runtime_n, token_mismatches=on, off_token_mismatches=off, tokens=32)
    assert outcomes(bad)["redundancy_token_mismatches"] is Outcome.FAIL  # it never engaged: wrong tokens
    assert bad.verdict("redundancy_token_mismatches").value > 0


def test_bit_exact_fails_when_the_ripple_never_reaches_the_phone(sla, bench_supply):
    """The stress control: a supply that makes no ripple at the phone proves nothing."""
    _, runtime, supply = bench_supply()
    result = redundancy.bit_exact_check(supply, runtime, token_mismatches=sla.get("redundancy_token_mismatches"),
                                        off_token_mismatches=target(sla, "redundancy_off_token_mismatches"), amplitude_mv=20, tokens=16)
    assert outcomes(result)["redundancy_off_token_mismatches"] is Outcome.INVALID  # ripple below the 50 mV condition
    result = redundancy.bit_exact_check(supply, runtime, token_mismatches=sla.get("redundancy_token_mismatches"),
                                        off_token_mismatches=dataclasses.replace(target(sla, "redundancy_off_token_mismatches"),
                                                            conditions={}), amplitude_mv=20, tokens=16)
    assert outcomes(result)["redundancy_off_token_mismatches"] is Outcome.FAIL  # below the unit's onset: no errors


def _slowdown(sla: SlaProfile, persona: str, **kwargs: Any) -> Verdict:
    runtime = phone(persona)[1]
    return redundancy.slowdown_check(runtime, slowdown=sla.get("redundancy_slowdown"), now=phone_clock(runtime),
                                     now_evidence=Evidence.CORROBORATED, **kwargs).verdicts[0]


def test_redundancy_slowdown_passes_nominal_and_fails_costly_or_absent(sla):
    ok = _slowdown(sla, "nominal")
    assert ok.outcome is Outcome.PASS and 15 < ok.value < 23
    assert _slowdown(sla, "costly-redundancy").outcome is Outcome.FAIL
    absent = _slowdown(sla, "no-redundancy", pairs=10)
    assert absent.outcome is Outcome.FAIL and "did not really engage" in absent.explanation


def test_redundancy_slowdown_on_the_runtimes_own_timestamps_is_not_a_pass(sla):
    verdict = redundancy.slowdown_check(phone()[1], slowdown=sla.get("redundancy_slowdown"), pairs=10).verdicts[0]
    assert verdict.outcome is Outcome.INCONCLUSIVE and verdict.evidence is Evidence.SELF_REPORTED


# --- claims 11, 12: weights ----------------------------------------------------------------------
def test_weight_read_errors_pass_nominal_and_fail_a_corrupted_page(sla):
    entry = sla.get("weight_page_read_errors")
    device, runtime = phone()
    assert weights.read_errors_check(device, runtime, read_errors=entry).verdicts[0].outcome is Outcome.PASS
    device, runtime = phone("corrupt-weights")
    bad = weights.read_errors_check(device, runtime, read_errors=entry).verdicts[0]
    assert bad.outcome is Outcome.FAIL and bad.value == 1 and bad.name == "weights_page_read_errors"


def test_the_weight_file_is_streamed_not_pulled_whole_into_memory(sla, monkeypatch):
    """A real model's weights are gigabytes, past any driver's pull cap: the checks stream the
    file to the host and verify it there (pull_bytes is kept for small files)."""
    device, runtime = phone("corrupt-weights")
    small = device.pull_bytes

    def capped(remote: str) -> bytes:
        assert remote != WEIGHT_FILE, "the weight file was pulled whole into memory"
        return small(remote)

    monkeypatch.setattr(device, "pull_bytes", capped)
    bad = weights.read_errors_check(device, runtime, read_errors=sla.get("weight_page_read_errors")).verdicts[0]
    assert bad.outcome is Outcome.FAIL and bad.value == 1
    result = weights.corrupt_and_repair_check(device, runtime, update_package().page, **_repair_targets(sla))
    assert all(v.outcome is Outcome.PASS for v in result.verdicts), [(v.name, v.explanation) for v in result.verdicts]
    assert device.phone.fs.read(WEIGHT_FILE) == update_package().data


def test_merkle_root_check_passes_nominal_and_fails_a_corrupt_hash_tree(sla):
    entry = target(sla, "weights_root_mismatches")
    device, runtime = phone()
    ok = weights.root_check(device, runtime, root_mismatches=entry).verdicts[0]
    assert ok.outcome is Outcome.PASS and ok.extra["root"] == update_package().tree.root_hex
    device, runtime = phone("nominal", "verity-tree-corrupt")
    bad = weights.root_check(device, runtime, root_mismatches=entry).verdicts[0]
    assert bad.outcome is Outcome.FAIL and "hash block" in bad.explanation


def test_merkle_root_check_fails_an_unsigned_manifest(sla):
    device, runtime = phone()
    device.phone.fs.write("/data/vendor/llm/weights/model.bin.manifest.json.sig", b"ed25519 0000 AAAA\n")
    bad = weights.root_check(device, runtime, root_mismatches=target(sla, "weights_root_mismatches")).verdicts[0]
    assert bad.outcome is Outcome.FAIL and "signature" in bad.explanation


def test_spot_check_time_passes_nominal_and_fails_slow_flash(sla):
    entry = sla.get("merkle_spot_check_time")
    device, runtime = phone()
    ok = weights.spot_check_time_check(device, runtime, spot_check_time=entry, now=phone_clock(runtime),
                                       now_evidence=Evidence.CORROBORATED).verdicts[0]
    assert ok.outcome is Outcome.PASS and ok.n == entry.n_required and not ok.extra["failed_pages"]
    device, runtime = phone("nominal", "slow-flash")
    assert weights.spot_check_time_check(device, runtime, spot_check_time=entry, n=40, now=phone_clock(runtime),
                                         now_evidence=Evidence.CORROBORATED).verdicts[0].outcome is Outcome.FAIL


def _repair_targets(sla: SlaProfile) -> dict:
    return targets(sla, **weights.REPAIR_ENTRIES)


def test_corrupted_page_is_detected_and_repaired_alone(sla):
    device, runtime = phone("corrupt-weights")
    result = weights.corrupt_and_repair_check(device, runtime, update_package().page, **_repair_targets(sla))
    assert all(v.outcome is Outcome.PASS for v in result.verdicts), [(v.name, v.explanation) for v in result.verdicts]
    raw = result.raw["weights_repair"]
    assert len(raw["found"]) == 2 and len(raw["at_rest"]) == 1 and len(raw["injected"]) == 1
    assert set(raw["bytes_pushed"].values()) == {4096}
    assert device.phone.fs.read(WEIGHT_FILE) == update_package().data


def test_repair_that_does_not_take_fails(sla):
    device, runtime = phone("nominal", "weights-repair-ignored")
    result = weights.corrupt_and_repair_check(device, runtime, update_package().page, **_repair_targets(sla))
    assert outcomes(result)["weights_bad_pages_after_repair"] is Outcome.FAIL


def test_repair_that_resends_more_than_the_page_fails(sla):
    device, runtime = phone()
    package = update_package()
    result = weights.corrupt_and_repair_check(device, runtime, lambda i: package.data[i * 4096:(i + 2) * 4096],
                                              **_repair_targets(sla))
    assert outcomes(result)["weights_repair_bytes_per_page"] is Outcome.FAIL
    assert outcomes(result)["weights_bad_pages_after_repair"] is Outcome.FAIL  # the runtime refused it
    assert result.raw["weights_repair"]["refused"]


def test_corruption_that_is_not_detected_fails():
    """If the corrupted copy never lands (the push is swallowed), the check cannot claim detection."""
    device, runtime = phone()
    device.push_hook = lambda remote, data: device.phone.fs.read(remote) if remote == WEIGHT_FILE else data
    result = weights.corrupt_and_repair_check(device, runtime, update_package().page, **_repair_targets(None))
    assert outcomes(result)["weights_undetected_corruptions"] is Outcome.FAIL


# --- claims 13, 14: audit and counters -----------------------------------------------------------


@pytest.mark.parametrize("persona, fault, failing", [
    ("nominal", None, set()),
    ("leaky-log", None, {"audit_content_leaks"}),
    ("unsigned-log", None, {"audit_bad_signatures"}),
    ("nominal", "audit-drop", {"audit_records_missing"}),
    ("nominal", "audit-missing-fields", {"audit_field_errors"}),
])
def test_audit_log_check(persona, fault, failing):
    device, runtime = phone(persona, *([fault] if fault else []))
    result = audit.audit_check(device, runtime, **targets(None, **audit.ENTRIES))  # as many inferences as a 1-in-7 loss needs
    assert {v.name for v in result.verdicts if not v.passed} == failing
    assert all(v.outcome in (Outcome.PASS, Outcome.FAIL) for v in result.verdicts)


def test_audit_leak_search_finds_token_ids_hidden_in_an_allowed_field():
    canaries = audit._runs([101, 7, 333, 42, 9])
    record = {"seq": 1, "model_version": "tiny 7-333-42-9", "sig": "x"}
    assert audit._leaks(record, canaries) == ["token ids of a prompt or answer"]
    assert audit._leaks({"seq": 1, "model_version": "tiny 7 333 42"}, canaries) == []


@pytest.mark.parametrize("persona, failing", [
    ("nominal", set()),
    ("jittery", {"counters_mac_utilisation", "counters_memory_bandwidth_utilisation", "counters_prefetch_accuracy"}),
    ("slow", {"counters_kv_cache_miss_rate", "counters_weight_page_fault_rate"}),
])
def test_counters_check(persona, failing):
    result = counters.counters_check(phone(persona)[1], **targets(None, **counters.ENTRIES), inferences=10)
    assert {v.name for v in result.verdicts if v.outcome is Outcome.FAIL} == failing
    assert not any(v.outcome is Outcome.PASS for v in result.verdicts if v.evidence is Evidence.REPORTED)  # never


def test_counters_not_exposed_are_recorded_not_failed():
    class NoCounters:
        def counters(self, reset: bool = False) -> dict:
            return {"tokens": 10}

        def generate(self, *args: Any, **kwargs: Any) -> Any:
            return None

        def identity(self) -> Any:
            return types.SimpleNamespace(model="another-model", model_sha256=None)

    result = counters.counters_check(NoCounters(), **targets(None, **counters.ENTRIES),
                                     inferences=1)
    assert all(v.outcome is Outcome.INFO and "not exposed" in v.explanation for v in result.verdicts)


# --- plumbing ------------------------------------------------------------------------------------
def test_check_targets_are_a_valid_profile_and_the_station_profile_wins(sla):
    assert {"audit_bad_signatures", "counters_memory_bandwidth_utilisation", "identity_fields_missing",
            "thermal_zone_max", "unit_serial_matches_scan"} <= set(own_targets().entries)
    lab = dataclasses.replace(sla, entries={**sla.entries, "audit_bad_signatures": dataclasses.replace(
        own_targets().get("audit_bad_signatures"), limit=2.0)})
    assert target(lab, "audit_bad_signatures").limit == 2.0 and target(sla, "audit_bad_signatures").limit == 0


def test_record_into_saves_raw_data_and_points_each_verdict_at_it():
    saved: dict[str, Any] = {}
    recorded: list[Verdict] = []

    class Record:
        def __call__(self, verdict: Verdict) -> Verdict:
            recorded.append(verdict)
            return verdict

        def raw(self, name: str, data: Any) -> str:
            saved[name] = data
            return f"raw/{name}.npz"

    result = tokens.first_token_check(phone()[1], first_token=dataclasses.replace(load_profile("default").get("first_token_p99"),
                                                                       min_samples=0), n=5)
    result.record_into(Record())
    assert recorded[0].raw == ("raw/first_token.npz", "raw/first_token_prompts.npz") and "first_token" in saved
    cases = saved["first_token_prompts"]["cases"]  # the drawn prompts, one per inference, kept
    assert len(cases) == len(saved["first_token"]["samples"]) and not saved["first_token_prompts"]["cycled"]


# --- over real ADB: exit statuses, big pulls and pushes survive either transport --------------------
def test_checks_over_adb_transport(over_adb, sla):
    emulated, device, _ = over_adb.start("thermal-kill", npu=NPU)
    runtime = RuntimeClient(device)
    result = weights.corrupt_and_repair_check(device, runtime, update_package().page, **_repair_targets(sla))
    assert all(v.outcome is Outcome.PASS for v in result.verdicts)  # 32 MiB pulled and pushed back
    world = emulated.world
    world.set_npu_frequency(1600.0)  # well past the trip whatever this unit's leakage and cooling
    world.work("decode", 700.0)
    gen = runtime.generate(32, seed=1, prompt_tokens=8, allow_incomplete=True)
    assert not gen.completed and gen.exit_code == 137  # the kill's status crosses shell v1 and the shell protocol


def test_a_unit_whose_trigger_calibration_lowered_still_meets_the_engage_claim(sla, bench_supply):
    entry = sla.get("redundancy_engage_threshold")
    _, runtime, supply = bench_supply()
    runtime.config_set("redundancy.trigger_mv", 23)
    runtime.config_set("redundancy.release_mv", 19)
    verdict = redundancy.ripple_sweep_check(supply, runtime, engage_threshold=entry, unprotected_errors=target(sla, "redundancy_unprotected_errors"))
    verdict = verdict.verdict("redundancy_engage_threshold")
    assert verdict.outcome is Outcome.PASS and verdict.value < 30
