"""Records a lab can defend (issue 48): runs, verdicts, calibration records, acceptance attempts and
accepted builds are written once and chained (bench/store/chain.py); `bench store verify` names
the first record that does not match; a changed run is imported only as an amendment naming who
and why, the original kept; on PostgreSQL the writer role cannot UPDATE or DELETE records.

The attacks here are the copied store and a local user who can write the SQLite file (or connect
to PostgreSQL as its owner): docs/security/store-chain.md."""
from __future__ import annotations

import datetime as dt
import json
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Iterator
from unittest import mock

import pytest
from alembic import command
from sqlalchemy import create_engine, text

import phonebench.bench.cli as cli
from phonebench.bench.procedures.acceptance.attempts import AttemptBook
from phonebench.bench.procedures.calibration.book import CalibrationBook
from phonebench.bench.procedures.calibration.records import Criterion, Equipment, Reading, conclude
from phonebench.bench.procedures.calibration.state import role_calibration
from phonebench.bench.store import StoreError, StoreSink, open_store
from phonebench.bench.store.db import alembic_config, engine_url, writer
from phonebench.bench.store.history import accept_build
from phonebench.bench.store.verify import verify_store
from phonebench.core.exits import STORE_CHAIN_BROKEN, USAGE
from tests.postgres_helpers import ScratchPostgres, postgres_bindir
from tests.report_example import ExampleDut, ExampleRun, write_example_run
from tests.system_packages import require

SUPPLY = Equipment("instrument", "Keysight", "N6705C", "MY9", "1.0", "supply", "AT-43")


def bench(*argv: str) -> int:
    with mock.patch.object(cli, "SUBCOMMAND_MODULES", ["phonebench.bench.cli.results", "phonebench.bench.cli.store"]):
        return cli.main(list(argv))


def _zero(offset: float = 1.8e-3, minutes: int = 0):
    return conclude(SUPPLY, "supply-zero", "1.0", [Reading("current_zero_a", offset, "A", 1e-6, 20)],
                    {"current_zero_a": offset}, [Criterion("current_zero_a", "A", max_abs=5e-3)],
                    dt.timedelta(days=7), performed=dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
                    + dt.timedelta(minutes=minutes))


def _filled_store(url: str, reports: Path) -> None:
    """A store with every kind of record: runs recorded through the sink, a calibration, attempts, a baseline."""
    with open_store(url) as store:
        write_example_run(reports, "r1", ExampleRun(duts=[ExampleDut(), ExampleDut(name="bay2", serial="E2",
                                                                                    latency_ok=False)]),
                          sinks=[StoreSink(store, reports)])
        write_example_run(reports, "r2", sinks=[StoreSink(store, reports)])
        CalibrationBook(store).save(_zero())
        attempts = AttemptBook(store)
        first = attempts.start("R5CT1", station="station-1")
        attempts.update(first, run_id="r1", read_serial="R5CT1")
        attempts.finish(first, "fail", "latency", failing=[{"check": "latency", "reason": "slow"}], cycle_s=50.0,
                        overhead_s=0.8)
        attempts.dispose("R5CT1", "station-1", "repair", operator="olga")
        attempts.record("R5CT2", "wrong-unit", "serial differs", station="station-1")
        accept_build(store, "r2", by="lead", note="baseline")


def _sqlite(path: Path, *statements: str) -> None:
    """What a local user with write access to the file does, with the sqlite3 module (no bench code)."""
    conn = sqlite3.connect(path)
    try:
        for statement in statements:
            conn.execute(statement)
        conn.commit()
    finally:
        conn.close()


@pytest.fixture
def store_file(tmp_path: Path) -> Path:
    path = tmp_path / "results.sqlite"
    _filled_store(str(path), tmp_path / "reports")
    return path


# --- an intact store ----------------------------------------------------------------------------
def test_an_intact_store_verifies_and_names_its_head(store_file, capsys):
    assert bench("store", "verify", "--database", str(store_file)) == 0
    out = capsys.readouterr().out
    assert out.startswith("intact: ") and " records; head " in out
    result = verify_store(f"sqlite:///{store_file}")
    assert result.intact and result.records >= 2 + 10 + 1 + 2 + 1 and len(result.head) == 64
    assert bench("store", "verify", "--database", str(store_file), "--expect-head", result.head) == 0


