"""The claims table is data (bench/specs/claims.toml) that docs/claims.md and the SLA profiles agree
with; the report and the summary open with a claims x phones grid that a person reads without
`None`, with one spelling per unit, tolerances shown, and plots of what was judged."""
from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import numpy as np

from phonebench.bench.specs.claims import NOT_MEASURED, claim_of, claims_grid, claims_markdown, load_claims
from phonebench.core.records import TestRecord
from phonebench.bench.stats.verdicts import value_verdict
from phonebench.core.verdict import PlotHint, Verdict
from phonebench.core.judge import compare
from phonebench.bench.report import render_run
from phonebench.bench.report.claim_plot import claim_plot
from tests.report_example import ExampleDut, ExampleRun, write_example_run
from phonebench.bench.report.plots import plot_samples
from phonebench.bench.results.run_record import RunRecorder
from phonebench.bench.results.summary import summary_lines

ROOT = Path(__file__).resolve().parent.parent
_BARE = {"value": None, "unit": "", "outcome": "info"}  # a verdict with nothing measured


def test_docs_claims_table_is_generated_from_the_data():
    doc = (ROOT / "docs" / "claims.md").read_text(encoding="utf-8")
    assert claims_markdown() in doc, "regenerate the table: python -m phonebench.bench.specs.claims"
    assert [c.number for c in load_claims()] == list(range(1, 15))


def test_every_profile_metric_is_listed_under_its_claim():
    claims = {c.number: set(c.metrics) for c in load_claims()}
    for path in (ROOT / "sla_profiles" / "default.toml", ROOT / "sla_profiles" / "acceptance.toml",
                 ROOT / "bench" / "checks" / "targets.toml"):
        for metric, entry in tomllib.loads(path.read_text(encoding="utf-8"))["metrics"].items():
            if "claim" in entry:
                assert metric in claims[entry["claim"]], f"{path.name}: {metric} (claim {entry['claim']})"


def test_a_verdict_speaks_to_its_own_claim_else_the_table_names_it():
    assert claim_of(Verdict.from_dict({"name": "x", "claim": 4, **_BARE})) == 4
    assert claim_of(Verdict.from_dict({"name": "fingerprint", **_BARE})) == 9
    assert claim_of(Verdict.from_dict({"name": "x", "metric": "energy_per_dialog", **_BARE})) == 6
    assert claim_of(Verdict.from_dict({"name": "identity_fields_missing", **_BARE})) is None


def _run(tmp_path: Path, lab_time: bool = False) -> dict:
    rec = RunRecorder(tmp_path, {"name": "s", "sla_profile": "default"}, run_id="r1")
    for phone in ("bay1", "bay2"):
        rec.add_dut(phone, {"name": phone, "serial": phone.upper()})
    p99 = compare("voice_latency_p99", 380.0, "ms", 410.0, statistic="p99", bound=395.0, confidence=0.95,
                  n=400, claim=1, evidence="measured")
    std_bad = compare("voice_latency_std", 95.0, "ms", 87.0, statistic="std", bound=101.0, confidence=0.95,
                      n=400, claim=1, evidence="measured")
    trip = value_verdict("npu_trip_temperature", 72.4, limit=72.0, unit="degC", comparator="==",
                         tolerance=2.0).but(claim=8, evidence="measured")
    energy = compare("dialog.energy", 12.0, "J", None, statistic="sum", evidence="measured")
    rec.add_test(TestRecord("t.py::test_voice[bay1]", "bay1", "passed", 1.0, verdicts=[p99, trip, energy]))
    rec.add_test(TestRecord("t.py::test_voice[bay2]", "bay2", "failed", 1.0, verdicts=[p99, std_bad]))
    rec.finish()
    data = json.loads(rec.results_path.read_text())
    if lab_time:
        for test in data["tests"]:
            test["lab_time_s"] = 150.0
        rec.results_path.write_text(json.dumps(data))
    return data


def test_the_grid_has_the_worst_outcome_per_claim_and_phone(tmp_path):
    grid = claims_grid(_run(tmp_path))
    assert grid.phones == ["bay1", "bay2"]
    rows = {r.claim.number: r for r in grid.rows}
    assert rows[1].cells["bay1"].outcome == "pass" and rows[1].cells["bay2"].outcome == "fail"
    assert rows[1].cells["bay2"].decisive.name == "voice_latency_std"
    assert rows[8].cells["bay1"].outcome == "pass" and rows[8].cells["bay2"].outcome == NOT_MEASURED
    assert rows[3].cells["bay1"].outcome == NOT_MEASURED
    assert grid.unclaimed == 1  # dialog.energy speaks to no claim
    assert rows[1].cells["bay1"].lab_time_s is None


