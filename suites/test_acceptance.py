"""Production-line acceptance of one unit (bench accept): the scanned serial, DUT calibration,
a weight-store spot check, redundancy at one ripple amplitude, short latency and power sanity.

The order is the takt plan's (docs/production.md, "Takt"): the quick checks that catch the
commonest faults first, the long sequential measurements last.

Identity, fingerprint and the adapter's bit-exactness come from test_identity.py and
test_numerics.py (their `acceptance` tests run in the same acceptance run). Limits, statistics
and sample counts come from the acceptance profile (sla_profiles/acceptance.toml, or
--acceptance-profile), whose statistics are valid at these small counts.
"""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from phonebench.bench.procedures.calibration.procedures import ambient_conditions
from phonebench.bench.procedures.calibration.records import record_verdict
from phonebench.bench.procedures.calibration.runner import calibrate_dut
from phonebench.bench.procedures.acceptance.steps import (LINE_SWEEPS, acceptance_voice_setup, answer_end_by_power,
                                                          sequential_voice_trials)
from phonebench.bench.checks.power import battery_emulation, sequential_power_check
from phonebench.bench.checks.redundancy import bit_exact_check, require_ripple
from phonebench.core.errors import UnsupportedCapability
from phonebench.bench.checks.weights import verify_page, load_manifest
from phonebench.bench.specs.sla import SlaProfile, load_profile
from phonebench.core import judge
from phonebench.core.verdict import Verdict
from phonebench.bench.stats.sequential import SequentialPlan

pytestmark = [pytest.mark.acceptance, pytest.mark.line, pytest.mark.evidence("measured")]


@pytest.fixture(scope="module")
def profile(request: pytest.FixtureRequest) -> SlaProfile:
    return load_profile(request.config.getoption("--acceptance-profile"))


@pytest.mark.acceptance(check="serial")
@pytest.mark.evidence("self-reported")  # the phone's own ro.serialno against the scan
def test_unit_serial_matches_scan(dut_identity, scanned_serial, profile, record):
    """The unit on the fixture is the unit the operator scanned."""
    if scanned_serial is None:
        pytest.skip("no scanned serial (--scanned-serial): not a production acceptance run")
    record.judge(profile, "unit_serial_matches_scan", int(dut_identity.serial == scanned_serial),
                 detail=f"phone reports {dut_identity.serial!r}, operator scanned {scanned_serial!r}")


@pytest.mark.needs("supply", "thermal")
@pytest.mark.acceptance(check="dut-calibration")
def test_dut_calibration(dut, dut_identity, supply, thermal, scanned_serial, calibration_book, calibration_context,
                         record):
    """Ripple onset with redundancy off -> redundancy trigger with margin; skin sensor vs the
    probes -> skin offset; both written to the phone and stored. A unit outside the criteria
    fails here (its record is stored as failed, nothing is written)."""
    if scanned_serial is None:
        pytest.skip("DUT calibration writes to the unit: production acceptance only "
                    "(`bench accept`; in a lab, `bench calibrate --procedure dut --dut NAME`)")
    _require_ripple(supply)  # the redundancy trigger is calibrated from the ripple onset
    ctx = calibration_context
    ctx.ambient = ambient_conditions(thermal, ctx.settings)
    outcome = calibrate_dut(dut, dut_identity, {"supply": supply, "thermal": thermal}, calibration_book, ctx)
    record.raw("dut-calibration", [r.to_dict() for r in outcome.records])
    for calibration in outcome.records:
        record(record_verdict(calibration))


@pytest.mark.acceptance(check="weights")
def test_weight_store_spot_check(dut, dut_identity, runtime, profile, record):
    """The update's manifest is signed by a trusted key; the device's CRC check of every page is
    clean; a few pages (chosen per unit, so a line covers the file) and any page the CRC flags
    verify up to the manifest's Merkle root."""
    entry = profile.get("acceptance_weight_page_errors")
    manifest = load_manifest(dut, runtime)
    crc_bad = set(runtime.weights_verify().bad_pages)
    rng = np.random.default_rng(zlib.crc32(dut_identity.serial.encode()))
    count = min(int(entry.parameters.get("pages", 8)), manifest.pages)
    pages = sorted(crc_bad | {int(p) for p in rng.choice(manifest.pages, size=count, replace=False)})
    spot_bad = {page for page in pages if not verify_page(runtime, manifest, page)[0].ok}
    bad = sorted(crc_bad | spot_bad)
    path = record.raw("weights", {"spot_checked": pages, "crc_bad": sorted(crc_bad), "spot_bad": sorted(spot_bad),
                                  "root": manifest.root.hex(), "signed_by": manifest.key_id,
                                  "signing_key": manifest.key_note})
    note = f" ({manifest.key_note})" if manifest.dev_key else ""
    record.judge(profile, "acceptance_weight_manifest_signed", int(manifest.problem is None),
                 detail=manifest.problem or f"manifest signed by {manifest.key_id}{note}", raw=[path])
    record.judge(profile, entry.metric, len(bad), n=len(pages), raw=[path],
                 detail=(f"device CRC: {len(crc_bad)} of {manifest.pages} pages bad; Merkle spot checks: "
                         f"{len(spot_bad)} of {len(pages)} failed" + (f" (pages {bad[:10]})" if bad else "")))