# --- the attacks: an edit, a deletion, a reorder, a cut-back chain ------------------------------
def test_a_verdict_outcome_edited_with_sqlite3_is_found(store_file, capsys):
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):  # the trigger refuses a plain UPDATE
        _sqlite(store_file, "UPDATE measurements SET outcome = 'pass' WHERE outcome = 'fail'")
    # ...but whoever holds the file can drop the trigger first: verify finds the edit
    _sqlite(store_file, "DROP TRIGGER measurements_no_update",
            "UPDATE measurements SET outcome = 'pass' WHERE id = (SELECT min(id) FROM measurements "
            "WHERE outcome = 'fail')")
    assert bench("store", "verify", "--database", str(store_file)) == STORE_CHAIN_BROKEN
    err = capsys.readouterr().err
    assert "BROKEN: tests id " in err and "(run r1, suites/test_latency.py::test_voice_latency[bay2])" in err
    assert "measurement.outcome: chained 'fail', now 'pass'" in err


def test_a_run_turned_from_failed_to_passed_in_place_is_found(store_file, capsys):
    _sqlite(store_file, "DROP TRIGGER runs_final", "UPDATE runs SET summary = '{\"passed\": 99}' WHERE run_id = 'r1'")
    assert bench("store", "verify", "--database", str(store_file)) == STORE_CHAIN_BROKEN
    assert "BROKEN: runs id 1 (run r1)" in capsys.readouterr().err


@pytest.mark.parametrize("which", ["first", "last"])
def test_a_one_byte_edit_of_the_sqlite_file_is_found(store_file, which, capsys):
    data = bytearray(store_file.read_bytes())
    assert not Path(f"{store_file}-wal").exists() or Path(f"{store_file}-wal").stat().st_size == 0
    marker = b"npu-mc 4.2.1-MP"  # a DUT's microcode: in run rows, their identity and the chain's copies
    at = data.find(marker) if which == "first" else data.rfind(marker)
    assert at > 0
    data[at + len(marker) - 1] ^= 0x01  # "MP" -> "MQ": SQLite cannot tell, the chain can
    store_file.write_bytes(bytes(data))
    assert bench("store", "verify", "--database", str(store_file)) == STORE_CHAIN_BROKEN
    assert "BROKEN: " in capsys.readouterr().err


def test_a_deleted_verdict_and_a_deleted_entry_are_found(store_file, capsys):
    _sqlite(store_file, "DROP TRIGGER raw_refs_no_delete", "DROP TRIGGER measurements_no_delete",
            "DELETE FROM raw_refs", "DELETE FROM measurements WHERE id = (SELECT max(id) FROM measurements)")
    assert bench("store", "verify", "--database", str(store_file), "--all") == STORE_CHAIN_BROKEN
    assert "differs from its chained record" in capsys.readouterr().err
    _sqlite(store_file, "DROP TRIGGER record_chain_no_delete", "DELETE FROM record_chain WHERE id = 3")
    assert bench("store", "verify", "--database", str(store_file), "--all") == STORE_CHAIN_BROKEN
    err = capsys.readouterr().err
    assert "record_chain id 4" in err and "entry 3 is missing" in err


def test_reordered_entries_are_found(store_file, capsys):
    _sqlite(store_file, "DROP TRIGGER record_chain_no_update",
            "UPDATE record_chain SET id = -1 WHERE id = 5", "UPDATE record_chain SET id = 5 WHERE id = 6",
            "UPDATE record_chain SET id = 6 WHERE id = -1")
    assert bench("store", "verify", "--database", str(store_file)) == STORE_CHAIN_BROKEN
    assert "does not follow the entry before it" in capsys.readouterr().err


def test_a_row_written_past_the_bench_is_found(store_file, capsys):
    _sqlite(store_file, "INSERT INTO accepted_builds (model, run_id, build, accepted) "
                        "VALUES ('SM8650', 'r1', 'forged', '2026-12-06 00:00:00')")
    assert bench("store", "verify", "--database", str(store_file)) == STORE_CHAIN_BROKEN
    assert "is not in the chain" in capsys.readouterr().err


