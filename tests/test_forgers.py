"""A forger per class (issue 20, docs/evidence.md): every answer the phone gives over ADB (runtime,
sysfs, dumpsys, getprop, vmstat) tells one consistent lie; the check of its class must turn FAIL
or INVALID on the bench's own side, on the lab's default transport (the adb server) as on the
direct one, while the honest phone passes the same check. Samples are cut to what shows the lie."""
from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from phonebench.bench.phone.adapters import shipped_numerics
from phonebench.bench.checks import audit, counters, gpu_power, redundancy, thermal_trip, tokens
from phonebench.bench.checks.targets import target, targets
from phonebench.core.verdict import Outcome, Verdict
from phonebench.bench.phone.fingerprint import fingerprint, fingerprint_verdict
from phonebench.bench.specs.sla import SlaProfile, load_profile
from phonebench.drivers.runtime import RuntimeClient
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


@contextlib.contextmanager
def _instrument(server_cls: Any, driver: Callable[[str], Any], world: Any) -> Iterator[Any]:
    server = server_cls(world)
    server.start()
    instrument = driver(server.address)
    try:
        yield instrument
    finally:
        instrument.close()
        server.stop()


def _supply(world: Any) -> Any:
    from phonebench.drivers.power import KeysightN6705C
    from phonebench.emulation.instruments.power_analyzer import PowerAnalyzerServer

    return _instrument(PowerAnalyzerServer, lambda address: KeysightN6705C(address, timeout_s=5), world)


def _daq(world: Any) -> Any:
    from phonebench.drivers.daq970a import KeysightDaq970a
    from phonebench.emulation.instruments.daq970a import Daq970aServer

    return _instrument(Daq970aServer, lambda address: KeysightDaq970a(
        address, channels={"T1": 101, "T2": 102, "T3": 103, "T4": 105}), world)


def _observed(station: EmulatedStation, persona: str) -> tuple[Any, RuntimeClient]:
    """The phone in its shipped numerics where its fingerprint earns an adapter (a forger of the
    known answers does not: it runs as it is, and is judged as it is)."""
    emulated, device, clock = station.start(persona, npu=NPU)
    runtime = RuntimeClient(device, clock=clock)
    shipped_numerics(runtime)
    return emulated, runtime


def _few(entry: Any, n: int = 20) -> Any:
    return dataclasses.replace(entry, min_samples=min(entry.min_samples, n))


# --- one check per class: the verdict that decides it --------------------------------------------------
def first_token(station: EmulatedStation, persona: str, sla: SlaProfile) -> Verdict:
    _, runtime = _observed(station, persona)
    return tokens.first_token_check(runtime, first_token=_few(sla.get("first_token_p99")), n=8).verdicts[0]


def _soak(station: EmulatedStation, persona: str, sla: SlaProfile, dialogs: int) -> Any:
    emulated, runtime = _observed(station, persona)
    world = emulated.world
    world.set_npu_frequency(1400.0)  # the soak's first minutes: a hot board, the die cooled a moment
    world.work("decode", 560.0)
    world.set_npu_frequency(1100.0)
    world.wait(20.0)
    success = dataclasses.replace(sla.get("long_dialog_success"), limit=0.9, min_samples=0)
    with _daq(world) as daq:
        return thermal_trip.thermal_trip_check(runtime, trip=sla.get("npu_trip_temperature"), kills=sla.get("npu_process_kills"),
                                               success=success, dialogs=dialogs, shield=thermal_trip.instrument_shield(daq, "T4"))


def trip(station: EmulatedStation, persona: str, sla: SlaProfile) -> Verdict:
    return _soak(station, persona, sla, dialogs=3).verdict("npu_trip_temperature")


def kills(station: EmulatedStation, persona: str, sla: SlaProfile) -> Verdict:
    return _soak(station, persona, sla, dialogs=8).verdict("npu_trip_process_kills")


def token_jitter(station: EmulatedStation, persona: str, sla: SlaProfile) -> Verdict:
    """Claim 4 over 40 inferences: with a prompt repeated every 4th inference (the old design) the
    replaying forger passed with 8.7 ms against 23; a fresh prompt per inference leaves it nothing to replay."""
    _, runtime = _observed(station, persona)
    return tokens.token_std_check(runtime, token_std=_few(sla.get("token_latency_std"), 0), inferences=40).verdicts[0]


