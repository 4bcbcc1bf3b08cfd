"""Fingerprinting every persona: verdicts, measured signatures, call budget, stubs, and the
bench-side reference model against the emulated NPU."""
from __future__ import annotations

import json
import subprocess
import sys
from typing import Any
from pathlib import Path

import numpy as np
import pytest

from phonebench.core.errors import UnsupportedCapability
from phonebench.bench.phone.fingerprint import (INCONSISTENT, KNOWN, MISMATCH, UNKNOWN, fingerprint, fingerprint_verdict, fit,
                               predict, probe_plan)
from phonebench.bench.specs.profiles import Signature, load_library
from phonebench.core.verdict import Outcome
from device_double import WorldClock, make_device
from phonebench.drivers.runtime import ProbeResult, RuntimeClient
from phonebench.emulation.npu import Accumulator, dot_runs
from phonebench.emulation.npu_personas import PERSONAS
from phonebench.emulation.runtime import parse_vector
from phonebench.core import signing

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CALL_BUDGET = 20
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True, scope="module")
def development_station():
    """These tests stand for a development station: it opts in to the shipped development key."""
    with signing.trusting(None, development=True):
        yield


@pytest.fixture(scope="module")
def library():
    return load_library()


def _expected_verdict(name: str) -> str:
    return {"SM8650-MP2": UNKNOWN, "MT6989-ES-RELABEL": MISMATCH, "SM8650-ES-RELABEL": MISMATCH}.get(name, KNOWN)


def _clocked(name: str, **kwargs: Any) -> tuple[Any, RuntimeClient]:
    """A phone and a runtime client timed on its world's clock (the station clock)."""
    device = make_device(name, **kwargs)
    return device, RuntimeClient(device, clock=WorldClock(device))


@pytest.mark.parametrize("name", sorted(PERSONAS))
def test_every_persona(library, name):
    persona = PERSONAS[name]
    device, client = _clocked(name)
    report = fingerprint(device, library, client)
    acc = persona.accumulator
    assert report.measured == Signature(acc.bits, acc.rule.value)
    assert report.verdict == _expected_verdict(name), report.detail
    assert report.soc_model == persona.soc.model and report.microcode == persona.microcode
    assert report.runtime_calls <= CALL_BUDGET and report.device_calls <= CALL_BUDGET
    assert len(report.probes) == len(probe_plan())
    if report.verdict == KNOWN:
        assert report.trusted and report.adapter == report.profile.adapter
    else:
        assert not report.trusted and report.adapter is None


def test_unknown_build_gets_a_reviewable_stub(library):
    report = fingerprint(make_device("SM8650-MP2"), library)
    stub = tomllib.loads(report.stub)["build"][0]
    assert stub["microcode"] == PERSONAS["SM8650-MP2"].microcode
    assert (stub["accumulator_bits"], stub["overflow"]) == (17, "saturate-each-step")
    assert library.adapters[stub["adapter"]].protects(17)
    verdict = fingerprint_verdict(report)
    assert verdict.outcome is Outcome.INFO and "unknown" in verdict.explanation


def test_mismatch_is_flagged_and_never_trusted(library):
    report = fingerprint(make_device("MT6989-ES-RELABEL"), library)
    assert report.expected == Signature(16, "clamp-at-end") and report.measured == Signature(16, "wrap")
    assert "claims" in report.detail and "MDLA5.0 fw 4.2.0-ES1" in report.detail  # behaves like the ES build
    assert fingerprint_verdict(report).outcome is Outcome.FAIL


def test_a_relabelled_soc_is_told_by_its_speed_and_by_the_inventory(library):
    """An MT6989 die saying it is an SM8650 with the SM8650's engineering-sample microcode: the
    same 16-bit wrap, so the overflow rule alone takes it for the claimed part."""
    device, client = _clocked("SM8650-ES-RELABEL")
    timed = fingerprint(device, library, client)
    assert timed.verdict == MISMATCH and not timed.trusted and timed.adapter is None
    # The die's throughput is this unit's: the MT6989's 88 GMAC/s times its own speed bin.
    die = device.phone.world.variation.npu_gmac_per_s
    assert abs(die / 88.0 - 1.0) < 0.031  # within the MT6989's truncated spread
    assert timed.gmac_per_s == pytest.approx(die, rel=0.01) and timed.behaves_like == ["MT6989"]
    assert f"{timed.gmac_per_s:.0f} GMAC/s (an SM8650 does 70.4)" in timed.detail
    verdict = fingerprint_verdict(timed)
    assert verdict.outcome is Outcome.FAIL and verdict.extra["identity"]["behaves_like"] == ["MT6989"]
    untimed = fingerprint(device, library)  # no station clock: only the overflow rule, which matches
    assert untimed.verdict == KNOWN and "no station clock" in untimed.timing_note
    declared = fingerprint(device, library, declared_soc="MT6989")  # the lab's inventory
    assert declared.verdict == MISMATCH and "inventory says MT6989, the phone says SM8650" in declared.detail
    honest_device, honest_client = _clocked("SM8650-ES")
    honest = fingerprint(honest_device, library, honest_client, declared_soc="SM8650")
    assert honest.verdict == KNOWN
    assert honest.gmac_per_s == pytest.approx(honest_device.phone.world.variation.npu_gmac_per_s, rel=0.01)