def test_a_chain_cut_back_to_a_consistent_state_is_found_by_the_noted_head(store_file, capsys):
    noted = verify_store(f"sqlite:///{store_file}").head
    # the newest record and its entry removed together: the rest is a consistent, shorter chain
    _sqlite(store_file, "DROP TRIGGER record_chain_no_delete", "DROP TRIGGER accepted_builds_no_delete",
            "DELETE FROM accepted_builds", "DELETE FROM record_chain WHERE record_table = 'accepted_builds'")
    assert bench("store", "verify", "--database", str(store_file)) == 0  # what verify alone cannot see
    capsys.readouterr()
    assert bench("store", "verify", "--database", str(store_file), "--expect-head", noted) == STORE_CHAIN_BROKEN
    assert "does not hold the noted head" in capsys.readouterr().err


def test_verify_of_a_missing_store_is_one_line(tmp_path, capsys):
    assert bench("store", "verify", "--database", str(tmp_path / "none.sqlite")) == 2
    assert "no results store at" in capsys.readouterr().err


# --- imports: the reported bug, and what must keep working --------------------------------------
def _edit_results(run_dir: Path) -> None:
    data = json.loads((run_dir / "results.json").read_text())
    for test in data["tests"]:
        if test["outcome"] == "failed":
            test["outcome"] = "passed"
            for v in test["verdicts"]:
                v["outcome"] = "pass"
    data["summary"] = {**data["summary"], "passed": data["summary"]["passed"] + data["summary"].get("failed", 0),
                       "failed": 0}
    data["duts"]["bay2"]["serial"] = "OTHER-UNIT"
    (run_dir / "results.json").write_text(json.dumps(data, indent=1))


def test_an_edited_results_json_is_refused_and_an_amendment_keeps_the_original(tmp_path, capsys):
    reports, db = tmp_path / "reports", ["--database", str(tmp_path / "r.sqlite")]
    write_example_run(reports, "r1", ExampleRun(duts=[ExampleDut(), ExampleDut(name="bay2", serial="E2",
                                                                               latency_ok=False)]))
    assert bench("store-import", str(reports / "r1"), *db) == 0
    with open_store(tmp_path / "r.sqlite") as store:
        before = store.load_run("r1").data
    assert before["summary"]["failed"] > 0
    _edit_results(reports / "r1")
    capsys.readouterr()
    assert bench("store-import", str(reports / "r1"), *db) == 1
    err = capsys.readouterr().err
    assert "results.json differs from the stored run" in err and "nothing was changed" in err and "--amend" in err
    with open_store(tmp_path / "r.sqlite") as store:
        assert store.load_run("r1").data == before
    assert bench("store-import", str(reports / "r1"), "--amend", *db) == USAGE  # who and why are required
    assert "--by NAME" in capsys.readouterr().err
    assert bench("store-import", str(reports / "r1"), "--amend", "--by", "alice", "--reason", "re-judged", *db) == 0
    assert "stored as an amendment by alice" in capsys.readouterr().out
    with open_store(tmp_path / "r.sqlite") as store:
        now = store.load_run("r1").data
        assert now["summary"]["failed"] == 0 and now["duts"]["bay2"]["serial"] == "OTHER-UNIT"
        assert now["amendment"]["by"] == "alice" and now["amendment"]["reason"] == "re-judged"
        assert store.load_run("r1", version=0).data == before  # the original stays readable
        assert [r.run_id for r in store.list_runs()] == ["r1"]  # one run, its current version
        assert store.list_runs()[0].summary["failed"] == 0
    assert bench("store", "verify", *db) == 0
    # the amendment is itself evidence: importing the same folder again is a no-op
    assert bench("store-import", str(reports / "r1"), *db) == 0
    assert "(0 new)" in capsys.readouterr().out


