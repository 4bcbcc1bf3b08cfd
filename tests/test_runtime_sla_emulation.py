"""The emulated runtime's contract 1.2 behaviour: config, ripple-induced MAC errors and redundancy,
token timing, thermal trip, weight store, audit log, counters, gpuload; and the client's side."""
from __future__ import annotations

import base64
import hashlib
import json
import re

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from phonebench.bench.checks.audit import canonical
from phonebench.core.errors import UnsupportedCapability
from phonebench.bench.phone.device_state import read_thermal_zones, zone_celsius
from device_double import PhoneDevice, make_device
from phonebench.drivers.device import ShellResult
from phonebench.drivers.gpuload import GpuLoad
from phonebench.drivers.runtime import Probe, RuntimeClient, RuntimeCommandFailed, RuntimeStatus
from phonebench.emulation import npu, tinymodel
from phonebench.emulation.device import PhoneSpec
from phonebench.emulation.phones import emulated_phone
from phonebench.emulation.npu_personas import PERSONAS
from phonebench.emulation.runtime import SLA_PERSONAS_RUNTIME, EmulatedRuntime
from phonebench.emulation.runtime_config import CONFIG_PATH, KEYS
from phonebench.emulation.runtime_counters import MAC_UNITS, MACS_PER_TOKEN
from phonebench.emulation.runtime_personas import runtime_persona
from phonebench.emulation.runtime_stream import EventStream
from phonebench.emulation.runtime_timing import PROFILES, Conditions, TokenTimer
from phonebench.emulation.weights import CRC_FILE, WEIGHT_FILE, update_package


@pytest.fixture
def device() -> PhoneDevice:
    return make_device("SM8650-ES")


@pytest.fixture
def runtime(device: PhoneDevice) -> RuntimeClient:
    return RuntimeClient(device)


def ripple(device: PhoneDevice, mv: float) -> None:
    world = device.phone.world
    world.supply.emulator_on = True
    world.supply.ripple_amplitude_v = mv / 1000.0
    world.supply.ripple_running = mv > 0


# --- config --------------------------------------------------------------------------------------
def test_config_get_set_and_persist(device, runtime):
    assert runtime.config_get() == {k.name: k.default for k in KEYS.values()}
    assert runtime.config_set("redundancy.trigger_mv", 27.5) == 27.5
    assert runtime.config_set("thermal.skin_offset_c", "-1.25") == -1.25
    assert runtime.config_get("redundancy.trigger_mv") == 27.5
    assert json.loads(device.phone.fs.read(CONFIG_PATH)) == {"redundancy.trigger_mv": 27.5,
                                                             "thermal.skin_offset_c": -1.25}
    answer = json.loads(device.shell("llmrt config set redundancy.mode off").output)
    assert answer == {"key": "redundancy.mode", "value": "off", "previous": "auto"}


@pytest.mark.parametrize("command, message", [
    ("llmrt config set nope 1", "unknown config key"),
    ("llmrt config set redundancy.mode sometimes", "expected one of auto, on, off"),
    ("llmrt config set redundancy.trigger_mv lots", "expected a number"),
    ("llmrt config set thermal.skin_offset_c 99", "in [-20, 20]"),
    ("llmrt config get nope", "unknown config key"),
    ("llmrt config", "usage"),
])
def test_config_refuses_bad_keys_and_values_with_status_2(device, command, message):
    result = device.shell(command)
    assert result.exit_code == 2 and message in json.loads(result.output)["error"]
    assert device.phone.fs.exists(CONFIG_PATH) is False


def test_unreadable_config_runs_on_defaults_and_says_why(device, runtime):
    device.phone.fs.write(CONFIG_PATH, b"{broken")
    answer = json.loads(device.shell("llmrt config get").output)
    assert answer["config"]["redundancy.mode"] == "auto" and "not JSON" in answer["warning"]
    assert runtime.generate(4, seed=1).tokens  # still runs


