"""A lab whose bays are powered by Otii Arcs runs the default suites' power tests the lab's way:
a station file, `bench run`, Qoitech's client driving (emulated) Otii servers. Every power verdict
is measured on the Otii and names it; the ripple test is skipped with its reason; the same phone
behind an N6705C gives the same sustained power within the two verdicts' stated uncertainties."""
from __future__ import annotations

import math

import pytest
from test_bench_run import REPO, bench

pytestmark = pytest.mark.slow

POWER_TESTS = ("sustained_and_peak_power or supply_is_wired or power_trace or gpu_load or redundancy_ripple "
               "or sustained_use or dialog_on_both_scope_channels")
SUITES = [str(REPO / "suites" / name) for name in ("test_sla_instruments.py", "test_sla_runtime.py",
                                                   "test_instruments.py")]
POWER_VERDICTS = {"power_sustained_mean", "energy_per_dialog", "supply_follows_this_phone_ms",
                  "token_timing_power_consistency", "token_latency_p95_gpu_load"}
PHONE = '[[emulated.phone]]\nserial = "EMU-OT1"\n'


def _run(tmp_path, supply_family: str) -> dict:
    folder = tmp_path / supply_family
    folder.mkdir()
    station = folder / "station.toml"
    station.write_text(f'[emulated]\nseed = 1\nsupply = "{supply_family}"\n{PHONE}')  # a fixed night
    proc, data = bench(folder, "run", "--station", str(station), *SUITES, "-k", POWER_TESTS, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert data["status"] == "complete"
    return data


def _verdicts(data: dict) -> dict[str, dict]:
    return {v["name"]: v for t in data["tests"] for v in t["verdicts"]}


def test_the_power_tests_pass_on_an_otii_bay_and_agree_with_an_n6705c_bay(tmp_path):
    station = tmp_path / "check.toml"
    station.write_text(f'[emulated]\nsupply = "qoitech-otii"\n{PHONE}')
    check, _ = bench(tmp_path, "station", "check", "--station", str(station), timeout=300)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "Qoitech Otii Arc" in check.stdout

    otii = _run(tmp_path, "qoitech-otii")
    outcomes = {t["nodeid"].split("::")[1].split("[")[0]: t["outcome"] for t in otii["tests"]}
    assert outcomes.pop("test_redundancy_ripple_sweep") == "skipped"
    skipped = next(t for t in otii["tests"] if "ripple_sweep" in t["nodeid"])
    assert "no ripple source" in skipped["message"] and "keysight-n6705c" in skipped["message"]
    assert set(outcomes.values()) == {"passed"}, outcomes
    verdicts = _verdicts(otii)
    assert POWER_VERDICTS <= set(verdicts), sorted(verdicts)
    for name in POWER_VERDICTS:
        assert verdicts[name]["evidence"] == "measured" and verdicts[name]["outcome"] == "pass", verdicts[name]
    budget = " ".join(c["note"] for c in verdicts["power_sustained_mean"]["uncertainty"]["components"])
    assert "Otii Arc" in budget and "N6781A" not in budget
    supply = next(i for i in otii["instruments"].values() if i["identity"]["role"] == "supply")
    assert supply["family"] == "qoitech-otii" and supply["identity"]["model"] == "Otii Arc"

    on_otii = verdicts["power_sustained_mean"]
    on_n6705c = _verdicts(_run(tmp_path, "keysight-n6705c"))["power_sustained_mean"]
    stated = math.hypot(on_otii["uncertainty"]["expanded"], on_n6705c["uncertainty"]["expanded"])
    assert abs(on_otii["value"] - on_n6705c["value"]) <= stated, (on_otii["value"], on_n6705c["value"], stated)