def test_an_identical_reimport_is_a_no_op_and_a_store_behind_is_completed(tmp_path):
    reports = tmp_path / "reports"
    rec = write_example_run(reports, "r1")
    data = json.loads(rec.results_path.read_text())
    with open_store(tmp_path / "r.sqlite") as store:
        behind = {**data, "status": "running", "tests": data["tests"][:2], "finished": None}
        store.sync_run(behind, rec.run_dir, recorder=("gone-host", 1))  # the sink lost the store after 2 tests
        [done] = store.import_folder(reports / "r1")
        assert (done.tests_added, done.tests_stored) == (3, 5)
        assert store.load_run("r1").data["status"] == "complete"
        assert [r.tests_added for r in store.import_folder(reports / "r1")] == [0]
        # a healed (incomplete) run the folder completes: its stored tests unchanged
        store.sync_run({**data, "run_id": "r2", "status": "incomplete", "tests": data["tests"][:1]}, rec.run_dir)
        [done] = store.sync_run({**data, "run_id": "r2"}, rec.run_dir),
        assert (done.tests_added, store.load_run("r2").data["status"]) == (4, "complete")
        edited = json.loads(json.dumps(data))
        edited["tests"][0]["verdicts"][0]["value"] = 0.0
        with pytest.raises(StoreError, match=r"tests\[0\] .*value: stored"):
            store.sync_run(edited, rec.run_dir)
    assert verify_store(f"sqlite:///{tmp_path / 'r.sqlite'}").intact


# --- calibration records ------------------------------------------------------------------------
def test_a_due_date_change_is_an_amendment_and_corrections_follow_it(tmp_path):
    path = tmp_path / "r.sqlite"
    fixture = Equipment.fixture("station-1")
    with open_store(path) as store:
        book = CalibrationBook(store)
        zero = book.save(_zero())
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            _sqlite(path, f"UPDATE calibration_records SET due = '2030-01-01 00:00:00' WHERE id = {zero.id}")
        with pytest.raises(TypeError):
            book.set_due(zero.id, zero.due)  # type: ignore[call-arg]  # who and why are required
        with pytest.raises(StoreError, match="names who makes it and why"):
            book.set_due(zero.id, zero.due, by=" ", reason="x")
        past = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)
        aged = book.set_due(zero.id, past, by="lab lead", reason="interval shortened after a drop")
        assert (aged.supersedes, aged.amended_by, aged.certificate) == (zero.id, "lab lead", f"{zero.certificate}/A1")
        assert book.latest(SUPPLY, "supply-zero").id == aged.id
        assert book.get(zero.id).due == zero.due  # the original stays readable
        assert [r.id for r in book.history()] == [aged.id]
        assert {r.id for r in book.history(superseded=True)} == {zero.id, aged.id}
        assert role_calibration(book, "supply", SUPPLY, fixture).state == "expired"
        with pytest.raises(StoreError, match="already amended"):
            book.set_due(zero.id, zero.due, by="x", reason="y")
        # an amended correction: every later measurement uses the current version
        fixed = book.amend(aged.id, by="lab lead", reason="typo in the offset", due=zero.due.replace(tzinfo=None),
                           adjustments={"current_zero_a": 1.7e-3})
        seen = role_calibration(book, "supply", SUPPLY, fixture)
        assert seen.corrections == {"current_zero_a": 1.7e-3} and fixed.certificate.endswith("/A2")
    assert verify_store(f"sqlite:///{path}").intact


def test_an_edited_due_date_is_found(tmp_path, capsys):
    path = tmp_path / "r.sqlite"
    with open_store(path) as store:
        zero = CalibrationBook(store).save(_zero())
    _sqlite(path, "DROP TRIGGER calibration_records_no_update",
            f"UPDATE calibration_records SET due = '2030-01-01 00:00:00.000000' WHERE id = {zero.id}")
    assert bench("store", "verify", "--database", str(path)) == STORE_CHAIN_BROKEN
    err = capsys.readouterr().err
    assert f"BROKEN: calibration_records id {zero.id}" in err and "due: chained '2026-12-08T00:00:00', now " \
        "'2030-01-01T00:00:00'" in err


def test_a_finished_acceptance_attempt_cannot_be_changed(store_file):
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        _sqlite(store_file, "UPDATE acceptance_attempts SET outcome = 'pass' WHERE serial = 'R5CT1'")
    with pytest.raises(sqlite3.IntegrityError, match="refused"):
        _sqlite(store_file, "DELETE FROM acceptance_attempts")


# --- existing stores, concurrent writers --------------------------------------------------------
def test_an_existing_store_is_chained_by_its_migration(tmp_path, capsys):
    path = tmp_path / "r.sqlite"
    _filled_store(str(path), tmp_path / "reports")
    engine = create_engine(engine_url(f"sqlite:///{path}"))
    with writer(engine).begin() as conn:
        command.downgrade(alembic_config(conn), "0006")  # a store as main wrote it
    engine.dispose()
    with open_store(path) as store:  # migrated again: every existing row chained
        with store.engine.connect() as conn:
            actions = {row[0] for row in conn.execute(text("SELECT DISTINCT action FROM record_chain"))}
    assert actions == {"migrate"}
    assert bench("store", "verify", "--database", str(path)) == 0


