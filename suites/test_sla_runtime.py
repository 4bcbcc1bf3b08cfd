"""The SLA suite, runtime side: claims 3, 4, 5, 8, 10, 11, 12, 13, 14 measured through the runtime
contract (bench/checks/{tokens,thermal_trip,redundancy,weights,audit,counters}.py). Token timing
and the counters' cross-checks use the station clock (`clock`, `timed_runtime`: the host's, or the
emulated world's time server, which every emulated station has), so on an emulated station they run on the phone sharing its world.

Limits, confidence and sample counts come from the `sla` fixture's profile (the checks' own
targets, bench/checks/targets.toml, for metrics the product profile does not hold). Every verdict
keeps its raw data next to results.json. A runtime without a capability a check needs is skipped
with the reason. `acceptance` marks the two checks cheap enough for a production line as they are
(the Merkle root and the audit log); the line's own short versions are suites/test_acceptance.py.
"""
from __future__ import annotations

from typing import Any

import pytest

from phonebench.bench.phone.adapters import shipped_numerics
from phonebench.bench.checks import chamber_hold
from phonebench.bench.checks import audit, counters, gpu_power, redundancy, thermal_trip, token_power, tokens, weights, wiring
from phonebench.bench.checks.targets import target, targets
from phonebench.bench.specs.payloads import find_payload
from phonebench.core.errors import UnsupportedCapability
from phonebench.core.station import StationConfig
from phonebench.drivers.runtime import RuntimeClient

COVER_CHANNELS = ("T1", "T2")  # the thermal fixture's back-cover probes (bench/checks/thermal.py)

# Checks state their own evidence; what they leave unstated (informative counts) is the phone's word.
pytestmark = [pytest.mark.regression, pytest.mark.evidence("reported"), pytest.mark.capabilities("generate", "status")]


@pytest.fixture
def observed_runtime(timed_runtime: RuntimeClient) -> RuntimeClient:
    """The runtime with the station clock: token arrivals are stamped on the host (claims 3-5, 14),
    in its shipped numerics (the profile's overflow adapter) so its tokens can be checked against the
    bench's reference model."""
    _shipped_numerics(timed_runtime)
    return timed_runtime


def _shipped_numerics(client: RuntimeClient) -> None:
    """Activate the adapter the fingerprint assigns; a runtime without probes runs as it is (its
    tokens are still checked: wrong numerics show as tokens that are not the model's)."""
    try:
        shipped_numerics(client)
    except UnsupportedCapability:
        pass


def _require_ripple(supply: Any) -> None:
    try:
        redundancy.require_ripple(supply)
    except UnsupportedCapability as exc:
        pytest.skip(str(exc))


def _cover_probe(request: pytest.FixtureRequest, station: StationConfig, dut: Any) -> thermal_trip.CoverProbe | None:
    """The hottest back-cover probe, when the station's thermal instrument is on this DUT."""
    if "thermal" not in station.instruments or station.instrument_dut("thermal") != dut.name:
        return None
    probe = request.getfixturevalue("thermal")

    def hottest() -> float:
        reading = probe.read()
        return max(reading.celsius[c] for c in COVER_CHANNELS if c in reading.celsius)
    return hottest


def _shield_probe(request: pytest.FixtureRequest, station: StationConfig,
                  dut: Any) -> thermal_trip.ShieldProbe | None:
    """The thermocouple on the SoC's shield (station file: the DUT's shield_channel), when the
    station's thermal instrument is on this DUT: the trip temperature's independent side."""
    channel = station.dut(dut.name).shield_channel
    if channel is None or "thermal" not in station.instruments or station.instrument_dut("thermal") != dut.name:
        return None
    return thermal_trip.instrument_shield(request.getfixturevalue("thermal"), channel, COVER_CHANNELS)