def test_skin_offset_calibrates_the_runtimes_skin_reading(device, runtime):
    before = runtime.status().temperatures_c["skin"]
    runtime.config_set("thermal.skin_offset_c", -2.0)
    assert runtime.status().temperatures_c["skin"] == pytest.approx(before - 2.0, abs=0.02)
    drifted = RuntimeClient(make_device("SM8650-ES", faults=["skin-sensor-drift"]))
    assert drifted.status().temperatures_c["skin"] == pytest.approx(before + 6.0, abs=0.05)  # reads the sysfs node


def test_perf_profile_sets_the_npu_clock_and_survives_a_restart(device, runtime):
    runtime.config_set("npu.perf_profile", "burst")
    assert device.phone.world.npu_freq_mhz == 1400 and runtime.status().npu_freq_mhz == 1400
    device.phone.world.set_npu_frequency(1100)  # a reboot resets the clock; the runtime reapplies its setting
    EmulatedRuntime(device.phone)
    assert device.phone.world.npu_freq_mhz == 1400


# --- ripple, MAC errors and redundancy ------------------------------------------------------------
def test_mac_error_rate_is_zero_to_the_onset_and_12x_at_50mv():
    assert npu.mac_error_rate(25.0, 25.0) == 0.0 and npu.mac_error_rate(10.0, 25.0) == 0.0
    just_above = npu.mac_error_rate(25.0 + 1e-9, 25.0)
    assert npu.mac_error_rate(50.0, 25.0) / just_above == pytest.approx(12.0)
    assert npu.mac_error_rate(60.0, 25.0) > npu.mac_error_rate(50.0, 25.0)


def test_mac_faults_corrupt_upper_accumulator_bits_and_count():
    faults = npu.MacFaults(1e-3, np.random.default_rng(1))
    acc = npu.Accumulator(16, npu.OverflowRule.WRAP)
    clean = np.zeros((4, 64), dtype=np.int64)
    dirty = faults.corrupt(clean, 1000, acc)
    changed = np.abs(dirty[dirty != 0])
    assert faults.injected > 0 and changed.size > 0
    assert set(np.log2(changed).astype(int)) <= set(range(10, 15))
    assert npu.MacFaults(0.0, np.random.default_rng(1)).corrupt(clean, 1000, acc) is clean


def test_voting_recomputes_disagreements_and_returns_exact_results():
    rng = np.random.default_rng(3)
    w = npu.Int4Matrix(rng.integers(-8, 8, (256, 32)))
    x = rng.integers(-8, 8, (4, 256))
    exact = npu.matmul(x, w)
    faults, vote = npu.MacFaults(2e-4, np.random.default_rng(4)), npu.Vote()
    voted = npu.voted(lambda: npu.matmul(x, w, None, None, faults), vote)
    assert np.array_equal(voted, exact) and vote.mismatches > 0 and faults.injected > 0


def test_probes_show_mac_errors_near_the_onset_and_none_below(device, runtime):
    onset = device.phone.shell.commands["llmrt"].onset_mv
    assert 24.0 <= onset <= 28.0
    runtime.config_set("redundancy.mode", "off")
    batch = [Probe(f"p{i}", "1x100000000", "0x100000000") for i in range(64)]
    ripple(device, onset - 0.5)
    assert all(r.result == 0 for r in runtime.probe(batch))
    ripple(device, onset + 2.0)
    assert 0 < sum(r.result != 0 for r in runtime.probe(batch)) < 64


def test_redundancy_engages_above_trigger_releases_below_release_and_remembers_across_modes(device, runtime):
    def active() -> bool:
        return bool(runtime.status().redundancy_active)

    ripple(device, 30.0)
    assert not active()  # "exceeds": 30 mV is not above the 30 mV trigger
    ripple(device, 31.0)
    assert active()
    ripple(device, 26.0)
    assert active()  # hysteresis
    runtime.config_set("redundancy.mode", "off")
    assert not active()
    runtime.config_set("redundancy.mode", "auto")
    assert active()  # the auto state was tracked while forced off
    ripple(device, 24.0)
    assert not active()
    runtime.config_set("redundancy.mode", "on")
    assert active()
    status = runtime.status().redundancy
    assert status == {"active": True, "mode": "on", "trigger_mv": 30.0, "release_mv": 25.0, "sensed_mv": 24.0}