def test_processes_writing_at_once_make_one_valid_chain(tmp_path):
    from tests.store_load import run_load

    url = f"sqlite:///{tmp_path / 'results.sqlite'}"
    result = run_load(url, tmp_path, writers=3, readers=1, runs=2, tests=3, rounds=3)
    assert result.errors == []
    verified = verify_store(url)
    assert verified.intact, verified.problems[:3]
    assert verified.records == 3 * 2 * (1 + 3) + 3 * 2  # run headers, tests, calibrations


# --- PostgreSQL: psql edits and the writer role --------------------------------------------------
@pytest.fixture(scope="module")
def cluster() -> Iterator[ScratchPostgres]:
    if postgres_bindir() is None:
        require("postgresql", False)
    with ScratchPostgres() as server:
        yield server


def _psql(cluster: ScratchPostgres, database: str, sql: str, user: str = "bench") -> subprocess.CompletedProcess:
    psql = shutil.which("psql") or str(cluster.bindir / "psql")
    return subprocess.run([psql, "-h", str(cluster.root), "-U", user, "-d", database, "-v", "ON_ERROR_STOP=1",
                           "-c", sql], capture_output=True, text=True, timeout=60)


def test_postgresql_an_update_through_psql_is_found(cluster, tmp_path, capsys):
    url = cluster.create_database("chain_psql")
    _filled_store(url, tmp_path / "reports")
    assert bench("store", "verify", "--database", url) == 0
    refused = _psql(cluster, "chain_psql", "UPDATE measurements SET outcome = 'pass' WHERE outcome = 'fail'")
    assert refused.returncode != 0 and "append-only" in refused.stderr
    done = _psql(cluster, "chain_psql", "ALTER TABLE measurements DISABLE TRIGGER USER; "
                 "UPDATE measurements SET outcome = 'pass' WHERE id = (SELECT min(id) FROM measurements "
                 "WHERE outcome = 'fail')")
    assert done.returncode == 0, done.stderr
    capsys.readouterr()
    assert bench("store", "verify", "--database", url) == STORE_CHAIN_BROKEN
    err = capsys.readouterr().err
    assert "BROKEN: tests id " in err and "measurement.outcome: chained 'fail', now 'pass'" in err


def test_postgresql_the_writer_role_inserts_but_cannot_update_or_delete(cluster, tmp_path, capsys):
    url = cluster.create_database("chain_roles")
    with open_store(url):
        pass  # the owner creates the schema
    assert bench("store", "roles", "--database", url, "--login", "station_one") == 0
    assert "GRANT phonebench_writer TO station_one" in capsys.readouterr().out
    station_url = url.replace("postgresql://bench@", "postgresql://station_one@")
    _filled_store(station_url, tmp_path / "reports")  # the station records through the writer role
    for sql in ("UPDATE tests SET outcome = 'passed'", "DELETE FROM measurements",
                "UPDATE calibration_records SET due = now()", "DELETE FROM runs", "UPDATE record_chain SET by = 'x'",
                "ALTER TABLE measurements DISABLE TRIGGER USER", "DROP TRIGGER runs_final ON runs"):
        refused = _psql(cluster, "chain_roles", sql, user="station_one")
        assert refused.returncode != 0 and ("permission denied" in refused.stderr or "must be owner"
                                            in refused.stderr), (sql, refused.stderr)
    assert bench("store", "verify", "--database", station_url) == 0
    assert bench("store", "roles", "--print") == 0
    assert "REVOKE ALL ON ALL TABLES IN SCHEMA public FROM phonebench_writer;" in capsys.readouterr().out


def test_postgresql_processes_writing_at_once_make_one_valid_chain(cluster, tmp_path):
    from tests.store_load import run_load

    url = cluster.create_database("chain_load")
    result = run_load(url, tmp_path, writers=3, readers=1, runs=2, tests=3, rounds=3)
    assert result.errors == []
    verified = verify_store(url)
    assert verified.intact, verified.problems[:3]
    assert verified.records == 3 * 2 * (1 + 3) + 3 * 2
