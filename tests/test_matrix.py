"""The compatibility matrix: rows SoC × microcode from every stored run, anomalies on rows of
their own, the newest verdict per column, CSV/Markdown/HTML, and regressions against an earlier
matrix or a date."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from unittest import mock

import pytest

import phonebench.bench.cli as cli
from phonebench.bench.results.matrix import (
    DutSighting,
    MatrixError,
    VerdictFact,
    assemble,
    build_matrix,
    column_of,
    compare,
    load_matrix_file,
    parse_date,
    to_csv,
    to_html,
    to_markdown,
)
from tests.report_example import ExampleDut, ExampleRun, write_example_run
from phonebench.bench.store import open_store

MP = ExampleDut()
ES = ExampleDut(name="bay2", serial="EMU2", soc_manufacturer="MediaTek", soc_model="MT6989",
                microcode="apu-mc 2.0-ES", rule="wrap", width_bits=16, adapter="tile-k128")
UNKNOWN = ExampleDut(name="bay3", serial="EMU3", microcode="npu-mc 9.9-XX", fingerprint="unknown",
                     rule="clamp-end", adapter=None)
SPOOF = ExampleDut(name="bay4", serial="EMU4", fingerprint="mismatch", rule="wrap", width_bits=16, adapter=None)


def _record(store, folder: Path, run_id: str, started: str, duts: list[ExampleDut]) -> None:
    rec = write_example_run(folder, run_id, ExampleRun(duts=duts))
    data = json.loads(rec.results_path.read_text())
    data["started"] = started
    store.sync_run(data, rec.run_dir)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    folder = tmp_path_factory.mktemp("matrix")
    with open_store(folder / "r.sqlite") as s:
        _record(s, folder, "jan", "2025-01-10T08:00:00+00:00", [MP, ES, UNKNOWN])
        _record(s, folder, "feb", "2025-02-10T08:00:00+00:00",
                [MP, ExampleDut(**{**ES.__dict__, "latency_ok": False, "adapter": "tile-k64"}), SPOOF])
        yield s


def _row(matrix, microcode, fingerprint=None):
    rows = [r for r in matrix.rows
            if r.microcode == microcode and (fingerprint is None or r.fingerprint == fingerprint)]
    assert len(rows) == 1, [(r.microcode, r.fingerprint) for r in matrix.rows]
    return rows[0]


def test_rows_are_soc_by_microcode_with_anomalies_on_their_own(store):
    matrix = build_matrix(store)
    keys = [(r.soc, r.microcode, r.fingerprint) for r in matrix.rows]
    assert keys == [("MediaTek MT6989", "apu-mc 2.0-ES", "known"),
                    ("Qualcomm SM8650", "npu-mc 4.2.1-MP", "known"),
                    ("Qualcomm SM8650", "npu-mc 4.2.1-MP", "mismatch"),  # same claimed build, wrong behaviour
                    ("Qualcomm SM8650", "npu-mc 9.9-XX", "unknown")]
    assert matrix.runs == 2
    assert [r.highlighted for r in matrix.rows] == [True, False, True, True]


def test_each_column_shows_the_newest_verdict_and_when_it_was_verified(store):
    matrix = build_matrix(store)
    es = _row(matrix, "apu-mc 2.0-ES")
    assert (es.rule, es.width_bits, es.adapter, es.profile) == ("wrap", "16", "tile-k64", "apu-mc 2.0-ES")
    assert es.cells["latency"].outcome == "fail" and es.cells["latency"].run_id == "feb"
    assert {c: es.cells[c].outcome for c in ("bit_exact", "redundancy", "power", "thermal")} == \
        dict.fromkeys(("bit_exact", "redundancy", "power", "thermal"), "pass")
    assert (es.last_run, es.last_date) == ("feb", "2025-02-10")
    unknown = _row(matrix, "npu-mc 9.9-XX")
    assert (unknown.last_run, unknown.profile, unknown.adapter) == ("jan", "none", "none")
    mp = _row(matrix, "npu-mc 4.2.1-MP", "known")
    assert mp.values()["units"] == "1" and mp.cells["latency"].outcome == "pass"


def test_a_column_without_verdicts_says_not_measured():
    sightings = [DutSighting("r1", None, "bay1", "S1", "Qualcomm SM8650", "mc-1")]
    facts = [VerdictFact("r1", None, "bay1", "power_sustained_mean", "pass")]
    [row] = assemble(sightings, facts).rows
    assert row.values()["latency"] == "not measured" and row.values()["power"] == "pass"
    assert row.fingerprint == "not measured"


def test_a_run_without_a_fingerprint_stays_on_its_units_row():
    sightings = [DutSighting("r1", None, "bay1", "S1", "Qualcomm SM8650", "mc-X"),
                 DutSighting("r2", None, "bay1", "S1", "Qualcomm SM8650", "mc-X")]
    facts = [VerdictFact("r1", None, "bay1", "fingerprint", "fail", {"verdict": "unknown"}),
             VerdictFact("r2", None, "bay1", "token_latency_std", "fail")]
    [row] = assemble(sightings, facts).rows
    assert row.fingerprint == "unknown" and row.cells["latency"].outcome == "fail"


def test_the_numerics_suites_fingerprint_shape_is_read_too():
    """phonebench.bench.phone.fingerprint records `npu_microcode_fingerprint` with the measured signature nested."""
    sightings = [DutSighting("r1", None, "bay1", "S1", "Qualcomm SM8650", "mc-ES"),
                 DutSighting("r1", None, "bay2", "S2", "Qualcomm SM8650", "mc-MP")]
    facts = [VerdictFact("r1", None, "bay1", "npu_microcode_fingerprint", "pass", {
                 "verdict": "known", "microcode": "mc-ES", "soc_model": "SM8650", "adapter": "tile-k64",
                 "measured": {"accumulator_bits": 16, "overflow": "wrap"}}),
             VerdictFact("r1", None, "bay2", "npu_microcode_fingerprint", "fail", {
                 "verdict": "mismatch", "microcode": "mc-MP", "adapter": None,
                 "measured": {"accumulator_bits": None, "overflow": "none"}})]
    es, mp = assemble(sightings, facts).rows
    assert (es.fingerprint, es.rule, es.width_bits, es.profile, es.adapter) == ("known", "wrap", "16", "mc-ES",
                                                                                  "tile-k64")
    assert (mp.fingerprint, mp.width_bits, mp.profile, mp.adapter) == ("mismatch", "wide", "none", "none")


def test_worst_outcome_wins_within_a_run():
    sightings = [DutSighting("r1", None, "bay1", "S1", "SoC", "mc")]
    facts = [VerdictFact("r1", None, "bay1", "cover_temp_max", "pass"),
             VerdictFact("r1", None, "bay1", "npu_trip_temperature", "insufficient-samples"),
             VerdictFact("r1", None, "bay1", "thermal_zone_max", "pass")]
    assert assemble(sightings, facts).rows[0].cells["thermal"].outcome == "insufficient-samples"


def test_verdict_names_map_to_columns():
    assert [column_of(n) for n in ("bit_exact_after_adapter", "redundancy_engage_mV", "voice_latency_p99",
                                   "token_latency_std", "first_token_ms", "dialog_total_s", "power_peak",
                                   "energy_per_dialog", "cover_temp_max", "thermal_status", "npu_trip_c",
                                   "fingerprint", "bit_exact", "tokenizer")] == \
        ["bit_exact", "redundancy", "latency", "latency", "latency", "latency", "power", "power", "thermal",
         "thermal", "thermal", None, None, None]


def test_formats_csv_markdown_and_html(store):
    matrix = build_matrix(store)
    rows = list(csv.DictReader(io.StringIO(to_csv(matrix))))
    assert [r["microcode"] for r in rows] == [r.microcode for r in matrix.rows]
    assert rows[0]["latency"] == "fail" and rows[0]["last_run"] == "feb"
    md = to_markdown(matrix)
    assert "| Qualcomm SM8650 | npu-mc 9.9-XX | ⚠ **unknown** |" in md
    assert "| **fail** |" in md
    assert md.rstrip().endswith("4 rows from 2 runs.")
    html = to_html(matrix)
    assert html.count('class="anomaly') == 2 and "http" not in html.replace("http-equiv", "")


def test_hostile_strings_are_escaped_in_every_format():
    evil = '<script>alert(1)</script> | "x" & y'
    matrix = assemble([DutSighting("r1", None, "bay1", "S1", "SoC", evil)],
                      [VerdictFact("r1", None, "bay1", "fingerprint", "fail", {"verdict": "unknown", "rule": evil})])
    assert "<script>" not in to_html(matrix) and "&lt;script&gt;" in to_html(matrix)
    assert list(csv.DictReader(io.StringIO(to_csv(matrix))))[0]["microcode"] == evil
    md_line = to_markdown(matrix).splitlines()[2]
    assert md_line.count(" | ") == 14  # the pipe in the string cannot add a column


def test_against_an_earlier_file_marks_regressions_new_and_gone_rows(store, tmp_path):
    jan = build_matrix(store, before=parse_date("2025-02-01"))
    earlier = tmp_path / "jan.csv"
    earlier.write_text(to_csv(jan))
    (tmp_path / "jan.md").write_text(to_markdown(jan))
    for path in (earlier, tmp_path / "jan.md"):
        now = compare(build_matrix(store), load_matrix_file(path), str(path))
        es = _row(now, "apu-mc 2.0-ES")
        assert es.change == "regression: latency; changed: adapter"
        assert es.was == {"latency": "pass", "adapter": "tile-k128"}
        assert _row(now, "npu-mc 4.2.1-MP", "mismatch").change == "new"
        assert _row(now, "npu-mc 4.2.1-MP", "known").change == ""  # no false alarm
        assert _row(now, "npu-mc 9.9-XX").change == ""
        assert now.gone == []
    md = to_markdown(now)
    assert "**fail** (was pass)" in md and "1 regressed, 1 new, 0 gone" in md
    assert "change" in to_csv(now).splitlines()[0]


def test_against_itself_nothing_regresses(store, tmp_path):
    matrix = build_matrix(store)
    same = compare(build_matrix(store), list(csv.DictReader(io.StringIO(to_csv(matrix)))), "same")
    assert [r.change for r in same.rows] == ["", "", "", ""]


def test_rows_no_longer_seen_are_listed_as_gone(store):
    now = compare(build_matrix(store), [{"soc": "HiSilicon Kirin", "microcode": "old", "fingerprint": "known"}], "x")
    assert now.gone == [("HiSilicon Kirin", "old", "")]
    assert "1 gone (HiSilicon Kirin / old)" in to_markdown(now)


def test_a_fingerprint_that_stops_being_known_is_a_regression():
    sightings = [DutSighting("r1", None, "bay1", "S1", "SoC", "mc")]
    facts = [VerdictFact("r1", None, "bay1", "fingerprint", "fail", {"verdict": "inconsistent"})]
    now = compare(assemble(sightings, facts), [{"soc": "SoC", "microcode": "mc", "fingerprint": "known"}], "x")
    # an anomaly is its own row: the known row is gone and the inconsistent row is new
    assert [(r.fingerprint, r.change) for r in now.rows] == [("inconsistent", "new")]
    assert now.gone == [("SoC", "mc", "")]


def test_against_bad_input_is_a_clear_error(tmp_path):
    with pytest.raises(MatrixError, match="no such file, and not a date"):
        load_matrix_file(tmp_path / "nope.csv")
    html = tmp_path / "m.html"
    html.write_text("<html><table></table></html>")
    with pytest.raises(MatrixError, match="HTML matrices cannot be compared"):
        load_matrix_file(html)
    assert parse_date("2025-02-01") is not None and parse_date("last tuesday") is None


def bench(*argv: str) -> int:
    with mock.patch.object(cli, "SUBCOMMAND_MODULES", ["phonebench.bench.cli.results"]):
        return cli.main(list(argv))


def test_cli_matrix_against_a_date_and_a_file(store, tmp_path, capsys):
    db = ["--database", store.url]
    assert bench("matrix", *db, "--against", "2025-02-01") == 0
    out = capsys.readouterr().out
    assert "regression: latency; changed: adapter" in out and "| new |" in out
    assert bench("matrix", *db, "--output", str(tmp_path / "m.csv")) == 0
    assert bench("matrix", *db, "--against", str(tmp_path / "m.csv"), "--format", "csv") == 0
    assert "regression" not in capsys.readouterr().out
    assert bench("matrix", *db, "--against", str(tmp_path / "missing.csv")) == 2
    assert "no such file, and not a date" in capsys.readouterr().err
    assert bench("matrix", *db, "--output", str(tmp_path / "m.txt")) == 2
    assert "cannot tell the format" in capsys.readouterr().err


def test_csv_cells_that_look_like_formulas_are_inert_and_read_back_unchanged(tmp_path):
    from phonebench.bench.results.matrix import load_matrix_file

    evil = '=HYPERLINK("http://x","click")'
    matrix = assemble([DutSighting("r1", None, "bay1", "S1", "SoC", evil)],
                      [VerdictFact("r1", None, "bay1", "fingerprint", "fail", {"verdict": "unknown", "rule": "-x"})])
    text = to_csv(matrix)
    row = list(csv.DictReader(io.StringIO(text)))[0]
    assert row["microcode"] == "'" + evil  # a spreadsheet shows it as text
    path = tmp_path / "m.csv"
    path.write_text(text)
    assert load_matrix_file(path)[0]["microcode"] == evil  # --against compares the real value


def test_a_relabelled_soc_never_enters_the_matrix_as_a_pass():
    """An MT6989 die saying it is an SM8650 with the SM8650's overflow rule: its fingerprint, timed
    on the station clock, is a mismatch, so its row is an anomaly of its own beside the honest one's."""
    from phonebench.bench.phone.fingerprint import fingerprint, fingerprint_verdict
    from device_double import WorldClock, make_device
    from phonebench.core import signing
    from phonebench.drivers.runtime import RuntimeClient

    facts, sightings = [], []
    for bay, persona in (("bay1", "SM8650-ES"), ("bay2", "SM8650-ES-RELABEL")):
        device = make_device(persona, f"S-{bay}")
        with signing.trusting(None, development=True):  # in-process emulated phones: a development station
            verdict = fingerprint_verdict(fingerprint(device, client=RuntimeClient(device, clock=WorldClock(device))))
        sightings.append(DutSighting("r1", None, bay, f"S-{bay}", "QTI SM8650", verdict.extra["microcode"]))
        facts += [VerdictFact("r1", None, bay, verdict.name, verdict.outcome.value, verdict.extra),
                  VerdictFact("r1", None, bay, "bit_exact_after_adapter", "pass")]
    rows = assemble(sightings, facts).rows
    assert sorted(r.fingerprint for r in rows) == ["known", "mismatch"]
    relabelled = next(r for r in rows if r.fingerprint == "mismatch")
    assert relabelled.adapter == "none"  # not trusted: never shown with the claimed build's adapter