def test_release_above_trigger_acts_as_the_trigger(device, runtime):
    runtime.config_set("redundancy.release_mv", 28.0)
    runtime.config_set("redundancy.trigger_mv", 20.0)
    ripple(device, 21.0)
    assert runtime.status().redundancy_active
    ripple(device, 19.5)
    assert not runtime.status().redundancy_active


def test_tokens_wrong_at_50mv_without_redundancy_and_exact_with_it(device, runtime):
    reference = runtime.generate(40, seed=3, prompt_tokens=8).tokens
    ripple(device, 50.0)
    runtime.config_set("redundancy.mode", "off")
    wrong = runtime.generate(40, seed=3, prompt_tokens=8).tokens
    runtime.config_set("redundancy.mode", "on")
    before = runtime.status().mac_errors_detected
    right = runtime.generate(40, seed=3, prompt_tokens=8).tokens
    assert wrong != reference and right == reference
    assert runtime.status().mac_errors_detected > before


# --- timing ---------------------------------------------------------------------------------------
def test_timing_model_autocorrelated_jitter_and_condition_scaling():
    timer = TokenTimer(PROFILES["nominal"], np.random.default_rng(0))
    timer.start_run()
    steps = np.array([timer.decode(Conditions()).total_s for _ in range(4000)])
    lag1 = np.corrcoef(steps[:-1], steps[1:])[0, 1]
    assert 0.045 < np.median(steps) < 0.047 and 0.3 < lag1 < 0.9
    mean = lambda cond: np.mean([timer.decode(cond).total_s for _ in range(2000)])  # noqa: E731
    base = mean(Conditions())
    assert mean(Conditions(redundancy=True)) / base == pytest.approx(1.24, rel=0.05)
    assert mean(Conditions(npu_freq_mhz=1400)) < base
    assert mean(Conditions(gpu_busy=0.75)) / base == pytest.approx(1.225, rel=0.06)
    migrated = timer.decode(Conditions(cpu_fraction=0.25))
    assert migrated.cpu_s > 0 and migrated.npu_s > 0


def test_generate_streams_thermal_events_and_the_killed_process_ends_with_137():
    for persona, kills in (("nominal", False), ("thermal-kill", True)):
        device = make_device("SM8650-ES", sla_persona=persona)
        runtime = RuntimeClient(device)
        runtime.config_set("npu.perf_profile", "burst")
        device.phone.world.set_npu_frequency(1400)
        device.phone.world.work("decode", 700.0)
        pid = runtime.status().pid
        gen = runtime.generate(64, seed=1, prompt_tokens=8, allow_incomplete=True)
        if kills:
            assert not gen.completed and gen.exit_code == 137 and runtime.status().pid != pid
            with pytest.raises(RuntimeCommandFailed, match="137"):
                device.phone.world.work("decode", 60.0)
                runtime.generate(64, seed=1, prompt_tokens=8)
        else:
            assert gen.completed and gen.thermal_events[0]["action"] == "migrate"
            assert gen.thermal_events[0]["npu_c"] >= 72.0 and runtime.status().pid == pid
            assert runtime.status().thermal["migrations"] >= 1


def test_a_streamed_generate_killed_at_the_trip_delivers_what_it_produced():
    device = make_device("SM8650-ES", sla_persona="thermal-kill")
    device.phone.world.set_npu_frequency(1400)
    device.phone.world.work("decode", 700.0)
    sent: list[bytes] = []
    result = device.phone.shell.execute("llmrt generate --max-tokens 64 --prompt-tokens 8", sink=sent.append)
    assert result.status == 137 and result.stdout == b"" and b'"event": "start"' in sent[0]