def test_the_summary_opens_with_the_grid_and_lists_what_failed(tmp_path):
    text = "\n".join(summary_lines(_run(tmp_path)))
    assert "None" not in text and "degC" not in text
    grid = text.index(" 1 Voice latency")
    assert text.index("what failed:") > grid
    assert re.search(r" 1 Voice latency +pass +FAIL", text)
    assert "bay2: voice_latency_std std 95 ms vs limit ≤ 87 ms (bound 101 ms @ 95 %)" in text
    assert "npu_trip_temperature value 72.4 °C vs limit == 72 ± 2 °C" in text
    assert "lab time" not in text
    assert "t.py::test_voice[bay1]" not in text  # passed tests are in the report and -v


def test_lab_time_is_shown_when_the_records_carry_it(tmp_path):
    text = "\n".join(summary_lines(_run(tmp_path, lab_time=True)))
    assert "lab time 2.5 min" in text
    html = render_run(tmp_path / "r1").read_text()
    assert "lab time 2.5 min" in html


def test_the_report_reads_without_none_with_one_unit_spelling_and_one_naming_scheme(tmp_path):
    _run(tmp_path)
    html = render_run(tmp_path / "r1").read_text()
    from tests.test_report import Page

    text = Page(html).all_text
    assert "None" not in text and "degC" not in text and "dialog.energy" not in text
    assert "dialog_energy" in text and "== 72 ± 2 °C" in text
    assert html.index('id="claims"') < html.index('id="summary"')


def test_a_std_is_plotted_as_a_std_against_its_limit():
    """The claim plot's axis holds the judged std, its bound and the limit, not the raw latencies."""
    grid = claims_grid({"duts": {"bay1": {}}, "tests": [{"nodeid": "t", "dut": "bay1", "verdicts": [
        compare("voice_latency_std", 60.0, "ms", 87.0, statistic="std", bound=66.0, claim=1).to_dict()]}]})
    svg = claim_plot(grid.rows[0], "c1")
    ticks = [float(t) for t in re.findall(r'text-anchor="middle">(-?[\d.]+)</text>', svg)]
    assert ticks and min(ticks) >= 50 and max(ticks) <= 95, ticks  # not 250 ms raw latencies


def test_raw_samples_of_a_std_verdict_show_the_spread_not_the_limit():
    samples = np.random.default_rng(1).normal(250.0, 40.0, 500)
    v = compare("voice_latency_std", 40.0, "ms", 87.0, statistic="std", bound=44.0)
    svg = plot_samples({"samples": samples}, v, "s")
    assert "mean ± std" in svg and "limit ≤ 87" not in svg


def test_a_far_limit_does_not_flatten_the_histogram():
    samples = np.random.default_rng(2).normal(0.10, 0.002, 300)
    v = compare("energy_per_dialog", 0.10, "% of battery capacity", 0.2963, statistic="mean")
    svg = plot_samples({"samples": samples}, v, "s")
    assert "is off this axis" in svg
    ticks = [float(t) for t in re.findall(r'text-anchor="middle">(-?[\d.]+)</text>', svg)]
    assert max(ticks) < 0.2, ticks


def test_the_example_report_has_a_claim_plot_per_measured_claim(tmp_path):
    rec = write_example_run(tmp_path, "r1", ExampleRun(duts=[ExampleDut(), ExampleDut(name="bay2")]))
    html = render_run(rec.run_dir).read_text()
    for number in (1, 6, 7, 8, 9, 10):
        assert f'id="claim-plot-{number}"' in html
    assert 'id="claim-plot-3"' not in html


def test_of_equal_outcomes_the_products_own_target_is_shown():
    data = {"duts": {"bay1": {}}, "tests": [{"nodeid": "t", "dut": "bay1", "verdicts": [
        compare("acceptance_voice_latency_max", 270.0, "ms", 410.0, claim=1).to_dict(),
        compare("voice_latency_p99", 330.0, "ms", 410.0, claim=1).to_dict()]}]}
    assert claims_grid(data).rows[0].cells["bay1"].decisive.name == "voice_latency_p99"


def test_numpy_scalars_read_like_floats():
    from phonebench.bench.results import display

    assert display.number(np.float32(0.25544029)) == "0.2554" and display.number(np.int64(3)) == "3"


def test_the_verbose_summary_lists_every_test(tmp_path):
    data = _run(tmp_path)
    assert "t.py::test_voice[bay1]" in "\n".join(summary_lines(data, verbose=True))
    from phonebench.bench.cli import build_parser

    parser = build_parser()
    assert [parser.parse_args(a).verbose for a in (["run"], ["run", "-v"], ["-v", "run"])] == [0, 1, 1]