def test_erratic_npu_is_inconsistent_and_raw_results_are_kept(library):
    report = fingerprint(make_device("SM8650-MP", faults=["npu-erratic"]), library)
    assert report.verdict == INCONSISTENT and report.measured is None
    assert len(report.probes) == len(probe_plan()) and all("result" in p for p in report.probes)
    assert fingerprint_verdict(report).outcome is Outcome.FAIL


def test_known_verdict_passes(library):
    assert fingerprint_verdict(fingerprint(make_device("SM8650-MP"), library)).outcome is Outcome.PASS


def _device_results(acc: Accumulator | None) -> list[ProbeResult]:
    """What the emulated NPU returns for the plan (device side), without a phone."""
    return [ProbeResult(p.probe.id, 0, dot_runs(parse_vector(p.probe.a), parse_vector(p.probe.b), acc))
            for p in probe_plan()]


@pytest.mark.parametrize("bits", [12, 13, 16, 20, 23, 28, 32])
def test_the_plan_identifies_width_and_rule_uniquely(bits):
    plan = probe_plan()
    for rule in ("wrap", "saturate-each-step", "clamp-at-end"):
        observed = _device_results(Accumulator(bits, rule))
        assert [predict(p, Signature(bits, rule)) for p in plan] == [r.result for r in observed]
        assert fit(plan, observed) == [Signature(bits, rule)]


def test_an_accumulator_wider_than_32_bits_reads_as_wide():
    assert fit(probe_plan(), _device_results(Accumulator(40, "wrap"))) == [Signature(None, "none")]
    assert fit(probe_plan(), _device_results(None)) == [Signature(None, "none")]


def test_results_from_no_overflow_model_fit_nothing():
    """A register that saturates at 30000 (not a power of two) matches no model."""
    plan = probe_plan()
    observed = [ProbeResult(p.probe.id, 0, int(np.clip(p.exact, -30001, 30000))) for p in plan]
    assert fit(plan, observed) == []


def test_a_runtime_without_probe_is_unsupported(library, monkeypatch):
    monkeypatch.setattr("phonebench.emulation.runtime.CAPABILITIES", ["identity", "status", "generate"])
    with pytest.raises(UnsupportedCapability, match="no `probe` capability"):
        fingerprint(make_device("SM8650-MP"), library)


def test_bench_fingerprint_command_on_an_emulated_station(tmp_path):
    """`bench fingerprint` over real ADB: one row per phone, stub for the unknown build, exit 1
    because a mismatch is flagged, the known build's adapter applied with --apply."""
    station = tmp_path / "station.toml"
    station.write_text("[emulated]\ninstruments = false\nauth = \"none\"\n" + "".join(
        f'[[emulated.phone]]\nserial = "{serial}"\nnpu_persona = "{persona}"\n'
        for serial, persona in (("P1", "SM8650-ES"), ("P2", "SM8650-MP2"), ("P3", "MT6989-ES-RELABEL"))) +
        '[[emulated.phone]]\nserial = "P4"\nnpu_persona = "SM8650-ES-RELABEL"\nexpected_soc = "MT6989"\n')
    report_dir = tmp_path / "report"
    proc = subprocess.run([sys.executable, "-m", "phonebench.bench.cli", "fingerprint", "--station", str(station), "--apply",
                           "--report-dir", str(report_dir)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = {line.split()[0]: line for line in proc.stdout.splitlines() if line.startswith("P")}
    assert "16-bit wrap" in rows["P1"] and "KNOWN" in rows["P1"] and "tile-k-256" in rows["P1"]
    assert "UNKNOWN" in rows["P2"] and "MISMATCH" in rows["P3"] and "MISMATCH" in rows["P4"]
    data = json.loads((report_dir / "fingerprint.json").read_text())
    assert [d["verdict"] for d in data] == ["known", "unknown", "mismatch", "mismatch"]
    assert "inventory says MT6989" in data[3]["detail"]  # the relabelled unit: declared vs reported
    assert "adapter activated" in data[0]["detail"]
    stub = tomllib.loads((report_dir / "profile-stubs" / "SM8650-P2.toml").read_text())
    assert stub["build"][0]["accumulator_bits"] == 17