@pytest.mark.parametrize("persona, compression, shift", [
    ("nominal", 1.0, 0.0), ("compressed-timestamps", 0.35, 0.0), ("shifted-timestamps", 1.0, 0.15)])
def test_event_stream_reports_token_times_as_the_persona_says(persona, compression, shift):
    stream = EventStream(None, runtime_persona(persona))
    for event in ({"event": "start", "t": 10.0}, {"event": "token", "index": 0, "t": 10.4},
                  {"event": "token", "index": 1, "t": 10.5}, {"event": "done", "t": 10.5}):
        stream.append(event)
    said = [e["t"] for e in stream.events]
    assert said[0] == 10.0 and said[1] == pytest.approx(10.4 - shift)
    assert said[2] - said[1] == pytest.approx(0.1 * compression) and said[3] == said[2]
    assert stream.kept.count(b"\n") == 4  # nothing streams without a sink: all of it is returned


def test_mac_counter_is_the_models_work_over_the_decode_cycles(runtime):
    runtime.counters(reset=True)
    runtime.generate(17, seed=1, prompt_tokens=8)
    data = runtime.counters()
    assert data["mac_busy_cycles"] == int(16 * MACS_PER_TOKEN / MAC_UNITS)


# --- personas -------------------------------------------------------------------------------------
def test_runtime_personas_are_declared_and_unknown_names_run_nominal():
    assert {"nominal", "jittery", "slow", "contention-sensitive", "no-redundancy", "late-redundancy",
            "thermal-kill", "corrupt-weights", "leaky-log", "unsigned-log", "trip-misreported",
            "redundancy-flag-only", "ripple-sensed-low", "spot-time-omits-read", "audit-drop"} <= SLA_PERSONAS_RUNTIME
    device = make_device("SM8650-ES", sla_persona="hot")  # a world-side persona
    assert RuntimeClient(device).generate(4, seed=1).tokens


# --- lying personas: what the runtime says is not what it does ------------------------------------
def test_flag_only_redundancy_says_engaged_but_neither_votes_nor_slows():
    device = make_device("SM8650-ES", sla_persona="redundancy-flag-only")
    runtime = RuntimeClient(device)
    runtime.config_set("redundancy.mode", "on")
    ripple(device, 60.0)
    status = runtime.status()
    assert status.redundancy_active is True
    results = runtime.probe([Probe(f"z{i}", "1x10000000,-1x10000000", "1x20000000") for i in range(64)])
    assert any(r.result != 0 for r in results)  # single compute: the errors come through
    assert runtime.status().mac_errors_detected == status.mac_errors_detected == 0  # no vote ever ran


def test_ripple_sensed_low_reads_half_the_ripple():
    device = make_device("SM8650-ES", sla_persona="ripple-sensed-low")
    runtime = RuntimeClient(device)
    ripple(device, 50.0)
    status = runtime.status()
    assert status.redundancy["sensed_mv"] == 25.0 and not status.redundancy_active  # 25 mV < the 30 mV trigger


def _first_trip(device) -> dict:
    """Heat the NPU near its trip, then burst inferences until the runtime migrates: its event."""
    runtime = RuntimeClient(device)
    world = device.phone.world
    world.set_npu_frequency(1400)
    world.work("decode", 560.0)
    world.set_npu_frequency(1100)
    world.wait(20.0)
    runtime.config_set("npu.perf_profile", "burst")
    for _ in range(200):
        gen = runtime.generate(4, seed=1, prompt_tokens=8)
        if gen.thermal_events:
            break
    return gen.thermal_events[0]


def test_trip_misreported_acts_at_65_and_says_72():
    device = make_device("SM8650-ES", sla_persona="trip-misreported")
    world = device.phone.world
    event = _first_trip(device)
    assert event["action"] == "migrate" and event["npu_c"] == 72.0
    assert 64.5 < world.temperatures()["npu"] < 66.5  # where it really acted