@pytest.mark.needs("supply")
@pytest.mark.acceptance(check="redundancy")
def test_redundancy_at_one_ripple_amplitude(dut, supply, profile, record):
    """Ripple above the unit's calibrated trigger: redundancy engages and every token is bit-exact
    with the unit's clean-supply tokens; forced off, the same ripple corrupts tokens."""
    _require_ripple(supply)
    entry = profile.get("acceptance_redundancy_mismatches")
    amplitude = float(entry.parameters.get("ripple_mv", 50))
    result = bit_exact_check(supply, dut, token_mismatches=entry,
                             off_token_mismatches=profile.get("acceptance_redundancy_off_mismatches"),
                             amplitude_mv=amplitude, runs=int(entry.parameters.get("runs", 1)),
                             tokens=int(entry.parameters.get("tokens", 48)))
    engaged = bool(result.raw["bit_exact"]["engaged"])
    record.judge(profile, "acceptance_redundancy_engaged", int(engaged),
                 detail=f"redundancy {'engaged' if engaged else 'did NOT engage'} at ±{amplitude:g} mV ripple "
                        "(auto mode, the unit's calibrated trigger)")
    result.verdicts = [_no_plot(v) for v in result.verdicts]  # before recording: a recorded verdict is final
    result.record_into(record)


@pytest.mark.needs("scope", "stimulus")
@pytest.mark.acceptance(check="latency")
def test_voice_latency_sanity(request, station, dut, scope, stimulus, calibration, profile, record):
    """Voice trials, the fixture's calibrated delay subtracted, each within the limit; taken one
    at a time until the sequential rule decides (phonebench.bench.stats.sequential.tolerance_rule): FAIL at the
    first late answer, PASS early once a tolerance bound is within the limit, else the census of
    every planned trial decides. With the supply on the phone a trial records only the answer's
    onset (`onset_record_s`) and the supply shows when the answer is over; else the record holds
    a good unit's whole dialog (`record_s`)."""
    entry = profile.get("acceptance_voice_latency_max")
    delay = calibration.fixture_delay_s
    plan = SequentialPlan(tuple(int(n) for n in entry.parameters.get("looks", [entry.min_samples])),
                          float(entry.parameters.get("confidence", 0.95)))
    whole_s = float(entry.parameters.get("record_s", 4.5))
    paced = "supply" in station.instruments and station.instrument_dut("supply") == dut.name
    answer_end = answer_end_by_power(request.getfixturevalue("supply"), dut, max_s=whole_s) if paced else None
    record_s = float(entry.parameters.get("onset_record_s", whole_s)) if paced else whole_s
    run = sequential_voice_trials(scope, stimulus, dut, entry.limit, plan, p=float(entry.parameters.get("p", 0.99)),
                                  fixture_delay_s=delay or 0.0, fixture_calibrated=delay is not None,
                                  setup=acceptance_voice_setup(record_s), answer_end=answer_end)
    trials = run.trials
    latency_ms = 1e3 * trials.latency_s
    valid = latency_ms[~np.isnan(latency_ms)]  # invalid trials (no stimulus seen) are left out, and counted
    unanswered = sum(s == "no-answer" for s in trials.status)
    notes = (f"sequential: {run.decision.detail}; {len(trials)} trials, {trials.invalid} invalid, "
             f"{unanswered} unanswered; "
             + (f"fixture delay {1e6 * delay:.1f} us subtracted" if delay is not None
                else "no fixture calibration: acoustic delay not subtracted"))
    raw = record.raw("voice", {"samples": latency_ms, **trials.raw()})
    verdict = entry.evaluate(valid, raw=raw, detail_suffix=notes, extra={"fixture_delay_s": delay})
    record(_no_plot(judge.sequential(verdict, run.decision.decision)))


@pytest.mark.needs("supply")
@pytest.mark.acceptance(check="power")
def test_power_sanity(dut, supply, profile, record):
    """Sustained power over generate runs digitized at >= 5 kS/s, run after run until the
    sequential t rule (phonebench.bench.stats.sequential.mean_rule) decides, the runs sized for takt."""
    battery_emulation(supply)
    result = sequential_power_check(supply, dut, sustained_power=profile.get("acceptance_power_mean"),
                                    sizing=LINE_SWEEPS)
    result.verdicts = [_no_plot(verdict) for verdict in result.verdicts]
    result.record_into(record)


def _no_plot(verdict: Verdict) -> Verdict:
    """Acceptance verdicts are not plotted: a plot per unit costs the line a second of takt; the
    raw data is kept, and `bench report` can draw it later."""
    return verdict.but(plot=None)


def _require_ripple(supply) -> None:
    try:
        require_ripple(supply)
    except UnsupportedCapability as exc:
        pytest.skip(str(exc))