def redundancy_engagement(station: EmulatedStation, persona: str, sla: SlaProfile) -> Verdict:
    emulated, runtime = _observed(station, persona)
    with _supply(emulated.world) as supply:
        return redundancy.ripple_sweep_check(supply, runtime, engage_threshold=sla.get("redundancy_engage_threshold"),
                                             unprotected_errors=target(sla, "redundancy_unprotected_errors"),
                                             error_ratio=target(sla, "redundancy_mac_error_ratio_50mv")
                                             ).verdict("redundancy_unprotected_errors")


def gpu_load(station: EmulatedStation, persona: str, sla: SlaProfile) -> Verdict:
    """Claim 5 on an analyzer-fed SM8650 with its model's GPU power record: no load shows no effect
    (INVALID); a light real load reported as 80 % is contradicted by its draw (FAIL)."""
    emulated, runtime = _observed(station, persona)
    entry = dataclasses.replace(_few(sla.get("token_latency_p95_gpu_load"), 150), min_runs=4)
    with _supply(emulated.world) as supply:
        return tokens.contention_check(runtime.device, runtime, loaded_latency=entry, runs=4, supply=supply,
                                       gpu_power=gpu_power.GpuPowerRelation.for_model(entry.parameters, "SM8650")
                                       ).verdicts[0]


def identity(station: EmulatedStation, persona: str, sla: SlaProfile) -> Verdict:
    _, device, clock = station.start("nominal", npu=persona)
    return fingerprint_verdict(fingerprint(device, client=RuntimeClient(device, clock=clock)))


def counter_physics(station: EmulatedStation, persona: str, sla: SlaProfile) -> Verdict:
    _, runtime = _observed(station, persona)
    result = counters.counters_check(runtime, **targets(None, **counters.ENTRIES),
                                     inferences=10)
    return result.verdict("counters_memory_bandwidth_utilisation")


def audit_log(station: EmulatedStation, persona: str, sla: SlaProfile) -> Verdict:
    """Claim 13: the clean second log is signed, chained and timed like the live inferences; its
    token counts (a template's) are not the lengths the bench drew, nor its temperatures the shield's."""
    emulated, runtime = _observed(station, persona)
    with _daq(emulated.world) as daq:
        return audit.audit_check(runtime.device, runtime, **targets(sla, **audit.ENTRIES),
                                 shield=thermal_trip.instrument_shield(daq, "T4")).verdict("audit_field_errors")


# class -> (check, forger, honest, what the forger's verdict must be)
CLASSES: dict[str, tuple[Callable[..., Verdict], str, str, Outcome]] = {
    "fabricated first token": (first_token, "fabricated-first-token", "nominal", Outcome.FAIL),
    "+7 degC thermal": (trip, "thermal-offset", "nominal", Outcome.FAIL),
    "+7 degC only while hot": (trip, "hot-thermal-offset", "nominal", Outcome.FAIL),
    "hidden kills": (kills, "patched-kills", "nominal", Outcome.FAIL),
    "faked redundancy": (redundancy_engagement, "faked-redundancy", "nominal", Outcome.FAIL),
    "fake GPU load": (gpu_load, "phantom-gpu-load", "nominal", Outcome.INVALID),
    "light GPU load": (gpu_load, "light-gpu-load", "nominal", Outcome.FAIL),
    "relabelled SoC": (identity, "SM8650-ES-RELABEL", "SM8650-ES", Outcome.FAIL),
    "counters": (counter_physics, "consistent-counters", "nominal", Outcome.FAIL),
    "replayed answers": (token_jitter, "answer-replay", "nominal", Outcome.FAIL),
    "second audit log": (audit_log, "second-log", "nominal", Outcome.FAIL),
}


@pytest.mark.parametrize("honest", [False, True], ids=["forger", "honest"])
@pytest.mark.parametrize("forgery", list(CLASSES))
def test_each_forger_is_caught_and_the_honest_phone_passes(over_adb, sla, forgery, honest):
    check, forger, nominal, caught = CLASSES[forgery]
    verdict = check(over_adb, nominal if honest else forger, sla)
    if honest:
        assert verdict.outcome is Outcome.PASS, verdict.explanation
    else:
        assert verdict.outcome is caught, verdict.explanation


def test_every_forger_is_a_station_persona():
    """`bench run --persona NAME` (and a station file's sla_persona / npu_persona) takes each."""
    from phonebench.emulation.npu_personas import PERSONAS as NPU_PERSONAS
    from phonebench.emulation.station import sla_personas

    forgers = {forger for _, forger, _, _ in CLASSES.values()}
    assert forgers - {"SM8650-ES-RELABEL"} <= sla_personas() and "SM8650-ES-RELABEL" in NPU_PERSONAS