def test_thermal_offset_reads_7_high_everywhere_and_acts_at_a_real_65():
    """The forger of claim 8: the runtime's events and status, the sysfs zone and dumpsys all say
    the NPU is 7 degC hotter than the die is; the shield under the cover reads the truth."""
    device = make_device("SM8650-ES", sla_persona="thermal-offset")
    runtime, world = RuntimeClient(device), device.phone.world
    event = _first_trip(device)
    die = world.surface_temperatures()["npu"]
    assert event["action"] == "migrate" and 71.5 < event["npu_c"] < 72.5 and 64.5 < die < 66.5
    said = {"status": runtime.status().temperatures_c["npu"],
            "sysfs": zone_celsius(read_thermal_zones(device), "npu"),
            "dumpsys": float(re.search(r"mValue=([\d.]+), mType=9", device.shell("dumpsys thermalservice").output)[1])}
    for where, value in said.items():
        assert value - die == pytest.approx(7.0, abs=0.06), where
    assert world.surface_temperatures()["shield"] < die  # the instrument's side is not rewritten


def test_spot_time_omits_read_reports_a_healthy_time_for_a_slow_read():
    device = make_device("SM8650-ES", sla_persona="spot-time-omits-read")
    runtime = RuntimeClient(device)
    clock = device.phone.world.clock
    start = clock.now()
    page = runtime.weights_read(5, with_path=True)
    assert clock.now() - start > 0.09 * (1 + len(page.path))  # the flash really is slow
    assert page.read_ms < 1.0  # and the report leaves it out


def test_audit_drop_loses_records_at_random_at_one_in_seven():
    device = make_device("SM8650-ES", sla_persona="audit-drop")
    runtime = RuntimeClient(device)
    for i in range(140):
        runtime.generate(1, seed=i, prompt_tokens=4)
    stored = device.phone.fs.read("/data/vendor/llm/audit/audit.log").decode().splitlines()
    lost = 140 - len(stored)
    assert 8 <= lost <= 35  # binomial(140, 1/7): mean 20, +-3.5 sd
    seqs = [json.loads(line)["seq"] for line in stored]
    gaps = [b - a for a, b in zip(seqs, seqs[1:]) if b - a > 1]
    assert len(set(gaps)) > 1 or len(gaps) < 3  # not every 7th


# --- weights, audit, counters ---------------------------------------------------------------------
def test_weight_store_is_the_signed_update_and_reads_check_crc(device, runtime):
    package = update_package()
    assert device.phone.fs.read(WEIGHT_FILE) is package.data  # shared, not copied per phone
    page = runtime.weights_read(5, with_path=True)
    assert page.data == package.page(5) and page.crc_ok and len(page.path) == package.tree.geometry.levels
    assert 0 < page.read_ms < 20
    assert runtime.weights_verify().crc_errors == 0
    bad = make_device("SM8650-ES", sla_persona="corrupt-weights")
    report = RuntimeClient(bad).weights_verify()
    assert report.crc_errors == 1 and len(report.bad_pages) == 1
    assert bad.phone.fs.read(CRC_FILE) == package.crc


def test_weights_repair_refuses_a_page_that_does_not_match_the_tree(device, runtime):
    device.push_bytes(b"\0" * 4096, "/data/local/tmp/p.bin")
    with pytest.raises(RuntimeCommandFailed, match="does not match its digest"):
        runtime.weights_repair(3, "/data/local/tmp/p.bin")
    device.push_bytes(update_package().page(3), "/data/local/tmp/p.bin")
    assert runtime.weights_repair(3, "/data/local/tmp/p.bin") == {"repaired": 3, "bytes": 4096}