# --- claims 3-5: token timing, observed on the station clock (docs/evidence.md) --------------------
def test_first_token(observed_runtime, sla, record, progress):
    entry = sla.get("first_token_p99")
    with progress.bar(entry.n_required, "first tokens") as bar:
        tokens.first_token_check(observed_runtime, first_token=entry, tick=bar.update).record_into(record)


def test_token_latency_std(observed_runtime, sla, record, progress):
    entry = sla.get("token_latency_std")
    n = int(entry.parameters.get("consecutive_inferences", 1000))
    with progress.bar(n, "consecutive inferences") as bar:
        tokens.token_std_check(observed_runtime, token_std=entry, inferences=n, tick=bar.update).record_into(record)


def test_token_latency_under_gpu_load(request, station, dut, observed_runtime, sla, record, progress):
    """The load must show on the power analyzer feeding the phone (when one does) or in the tokens."""
    supply = request.getfixturevalue("supply") if "supply" in station.instruments \
        and station.instrument_dut("supply") == dut.name else None
    with progress.bar(None, "runs under GPU load") as bar:
        try:
            entry = sla.get("token_latency_p95_gpu_load")
            # The record for the SoC the lab's inventory declares, else the one the phone names
            # (claim 9's fingerprint holds that name against its NPU's behaviour).
            soc = station.dut(dut.name).expected_soc or dut.getprop("ro.soc.model")
            result = tokens.contention_check(dut, observed_runtime, supply, loaded_latency=entry,
                                             gpu_power=gpu_power.GpuPowerRelation.for_model(entry.parameters, soc),
                                             tick=bar.update)
        except UnsupportedCapability as exc:
            pytest.skip(str(exc))
    result.record_into(record)


@pytest.mark.needs("supply")
def test_the_supply_is_wired_to_this_phone(observed_runtime, supply, sla, record):
    """The bay's cabling: its supply must follow its phone's work (a cross-wired bay fails here, named)."""
    wiring.supply_wiring_check(supply, observed_runtime, follows=target(sla, wiring.METRIC)).record_into(record)


@pytest.mark.needs("supply")
def test_token_timing_against_the_power_trace(observed_runtime, supply, record):
    """A second witness: the inference's span in the supply current vs the station clock and the report."""
    token_power.power_cross_check(supply, observed_runtime).record_into(record)


# --- claim 10: voltage redundancy ----------------------------------------------------------------
@pytest.mark.needs("supply")
@pytest.mark.capabilities("config", "probe")
def test_redundancy_ripple_sweep(runtime, supply, sla, record, progress):
    _require_ripple(supply)
    with progress.bar(None, "ripple steps") as bar:
        result = redundancy.ripple_sweep_check(supply, runtime,
                                               engage_threshold=sla.get("redundancy_engage_threshold"),
                                               unprotected_errors=target(sla, "redundancy_unprotected_errors"),
                                               error_ratio=target(sla, "redundancy_mac_error_ratio_50mv"),
                                               tick=bar.update)
    result.record_into(record)


@pytest.mark.needs("supply")
@pytest.mark.capabilities("config")
def test_redundancy_bit_exact_at_50mv(runtime, supply, sla, record):
    _require_ripple(supply)
    result = redundancy.bit_exact_check(supply, runtime, token_mismatches=sla.get("redundancy_token_mismatches"),
                                        off_token_mismatches=target(sla, "redundancy_off_token_mismatches"))
    result.record_into(record)


@pytest.mark.capabilities("config")
def test_redundancy_slowdown(runtime, clock, sla, record, progress):
    with progress.bar(None, "paired runs") as bar:
        redundancy.slowdown_check(runtime, slowdown=sla.get("redundancy_slowdown"), now=clock.now,
                                  tick=bar.update).record_into(record)


# --- claims 11, 12: weights ----------------------------------------------------------------------
@pytest.mark.capabilities("weights")
def test_weight_pages_read_without_error(dut, runtime, sla, record):
    weights.read_errors_check(dut, runtime, read_errors=sla.get("weight_page_read_errors"),
                              error_rate=target(sla, "weights_page_error_rate")).record_into(record)


