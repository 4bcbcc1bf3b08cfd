"""The safety claims (8, 10-13) rest on what the bench measures, not on what the phone says.

Each lying persona reports something about itself that is not what it does; its check must turn
FAIL (or INCONCLUSIVE where nothing independent can be measured), while the honest phone passes
the same checks. Sample counts are the profile's where a pass must be shown.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from phonebench.bench.checks import audit, redundancy, thermal_trip, weights
from phonebench.bench.checks.targets import target, targets
from phonebench.core.verdict import Evidence, Outcome
from phonebench.bench.phone.device_state import phone_clock
from phonebench.bench.specs.sla import SlaProfile, load_profile
from device_double import PhoneDevice, WorldClock, emulated_shield_probes, emulated_supplies, make_device
from phonebench.drivers.runtime import Arrivals, Generation, Probe, RuntimeClient
from phonebench.emulation.runtime_personas import PERSONAS
from phonebench.emulation.world import World
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


def phone(persona: str = "nominal", *faults: str) -> tuple[PhoneDevice, RuntimeClient]:
    device = make_device(NPU, f"EMU-{persona}", sla_persona=persona, faults=list(faults))
    return device, RuntimeClient(device)


def outcomes(result: Any) -> dict[str, Outcome]:
    return {v.name: v.outcome for v in result.verdicts}


def test_every_liar_is_a_declared_persona():
    for name in ("trip-misreported", "thermal-offset", "redundancy-flag-only", "ripple-sensed-low", "spot-time-omits-read",
                 "audit-drop", "patched-kills", "faked-redundancy"):
        assert name in PERSONAS


# --- claim 8: the trip temperature is the bench's zone reading, the event field a report ----------
def _preheated(persona: str) -> tuple[PhoneDevice, RuntimeClient]:
    device, runtime = phone(persona)
    world = device.phone.world
    world.set_npu_frequency(1400.0)
    world.work("decode", 560.0)
    world.set_npu_frequency(1100.0)
    world.wait(20.0)
    return device, runtime


def _trip(sla: SlaProfile, persona: str, slow_cover_c: float | None = None, shield: bool = True,
          **kwargs: Any) -> Any:
    """slow_cover_c: a cover probe reading this, whose scan takes a second of the phone's time;
    shield: the shield thermocouple on an emulated DAQ970A (the trip's independent side)."""
    success = dataclasses.replace(sla.get("long_dialog_success"), limit=0.9, min_samples=0)
    device, runtime = _preheated(persona)
    if slow_cover_c is not None:
        world = device.phone.world
        kwargs["cover"] = lambda: (world.wait(1.0), slow_cover_c)[1]
    with emulated_shield_probes() as attach:
        if shield:
            kwargs["shield"] = attach(device)
        return thermal_trip.thermal_trip_check(runtime, trip=sla.get("npu_trip_temperature"),
                                               kills=sla.get("npu_process_kills"), success=success, dialogs=28, **kwargs)


def test_a_trip_reported_at_72_but_taken_at_65_fails_on_the_bench_reading(sla):
    verdict = _trip(sla, "trip-misreported").verdict("npu_trip_temperature")
    assert verdict.outcome is Outcome.FAIL and verdict.evidence is Evidence.CORROBORATED
    low, high = verdict.extra["bracket_c"]
    assert 63.0 < low <= high < 67.0 and high - low < 1.5  # the bench's own bracket, tight
    assert verdict.extra["runtime_reported_c"] == 72.0 and "report is wrong" in verdict.explanation


def test_an_honest_trip_is_bracketed_by_the_bench_and_the_report_agrees(sla):
    """With a thermal instrument whose scan takes time, too: it must not cool the die between the
    bench's zone readings and the runtime's look."""
    verdict = _trip(sla, "nominal", slow_cover_c=45.0).verdict("npu_trip_temperature")
    assert verdict.outcome is Outcome.PASS and verdict.evidence is Evidence.CORROBORATED
    low, high = verdict.extra["bracket_c"]
    assert low - 0.1 <= 72.0 <= high + 0.1 and high - low < 0.5  # refined with one-token inferences
    assert low - thermal_trip.REPORT_TOLERANCE_C <= verdict.extra["runtime_reported_c"] \
        <= high + thermal_trip.REPORT_TOLERANCE_C
    assert verdict.uncertainty is not None and verdict.uncertainty.expanded > 0
    assert verdict.extra["cover_c"] == 45.0


def test_without_a_shield_thermocouple_the_trip_is_the_phones_word(sla):
    """The zone bracket alone is what the phone says: shown, never a PASS."""
    verdict = _trip(sla, "nominal", shield=False).verdict("npu_trip_temperature")
    assert verdict.evidence is Evidence.REPORTED and verdict.outcome is Outcome.INCONCLUSIVE
    assert "no shield thermocouple" in verdict.explanation


def _teardown_readings(rest_s: Callable[[int], float]) -> list[tuple[float, float, float]]:
    """(die, shield, cover) on a teardown unit: 10 power steps, each read 3 times after a decode
    burst of 1-3 s and a rest of rest_s(k)."""
    rows = []
    for seed, (mhz, seconds) in enumerate([(1400, 560), (1100, 300), (1400, 120), (1400, 900), (1100, 60),
                                           (800, 600), (1400, 30), (1400, 1500), (1100, 1200), (1400, 2400)]):
        world = World(seed=seed)
        world.set_npu_frequency(mhz)
        world.work("decode", seconds)
        for k in range(3):
            world.work("decode", 1.0 + k)
            world.wait(rest_s(k))
            t = world.surface_temperatures()
            rows.append((t["npu"], t["shield"], t["cover_a"]))
    return rows


def test_the_shield_relation_is_identified_from_power_steps_on_a_teardown_unit(sla):
    """The calibration record in the profile is what identify_shield_relation gives for power
    steps on a unit of the model with a thermocouple on its die (the emulated world's die node)."""
    found = thermal_trip.identify_shield_relation(_teardown_readings(lambda k: thermal_trip.SHIELD_SETTLE_S))
    record = thermal_trip.ShieldRelation.from_parameters(sla.get("npu_trip_temperature").parameters)
    assert found.n == record.n == 30
    assert found.offset_c == pytest.approx(record.offset_c, abs=0.01)
    assert found.gain == pytest.approx(record.gain, abs=0.005)
    assert found.fit_u_c <= record.fit_u_c + 0.005
    assert 2 * math.hypot(thermal_trip.SHIELD_PROBE_ACCURACY_C / math.sqrt(3), record.fit_u_c) < 2.0  # << 7 degC


def test_the_under_load_relation_is_identified_right_after_decode_steps(sla):
    """The profile's shield_load_* record: the teardown unit's die, shield and cover read 0.1-0.3 s
    after decode work (the die still shedding heat through the shield), die 42-75 degC."""
    rows = _teardown_readings(lambda k: 0.1 + 0.1 * k)
    found = thermal_trip.identify_shield_relation(rows)
    record = thermal_trip.ShieldRelation.under_load(sla.get("npu_trip_temperature").parameters)
    assert record is not None and found.n == record.n == 30
    assert found.offset_c == pytest.approx(record.offset_c, abs=0.01)
    assert found.gain == pytest.approx(record.gain, abs=0.002)
    assert found.fit_u_c <= record.fit_u_c
    assert min(r[0] for r in rows) < 45 and max(r[0] for r in rows) > 72


def test_a_zone_that_lies_only_while_hot_fails_at_the_trip_and_reads_true_at_rest(sla):
    verdict = _trip(sla, "hot-thermal-offset").verdict("npu_trip_temperature")
    assert verdict.outcome is Outcome.FAIL and "off while hot" in verdict.explanation
    assert abs(verdict.extra["shield"]["zone_offset_c"]) < verdict.extra["shield"]["tolerance_c"]  # true at rest
    assert verdict.extra["hot_shield"]["zone_offset_c"] > 5.0
    honest = _trip(sla, "nominal").verdict("npu_trip_temperature")
    assert honest.outcome is Outcome.PASS and "and while hot" in honest.explanation
    assert abs(honest.extra["hot_shield"]["zone_offset_c"]) < honest.extra["hot_shield"]["tolerance_c"]


def test_a_zone_reading_below_the_back_cover_is_not_credible(sla):
    """The die heats the cover: a cover probe hotter than the NPU zone means the zone lies low."""
    verdict = _trip(sla, "early-trip", slow_cover_c=80.0).verdict("npu_trip_temperature")
    assert verdict.outcome is Outcome.INVALID and "back cover" in verdict.explanation
    assert verdict.extra["cover_c"] == 80.0


# --- claim 10: ripple from the digitizer, engagement from the results ------------------------------
@pytest.fixture
def bench_supply() -> Iterator[Any]:
    with emulated_supplies() as attach:
        def make(persona: str = "nominal") -> tuple[PhoneDevice, RuntimeClient, Any]:
            device, runtime = phone(persona)
            return device, runtime, attach(device)

        yield make


def test_the_digitizer_measures_the_ripple_at_the_terminals(bench_supply):
    _, _, supply = bench_supply()
    redundancy.power_up(supply)
    redundancy.apply_ripple(supply, 40.0)
    measured = redundancy.measure_ripple_mv(supply)
    redundancy.apply_ripple(supply, 0.0)
    assert 39.5 < measured < 41.5  # the load's constant power adds a little at the terminals
    assert redundancy.measure_ripple_mv(supply) < 0.5


def _sweep(sla: SlaProfile, bench_supply: Any, persona: str) -> Any:
    _, runtime, supply = bench_supply(persona)
    return redundancy.ripple_sweep_check(supply, runtime, engage_threshold=sla.get("redundancy_engage_threshold"),
                                         unprotected_errors=target(sla, "redundancy_unprotected_errors"),
                                         error_ratio=target(sla, "redundancy_mac_error_ratio_50mv"))


def test_a_redundancy_flag_without_dual_compute_fails_sweep_tokens_and_cost(sla, bench_supply):
    swept = _sweep(sla, bench_supply, "redundancy-flag-only")
    assert outcomes(swept)["redundancy_engage_threshold"] is Outcome.FAIL
    assert outcomes(swept)["redundancy_unprotected_errors"] is Outcome.FAIL
    assert swept.verdict("redundancy_engage_threshold").extra["flag_contradicted_at_mv"]
    _, runtime, supply = bench_supply("redundancy-flag-only")
    exact = redundancy.bit_exact_check(supply, runtime, token_mismatches=sla.get("redundancy_token_mismatches"),
                                       off_token_mismatches=target(sla, "redundancy_off_token_mismatches"), tokens=24)
    assert outcomes(exact)["redundancy_token_mismatches"] is Outcome.FAIL
    assert exact.raw["bit_exact"]["engaged"] is True  # it did say so
    cost = redundancy.slowdown_check(runtime, slowdown=sla.get("redundancy_slowdown"), pairs=10, now=phone_clock(runtime),
                                     now_evidence=Evidence.CORROBORATED).verdicts[0]
    assert cost.outcome is Outcome.FAIL and "did not really engage" in cost.explanation


def test_a_ripple_sensor_reading_low_fails_on_the_measured_ripple(sla, bench_supply):
    swept = _sweep(sla, bench_supply, "ripple-sensed-low")
    assert outcomes(swept)["redundancy_engage_threshold"] is Outcome.FAIL  # never engaged up to 60 mV measured
    assert outcomes(swept)["redundancy_unprotected_errors"] is Outcome.FAIL
    assert swept.verdict("redundancy_sensed_over_measured").value == pytest.approx(0.5, abs=0.02)


def test_the_honest_unit_engages_by_behaviour_and_its_flag_is_corroborated(sla, bench_supply):
    swept = _sweep(sla, bench_supply, "nominal")
    engage = swept.verdict("redundancy_engage_threshold")
    assert engage.outcome is Outcome.PASS and engage.evidence is Evidence.CORROBORATED
    assert not engage.extra["flag_contradicted_at_mv"]
    assert outcomes(swept)["redundancy_unprotected_errors"] is Outcome.PASS
    assert swept.verdict("redundancy_sensed_over_measured").value == pytest.approx(1.0, abs=0.03)
    ratio = swept.verdict("redundancy_mac_error_ratio_50mv")
    low, high = ratio.extra["interval"]
    # Errors really grow with ripple, and the interval reaches the claimed 12x +- 4 band (the ratio to
    # the lowest erring step depends on where the unit's own onset falls between sweep steps).
    assert ratio.outcome is Outcome.PASS and low > 1.0 and low <= 16.0 and high >= 8.0


def _point(mv: float, wrong: int, probes: int = 256) -> redundancy.RipplePoint:
    point = redundancy.RipplePoint(mv, False, "auto", mv, mv, probes=probes, probes_wrong=wrong,
                                   probes_wrong_auto=0)
    point.mac_error_rate = redundancy._error_rate(wrong, probes, point.macs_per_probe)
    return point


def test_a_ratio_whose_interval_misses_the_claimed_12x_fails(sla):
    entry = target(sla, "redundancy_mac_error_ratio_50mv")
    flat = redundancy._ratio_verdict(entry, [_point(25, 0), _point(30, 60), _point(50, 70)])
    assert flat.outcome is Outcome.FAIL and flat.extra["interval"][1] < 8.0
    steep = redundancy._ratio_verdict(entry, [_point(25, 0), _point(30, 8), _point(50, 100)])
    assert steep.outcome is Outcome.PASS
    assert redundancy._ratio_verdict(entry, [_point(25, 0), _point(50, 0)]).outcome is Outcome.INVALID


def test_known_answer_probes_are_fresh_non_trivial_and_stay_inside_16_bits():
    first, second = redundancy.known_answer_batch(20_000_000, 16), redundancy.known_answer_batch(20_000_000, 16)
    assert not set(first.answers) & set(second.answers)  # ids never repeat across batches
    assert {p.a for p in first.probes}.isdisjoint({p.a for p in second.probes})  # nor vectors
    for probe in first.probes[:3]:
        a = [tuple(int(x) for x in seg.split("x")) for seg in probe.a.split(",")]
        b = [tuple(int(x) for x in seg.split("x")) for seg in probe.b.split(",")]
        partial, peak = 0, 0
        for (va, n), (vb, m) in zip(a, b):
            assert n == m
            partial += va * vb * n
            peak = max(peak, abs(partial))
        assert partial == first.answers[probe.id] != 0 and peak <= redundancy.PROBE_RUN
        assert sum(n for _, n in a) == 20_000_000


def test_a_unit_answering_the_old_known_answers_uncomputed_is_caught(sla, bench_supply):
    """The forger answers probes that look like the old fixed ones (ids r0.., a vector of ones) with
    0 without computing and raises its flag early; fresh probes make it compute, and its single
    compute errs unprotected above its onset."""
    _, runtime, _ = bench_supply("faked-redundancy")
    old_style = [Probe(f"r{i}", "1x16384,-1x16384", "1x32768") for i in range(4)]
    assert all(r.result == 0 for r in runtime.probe(old_style))
    swept = _sweep(sla, bench_supply, "faked-redundancy")
    assert outcomes(swept)["redundancy_engage_threshold"] is Outcome.FAIL
    assert outcomes(swept)["redundancy_unprotected_errors"] is Outcome.FAIL


# --- claims 11, 12: the bench's Merkle verify and clock -------------------------------------------
def test_page_error_rate_reads_enough_pages_to_beat_the_old_rate(sla):
    device, runtime = phone()
    result = weights.read_errors_check(device, runtime, read_errors=sla.get("weight_page_read_errors"),
                                       error_rate=target(sla, "weights_page_error_rate"))
    rate = result.verdict("weights_page_error_rate")
    assert rate.outcome is Outcome.PASS and rate.bound < weights.OLD_PAGE_ERROR_RATE
    assert rate.n >= target(sla, "weights_page_error_rate").n_required == 9985
    assert result.raw["weights_read_errors"]["passes"] == 2


def test_without_the_benchs_merkle_verify_a_clean_crc_is_inconclusive(sla):
    device, runtime = phone("nominal", "verity-tree-corrupt")
    result = weights.read_errors_check(device, runtime, read_errors=sla.get("weight_page_read_errors"),
                                       error_rate=target(sla, "weights_page_error_rate"))
    assert set(outcomes(result).values()) == {Outcome.INCONCLUSIVE}
    assert "Merkle verify could not run" in result.verdicts[0].explanation


def test_a_spot_check_time_that_omits_the_read_fails_on_the_benchs_clock(sla):
    entry = sla.get("merkle_spot_check_time")
    device, runtime = phone("spot-time-omits-read")
    result = weights.spot_check_time_check(device, runtime, spot_check_time=entry, n=40, now=phone_clock(runtime),
                                           now_evidence=Evidence.CORROBORATED)
    verdict = result.verdicts[0]
    assert verdict.outcome is Outcome.FAIL and verdict.value > 100.0
    assert max(result.raw["weights_spot_checks"]["device_read_ms"]) < 1.0  # what it claimed: kept as raw data
    device, runtime = phone()
    honest = weights.spot_check_time_check(device, runtime, spot_check_time=entry, now=phone_clock(runtime),
                                           now_evidence=Evidence.CORROBORATED).verdicts[0]
    assert honest.outcome is Outcome.PASS and honest.evidence is Evidence.CORROBORATED


def test_the_runtimes_read_time_is_only_a_report(sla):
    """With a clock that does not run with the phone (the host's, on simulated phones) the runtime's
    slow-flash report exceeds what the bench measured: the check refuses to pass."""
    device, runtime = phone("nominal", "slow-flash")
    verdict = weights.spot_check_time_check(device, runtime, spot_check_time=sla.get("merkle_spot_check_time"), n=20).verdicts[0]
    assert verdict.outcome is Outcome.INVALID and "longer than the bench measured" in verdict.explanation


# --- claim 13: sample size from the fault rate to detect ------------------------------------------
def test_audit_sample_size_catches_a_one_in_seven_loss_with_99_percent():
    n = audit.inferences_to_detect(1 / 7, 0.99)
    assert n == 30
    assert audit.detection_probability(1 / 7, n) >= 0.99 > audit.detection_probability(1 / 7, n - 1)
    assert audit.detection_probability(1 / 7, 6) == pytest.approx(1 - (6 / 7) ** 6)  # the old 6: 60 %
    assert math.isclose(audit.detection_probability(1 / 7, n), 1 - (6 / 7) ** 30)


def test_the_audit_drop_persona_fails_in_the_default_configuration():
    device, runtime = phone("audit-drop")
    result = audit.audit_check(device, runtime, **targets(None, **audit.ENTRIES))
    missing = result.verdict("audit_records_missing")
    assert missing.outcome is Outcome.FAIL and missing.evidence is Evidence.MEASURED
    assert missing.n == 30 and missing.extra["detection_probability"] >= 0.99
    assert {v.name for v in result.verdicts if not v.passed} == {"audit_records_missing"}


# --- the plugin: a verdict resting on the phone's word alone is never a PASS, whatever the test ----
class _Item:
    """What Record needs of a pytest item: its stash and its evidence marker."""

    def __init__(self, evidence: str | None) -> None:
        self.stash = pytest.Stash()
        self.evidence = evidence

    def get_closest_marker(self, name: str) -> Any:
        return pytest.mark.evidence(self.evidence).mark if name == "evidence" and self.evidence else None


def test_record_turns_a_reported_pass_into_info_centrally():
    """The identity suite's checks rest on @pytest.mark.evidence("self-reported") via record.check:
    shown and kept as INFO, a FAIL (the phone contradicting itself) stays a FAIL."""
    from phonebench.fixtures.verdicts import Record

    record = Record(_Item("self-reported"), bench=None)  # type: ignore[arg-type]
    shown = record.check("identity_fields_missing", 0, "fields", 0, "==")
    failed = record.check("thermal_zone_vs_hal_max_diff", 6.0, "degC", 2.0, "<=")
    assert shown.outcome is Outcome.INFO and shown.evidence is Evidence.REPORTED and "reported" in shown.explanation
    assert failed.outcome is Outcome.FAIL
    measured = Record(_Item("measured"), bench=None).check("x", 1.0, "s", 2.0, "<=")  # type: ignore[arg-type]
    assert measured.outcome is Outcome.PASS


@pytest.fixture
def shield_probes() -> Iterator[Any]:
    with emulated_shield_probes() as attach:
        yield attach


def _field_errors(result: Any) -> list[str]:
    return result.raw["audit_log"]["findings"]["audit_field_errors"]


def test_a_clean_second_log_passed_the_fixed_lengths_and_fails_each_matching(shield_probes, monkeypatch):
    """'second-log' hands over a log signed, chained and timed like the live inferences, with a
    compliance run's counts (24 in, 8 out) and temperatures (31-32 degC). With the old fixed 24/8
    canaries and no shield it passed every verdict; the bench's own drawn lengths catch it alone,
    and the shield alone catches its temperatures once the die has warmed past them."""
    monkeypatch.setattr(audit, "PROMPT_TOKENS_RANGE", (24, 24))
    monkeypatch.setattr(audit, "GENERATED_TOKENS_RANGE", (8, 8))
    device, runtime = phone("second-log")
    old = audit.audit_check(device, runtime, **targets(None, **audit.ENTRIES), seed=5)
    assert all(v.outcome is Outcome.PASS for v in old.verdicts), _field_errors(old)

    device, runtime = phone("second-log")
    by_shield = audit.audit_check(device, runtime, **targets(None, **audit.ENTRIES), seed=5,
                                  shield=shield_probes(device))
    assert by_shield.verdict("audit_field_errors").outcome is Outcome.FAIL
    assert all("npu_temp_c" in e and "below the die the shield implies" in e for e in _field_errors(by_shield))

    monkeypatch.undo()
    device, runtime = phone("second-log")
    by_lengths = audit.audit_check(device, runtime, **targets(None, **audit.ENTRIES))
    assert by_lengths.verdict("audit_field_errors").outcome is Outcome.FAIL
    assert any("(the bench's prompt)" in e for e in _field_errors(by_lengths))
    assert int(by_lengths.raw["audit_log"]["entropy"]) > 0  # drawn, and recorded to replay the draw


def test_an_honest_log_matches_every_inference_on_the_station_clock_and_the_shield(shield_probes):
    device, runtime = phone("nominal")
    runtime = RuntimeClient(device, clock=WorldClock(device))
    result = audit.audit_check(device, runtime, **targets(None, **audit.ENTRIES), shield=shield_probes(device))
    assert all(v.outcome is Outcome.PASS for v in result.verdicts), _field_errors(result)
    matching = result.raw["audit_log"]["matching"]
    assert matching["model_version"].startswith("phonebench-tiny-int4 ")
    assert len(matching["die_floors_c"]) == 30 and len(matching["shield"]) == 11  # before, then every 3rd


def test_a_record_off_the_station_clock_or_of_another_model_is_a_field_error():
    gen = Generation(tokens=[1, 2], token_times=[10.1, 10.2], start_time=10.0, done_time=10.2, prompt_tokens=3,
                     arrivals=Arrivals(sent_t=109.9, start_t=110.0, token_times=[110.1, 110.2], done_t=110.25))
    match = audit.Matching("m abcdef012345", offset_s=100.05, offset_spread_s=0.01)
    record = {"seq": 1, "t": 10.2, "input_tokens": 3, "output_tokens": 2, "model_version": "m abcdef012345",
              "npu_freq_mhz": 1100.0, "npu_temp_c": 40.0, "sig": ""}
    assert audit._field_errors(record, gen, 3, match, 35.0) == []
    late = audit._field_errors({**record, "t": 10.9}, gen, 3, match, 35.0)  # written after the answer was out
    assert len(late) == 1 and "on the station clock" in late[0]
    other = audit._field_errors({**record, "model_version": "m 000000000000"}, gen, 3, match, 35.0)
    assert len(other) == 1 and "is not the model run" in other[0]
    cold = audit._field_errors(record, gen, 3, match, 41.0)
    assert len(cold) == 1 and "below the die the shield implies" in cold[0]