def test_audit_records_are_signed_chained_and_hold_no_content(device, runtime):
    runtime.generate(4, seed=1, prompt=[5, 6, 7, 8])
    runtime.generate(4, seed=2, prompt=[5, 6, 7, 8])
    status = runtime.audit_status()
    key = Ed25519PublicKey.from_public_bytes(status.public_key)
    lines = device.pull_bytes(status.path).decode().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["seq"] for r in records] == [1, 2] and status.records == 2
    for record in records:
        key.verify(base64.b64decode(record["sig"]), canonical(record))
        assert set(record) == {"seq", "t", "input_tokens", "output_tokens", "model_version", "npu_freq_mhz",
                               "npu_temp_c", "prev", "sig"}
    assert records[0]["input_tokens"] == 4 and records[0]["output_tokens"] == 4
    assert records[1]["prev"] == hashlib.sha256((lines[0] + "\n").encode()).hexdigest()


def test_counters_count_the_work_and_reset(runtime):
    runtime.counters(reset=True)
    runtime.generate(16, seed=1, prompt_tokens=8)
    data = runtime.counters()
    assert data["tokens"] == 16 and data["kv_lookups"] > 0 and 0.08 < data["kv_cache_miss_rate"] < 0.15
    runtime.counters(reset=True)
    assert runtime.counters()["tokens"] == 0


# --- gpuload --------------------------------------------------------------------------------------
def test_gpuload_start_status_stop(device):
    load = GpuLoad(device)
    assert not load.status().running
    state = load.start(0.75)
    assert state.running and state.kind == "video+call" and 0.70 < state.gpu_busy < 0.82
    assert load.stop().running is False
    weak = GpuLoad(make_device("SM8650-ES", faults=["gpu-load-weak"]))
    assert weak.start(0.9).gpu_busy <= 0.55
    assert device.shell("gpuload start --target 2").exit_code == 2


def test_gpuload_missing_is_unsupported():
    phone = emulated_phone(PhoneSpec(faults=["no-runtime"]))
    with pytest.raises(UnsupportedCapability, match="gpuload"):
        GpuLoad(PhoneDevice(phone)).status()


# --- the client's side ----------------------------------------------------------------------------
@pytest.mark.parametrize("redundancy, active, mode", [
    ({"active": True, "mode": "auto"}, True, "auto"), (False, False, None), ("dual-vote", True, None),
    (None, None, None)])
def test_status_reads_redundancy_in_either_contract_shape(redundancy, active, mode):
    status = RuntimeStatus(t=1.0, redundancy=redundancy)
    assert status.redundancy_active is active and status.redundancy_mode == mode


def test_killed_stream_is_an_error_unless_incomplete_is_allowed():
    class Killed:
        name = "k"

        def shell(self, command, timeout_s=None) -> ShellResult:
            if "identity" in command:
                out = json.dumps({"contract": "1.2", "runtime_version": "x", "model": "m", "microcode": "u",
                                  "capabilities": ["generate"]})
                return ShellResult(self.name, command, out + "\n", 0)
            out = "".join(json.dumps(e) + "\n" for e in (
                {"event": "start", "t": 1.0, "prompt_tokens": 2}, {"event": "token", "index": 0, "id": 5, "t": 1.2},
                {"event": "thermal", "t": 1.3, "action": "migrate", "npu_c": 72.1}))
            return ShellResult(self.name, command, out, 137)

    client = RuntimeClient(Killed())  # type: ignore[arg-type]
    with pytest.raises(RuntimeCommandFailed, match="137"):
        client.generate(4)
    gen = client.generate(4, allow_incomplete=True)
    assert not gen.completed and gen.tokens == [5] and gen.thermal_events[0]["npu_c"] == 72.1


def test_model_streams_are_shared_and_prefixes_agree():
    acc = PERSONAS["SM8650-ES"].accumulator
    prompt = tinymodel.prompt_tokens(8, 21)
    golden = tinymodel.shared_model().generate(prompt, 20, 21, npu_matmul=lambda x, w: npu.matmul(x, w, acc))
    a, b = RuntimeClient(make_device("SM8650-ES", "A")), RuntimeClient(make_device("SM8650-ES", "B"))
    assert a.generate(8, seed=21, prompt=prompt).tokens == golden[:8]
    assert b.generate(20, seed=21, prompt=prompt).tokens == golden