@pytest.mark.acceptance
@pytest.mark.capabilities("weights")
def test_weights_merkle_root(dut, runtime, sla, record):
    weights.root_check(dut, runtime, root_mismatches=target(sla, "weights_root_mismatches")).record_into(record)


@pytest.mark.capabilities("weights")
def test_weights_spot_check_time(dut, runtime, clock, sla, record, progress):
    entry = sla.get("merkle_spot_check_time")
    with progress.bar(entry.n_required, "spot checks") as bar:
        weights.spot_check_time_check(dut, runtime, spot_check_time=entry, now=clock.now,
                                      tick=bar.update).record_into(record)


@pytest.mark.capabilities("weights")
def test_weights_corrupt_page_repaired(dut, runtime, sla, record, station):
    """Inject one bad page (an engineering unit's /data/vendor is writable), detect it, re-send it alone."""
    manifest = weights.load_manifest(dut, runtime)
    package = find_payload(station.payloads, manifest.root, manifest.salt, manifest.data_size)
    if package is None:
        pytest.skip(f"no update payload for weights root {manifest.root.hex()[:16]}... in the station's payloads "
                    f"folder ({station.payloads or 'none set'}): add the release's weight file there")
    weights.corrupt_and_repair_check(dut, runtime, package.page,
                                     **targets(sla, **weights.REPAIR_ENTRIES)).record_into(record)


# --- claims 13, 14: audit log and counters -------------------------------------------------------
@pytest.mark.acceptance
@pytest.mark.capabilities("audit")
def test_audit_log(request, station, dut, timed_runtime, sla, record):
    """Each record matched to the inference the bench issued: lengths drawn by the bench, times on
    the station clock, the NPU temperature against the shield when its thermocouple is wired."""
    audit.audit_check(dut, timed_runtime, _shield_probe(request, station, dut), **targets(sla, **audit.ENTRIES),
                      relation=thermal_trip.ShieldRelation.from_parameters(sla.get("npu_trip_temperature").parameters)
                      ).record_into(record)


@pytest.mark.capabilities("counters")
def test_runtime_counters(observed_runtime, sla, record):
    counters.counters_check(observed_runtime, **targets(sla, **counters.ENTRIES)).record_into(record)


# --- claim 8: thermal trip soak ------------------------------------------------------------------
# Last: the phone it leaves hot rests only when another test follows on it (`next_on_phone`), so a
# default run spends no cool-down at all; after the token checks, whose inferences leave the NPU
# warm (moved first, on the phone the sustained-use study left, it took 2 lab minutes longer).
@pytest.mark.capabilities("config")
def test_npu_thermal_trip_soak(request, station, dut, observed_runtime, sla, record, progress, next_on_phone,
                              hold_air):
    """Dialogs streamed on the station clock and checked against the reference: kills and success
    are what the host sees (docs/evidence-safety.md). In a chamber the soak starts once its air is
    stable at the trip entry's set point, and states it."""
    runtime = observed_runtime
    success = sla.get("long_dialog_success")
    trip = sla.get("npu_trip_temperature")
    held = hold_air(trip)
    with progress.bar(None, "approach and soak dialogs") as bar, chamber_hold.kept(record, held):
        result = thermal_trip.thermal_trip_check(runtime, _cover_probe(request, station, dut),
                                                 _shield_probe(request, station, dut), trip=trip,
                                                 kills=sla.get("npu_process_kills"), success=success,
                                                 cool_down=next_on_phone is not None, tick=bar.update,
                                                 watch=held.watch if held else None)
    record.raw("rest", {"after": "the soak", "rested": next_on_phone is not None,
                        "reason": f"{next_on_phone} follows on this phone" if next_on_phone
                        else "no test follows on this phone"})
    (held.attach(result) if held else result).record_into(record)
