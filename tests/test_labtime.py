"""Lab time as data: the records carry it, the store keeps it, `bench plan` predicts from it."""
from __future__ import annotations

import pytest

from phonebench.bench.results import labtime
from phonebench.core.records import RunRecord, TestRecord
from phonebench.core.verdict import Outcome, Verdict
from phonebench.bench.store import open_store


def _verdict(name: str, claim: int, n: int) -> Verdict:
    return Verdict(name=name, value=1.0, unit="ms", outcome=Outcome.PASS, n=n, n_required=n, claim=claim)


def _run(lab: dict[str, float], run_id: str = "r1", status: str = "complete") -> RunRecord:
    run = RunRecord(run_id=run_id, started="2026-12-01T20:00:00+00:00", station={"name": "s"}, status=status,
                    duts={"EMU1": {"serial": "EMU1", "soc_manufacturer": "Q", "soc_model": "SM8650"}})
    for test, seconds in lab.items():
        run.tests.append(TestRecord(nodeid=f"suites/t.py::{test}[EMU1]", dut="EMU1", outcome="passed",
                                    duration_s=1.0, lab_time_s=seconds,
                                    verdicts=[_verdict(test, 1 if "voice" in test else 4, 300)]))
    return run


def test_test_and_run_records_carry_lab_time_through_results_json():
    run = _run({"test_voice": 600.0, "test_std": 120.5})
    data = run.to_dict()
    assert data["tests"][0]["lab_time_s"] == 600.0
    assert data["lab_time_s"] == {"EMU1": 720.5}
    back = RunRecord.from_dict(data)
    assert back.tests[1].lab_time_s == 120.5
    assert TestRecord.from_dict({"nodeid": "x", "dut": None, "outcome": "passed", "duration_s": 1}).lab_time_s is None


def test_lab_time_per_test_and_claim():
    data = _run({"test_voice": 600.0, "test_std": 120.0}).to_dict()
    assert labtime.per_test(data) == {"suites/t.py::test_voice": 600.0, "suites/t.py::test_std": 120.0}
    assert labtime.per_claim(data) == {1: 600.0, 4: 120.0}


@pytest.mark.parametrize("nodeid, phone, key", [
    ("suites/a.py::test_x[EMU1]", "EMU1", "suites/a.py::test_x"),
    ("suites/a.py::test_x[scope-EMU1]", "EMU1", "suites/a.py::test_x[scope]"),
    ("suites/a.py::test_x[scope]", None, "suites/a.py::test_x[scope]"),
])
def test_test_key_drops_only_the_phone(nodeid, phone, key):
    assert labtime.test_key(nodeid, phone) == key


def test_a_shared_study_counts_in_full_per_claim_and_splits_in_the_share():
    run = _run({"test_voice": 600.0, "test_std": 120.0}).to_dict()
    run["tests"][0]["verdicts"].append(_verdict("cover", 7, 60).to_dict())  # the voice study feeds claim 7 too
    assert labtime.per_claim(run, "EMU1") == {1: 600.0, 4: 120.0, 7: 600.0}
    assert labtime.per_claim_share(run, "EMU1") == {1: 300.0, 4: 120.0, 7: 300.0}


def test_makespan_longest_first_over_bays():
    assert labtime.makespan([60.0] * 10, 10) == 60.0
    assert labtime.makespan([60.0] * 11, 10) == 120.0
    assert labtime.makespan([50.0, 40.0, 30.0, 30.0], 2) == 80.0


def test_plan_scales_the_stored_rate_to_the_profile_sample_size():
    rates = {"k": labtime.TestRate("k", 600.0, 3, "voice_latency_p99", 300)}
    plan = labtime.plan_phone("EMU1", "SM8650", ["k", "suites/test_sla_runtime.py::test_first_token", "other"],
                              rates, {"voice_latency_p99": 150})
    assert [t.lab_time_s for t in plan.tests] == [300.0, labtime.DEFAULT_LAB_TIME_S[
        "suites/test_sla_runtime.py::test_first_token"], labtime.DEFAULT_OTHER_TEST_S]
    assert "scaled 300 -> 150" in plan.tests[0].source and plan.tests[1].source == "default"


def test_store_keeps_lab_time_and_reads_it_back_as_rates_for_the_model(tmp_path):
    with open_store(tmp_path / "r.sqlite") as store:
        store.sync_run(_run({"test_voice": 600.0, "test_std": 120.0}, "r1").to_dict())
        store.sync_run(_run({"test_voice": 640.0, "test_std": 120.0}, "r2").to_dict())
        store.sync_run(_run({"test_voice": 9999.0}, "r3", status="incomplete").to_dict())  # not a rate
        assert store.load_run("r1").data["lab_time_s"] == {"EMU1": 720.0}
        assert store.load_run("r1").data["tests"][0]["lab_time_s"] == 600.0
        model, facts = store.lab_time_facts("EMU1")
    rates = labtime.rates_from_facts(facts)
    assert model == "Q SM8650"
    assert rates["suites/t.py::test_voice"].lab_time_s == pytest.approx(620.0)
    assert rates["suites/t.py::test_voice"].runs == 2
    assert (rates["suites/t.py::test_voice"].metric, rates["suites/t.py::test_voice"].n) == ("test_voice", 300)


def test_plan_for_a_phone_the_store_has_never_seen_uses_the_defaults(tmp_path):
    from phonebench.bench.cli.plan import build_plan, plan_lines
    from phonebench.bench.station.request import Selection, StationRef, build_request

    request = build_request(StationRef(), Selection(suites=("suites/test_sla_runtime.py",), duts=("EMU0001",),
                                                    keyword="first_token"),
                            results_dir=str(tmp_path), store=str(tmp_path / "empty.sqlite"))
    plan = build_plan(request)
    assert [p["dut"] for p in plan["phones"]] == ["EMU0001"]
    (test,) = plan["phones"][0]["tests"]
    assert test["source"] == "default"
    assert plan["makespan_s"] == test["lab_time_s"]
    assert "makespan" in plan_lines(plan)[-1]
    assert not (tmp_path / "empty.sqlite").exists()  # planning never creates a store


def test_summary_shows_lab_time_per_test_phone_and_claim():
    from phonebench.bench.results.summary import summary_lines

    data = _run({"test_voice": 600.0, "test_std": 120.0}).to_dict()
    lines = summary_lines(data, verbose=True)  # passing tests are listed with -v
    assert any(line.endswith("test_voice[EMU1]  (10.0 lab min)") for line in lines)
    assert "  lab time EMU1: 12.0 min (per claim, min: 1: 10.0, 4: 2.0)" in lines


@pytest.mark.slow  # a whole `bench run --plan` process
def test_bench_run_plan_prints_the_plan_and_opens_nothing(tmp_path):
    """`bench run --plan` is `bench plan` for the run's own selection: collection only, no run folder."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(repo)}
    env.pop("PHONEBENCH_STATION", None)
    env.pop("PHONEBENCH_DATABASE", None)
    done = subprocess.run([sys.executable, "-m", "phonebench.bench.cli", "run", "--plan", "--dut", "EMU0001", "-k", "first_token",
                           "--results-dir", str(tmp_path / "reports"), str(repo / "suites" / "test_sla_runtime.py")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "EMU0001" in done.stdout and done.stdout.strip().splitlines()[-1].startswith("makespan:")
    assert not (tmp_path / "reports").exists()  # nothing ran, nothing was written