def test_a_claim_resting_partly_on_the_phones_word_never_shows_a_plain_pass():
    from phonebench.bench.results.summary import grid_lines
    from phonebench.bench.specs.claims import claims_grid

    def verdict(name: str, outcome: str, evidence: str) -> dict:
        return {"name": name, "claim": 14, "outcome": outcome, "evidence": evidence, "value": 0.9, "unit": "fraction"}

    data = {"duts": {"P1": {}}, "tests": [{"nodeid": "t::counters", "dut": "P1", "verdicts": [
        verdict("counters_mac_utilisation", "pass", "corroborated"),
        verdict("counters_memory_bandwidth_utilisation", "pass", "corroborated"),
        verdict("counters_kv_cache_miss_rate", "info", "reported"),
        verdict("counters_weight_page_fault_rate", "info", "reported"),
        verdict("counters_prefetch_accuracy", "info", "reported")]}]}
    grid = claims_grid(data)
    cell = next(r for r in grid.rows if r.claim.number == 14).cells["P1"]
    assert cell.mark == "pass (2 of 5 corroborated, 3 reported)"
    row = next(line for line in grid_lines(grid) if line.startswith("14 "))
    assert row.split()[-1] == "pass*"
    honest = {**data, "tests": [{**data["tests"][0], "verdicts": data["tests"][0]["verdicts"][:2]}]}
    assert next(r for r in claims_grid(honest).rows if r.claim.number == 14).cells["P1"].mark == "pass"


def _counters_run(station_file: Path) -> dict:
    """A run record whose every test passed; claim 14 rests on 2 corroborated and 1 reported verdict."""
    def verdict(name: str, outcome: str, evidence: str) -> dict:
        return {"name": name, "claim": 14, "outcome": outcome, "evidence": evidence, "value": 0.9, "unit": "fraction"}

    return {"station": {"file": str(station_file), "sla_profile": "default"}, "duts": {"P1": {}},
            "tests": [{"nodeid": "t::counters", "dut": "P1", "verdicts": [
                verdict("counters_mac_utilisation", "pass", "corroborated"),
                verdict("counters_memory_bandwidth_utilisation", "pass", "corroborated"),
                verdict("counters_kv_cache_miss_rate", "info", "reported")]}]}


def test_a_profile_that_holds_reported_parts_stops_a_run_whose_tests_all_passed(tmp_path, capsys):
    """`reported_parts = "held"`: exit 12 naming the claim and phone; the shipped profiles qualify
    (pass*, exit 0), so a nightly's counters with reported parts do not fail the night."""
    from phonebench.bench.cli.run_outcome import held_claims
    from phonebench.bench.specs.sla import load_profile
    from phonebench.bench.station.request import resolve_profile
    from phonebench.core.exits import REPORTED_PARTS_HELD
    from phonebench.core.station import StationConfig

    (tmp_path / "strict.toml").write_text('name = "strict"\nextends = "default"\nreported_parts = "held"\n')
    station = StationConfig(name="lab", source=tmp_path / "station.toml")  # the lab's profiles beside it
    data = _counters_run(tmp_path / "station.toml")
    assert claims_grid(data).qualified_passes() == ["claim 14 on P1 (2 of 3 corroborated, 1 reported)"]
    assert held_claims(resolve_profile(None, station), data) == 0
    assert held_claims(resolve_profile("nightly", station), data) == 0
    assert held_claims(resolve_profile("strict", station), data) == REPORTED_PARTS_HELD
    assert "claim 14 on P1 (2 of 3 corroborated, 1 reported)" in capsys.readouterr().err
    assert [load_profile(n).reported_parts for n in ("default", "nightly")] == ["qualified", "qualified"]
    bench_only = {**data, "tests": [{**data["tests"][0], "verdicts": data["tests"][0]["verdicts"][:2]}]}
    assert held_claims(resolve_profile("strict", station), bench_only) == 0


def test_a_misspelt_reported_parts_policy_is_one_clear_error(tmp_path):
    import pytest

    from phonebench.bench.specs.sla import load_profile
    from phonebench.core.errors import ConfigError

    (tmp_path / "bad.toml").write_text('name = "bad"\nextends = "default"\nreported_parts = "hold"\n')
    with pytest.raises(ConfigError, match="reported_parts' must be one of qualified, held"):
        load_profile(tmp_path / "bad.toml")


def test_a_measurement_under_a_condition_only_the_phone_vouches_for_is_qualified():
    """Claim 5 without a power analyzer (or a GPU power record): latency on the station clock, the
    GPU's level the phone's word; the cell says so."""
    from phonebench.bench.specs.claims import claims_grid

    verdict = {"name": "token_latency_p95_gpu_load", "claim": 5, "outcome": "pass", "evidence": "measured",
               "value": 69.0, "unit": "ms", "extra": {"condition_evidence": "reported"}}
    data = {"duts": {"P1": {}}, "tests": [{"nodeid": "t::gpu", "dut": "P1", "verdicts": [verdict]}]}
    cell = next(r for r in claims_grid(data).rows if r.claim.number == 5).cells["P1"]
    assert cell.mark == "pass (0 of 1 measured, 1 on a reported condition)"
    corroborated = {**data, "tests": [{**data["tests"][0], "verdicts": [
        {**verdict, "extra": {"condition_evidence": "measured"}}]}]}
    assert next(r for r in claims_grid(corroborated).rows if r.claim.number == 5).cells["P1"].mark == "pass"
