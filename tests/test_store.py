"""The results store on SQLite: runs recorded test by test, read back whole, killed runs kept and
shown incomplete, the schema migrations matching the models, foreign/corrupt files refused
untouched, an unreachable or full store never costing the run its local files, and the CLI."""
from __future__ import annotations

from phonebench.bench.store.sink import StoreSink

import errno
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import func, select
from sqlalchemy.orm import Session

import phonebench.bench.cli as cli
from tests.report_example import ExampleDut, ExampleRun, write_example_run
from phonebench.core.records import TestRecord
from phonebench.bench.results.run_record import RunRecorder
from phonebench.bench.store import StoreError, StoreSink, open_store, resolve_database_url
from phonebench.bench.store.db import VERSION_TABLE, head_revision
from phonebench.bench.store.models import Base, DutUnit, InstrumentUnit, RawRef, RunDut, RunInstrument
from phonebench.bench.store.store import effective_status, utc
from phonebench.core.judge import compare
from tests.store_helpers import run_and_kill



def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _without_status(data: dict) -> dict:
    return {k: v for k, v in data.items() if k != "status"}


# --- writing and reading back ---------------------------------------------------------------
def test_a_recorded_run_reads_back_exactly_as_results_json(tmp_path):
    store = open_store(tmp_path / "r.sqlite")
    duts = [ExampleDut(), ExampleDut(name="bay2", serial="EMU2", microcode="mc ES", fingerprint="mismatch")]
    rec = write_example_run(tmp_path, "run-a", ExampleRun(duts=duts, extra_checks=5), sinks=[StoreSink(store, tmp_path)])
    assert rec.sink_errors == []
    on_disk = json.loads(rec.results_path.read_text())
    stored = store.load_run("run-a")
    assert stored.data == on_disk
    assert stored.run_dir == rec.run_dir.resolve()
    assert store.load_run("latest").data["run_id"] == "run-a"
    [info] = store.list_runs()
    assert (info.run_id, info.status, info.duts, info.station) == ("run-a", "complete", ["bay1", "bay2"],
                                                                    "example-station")
    assert info.summary == on_disk["summary"]
    with Session(store.engine) as s:  # physical units and per-run state have rows of their own
        fingerprints = {d.name: d.fingerprint["verdict"] for d in s.scalars(select(RunDut))}
        assert fingerprints == {"bay1": "known", "bay2": "mismatch"}
        assert sorted(u.serial for u in s.scalars(select(DutUnit))) == ["EMU0001", "EMU2"]
        [scope] = s.scalars(select(RunInstrument))
        assert (scope.firmware, scope.calibration["status"]) == ("07.50", "valid")
        assert s.scalar(select(InstrumentUnit.serial)) == "MY0001"
        assert s.scalar(select(func.count()).select_from(RawRef)) == 10  # per DUT: 4 raw files, the latency samples judged twice (p99 and std)


def test_each_test_is_committed_when_it_ends(tmp_path):
    url = tmp_path / "r.sqlite"
    rec = RunRecorder(tmp_path, {"name": "s"}, run_id="r1", sinks=[StoreSink(str(url), tmp_path)])
    rec.add_dut("bay1", {"name": "bay1", "serial": "X"})
    for i in range(3):
        rec.add_test(TestRecord(f"t::{i}", "bay1", "passed", 0.1, verdicts=[compare("v", 1.0, "ms", 2.0)]))
        with open_store(url) as reader:  # another connection, as another process would see it
            assert len(reader.load_run("r1").data["tests"]) == i + 1
    assert rec.sink_errors == []


def test_a_repeated_sync_adds_nothing_and_updates_identity(tmp_path):
    store = open_store(tmp_path / "r.sqlite")
    rec = write_example_run(tmp_path, "r1")
    data = json.loads(rec.results_path.read_text())
    first = store.sync_run(data, rec.run_dir)
    again = store.sync_run(data, rec.run_dir)
    assert (first.tests_added, again.tests_added, again.tests_stored) == (5, 0, 5)
    data["duts"]["bay1"]["microcode"] = "npu-mc 4.3"  # re-identified unit: a stored run is evidence (issue 48)
    with pytest.raises(StoreError, match="duts.bay1.microcode: stored 'npu-mc 4.2.1-MP'"):
        store.sync_run(data, rec.run_dir)
    assert store.load_run("r1").data["duts"]["bay1"]["microcode"] == "npu-mc 4.2.1-MP"
    store.sync_run(data, rec.run_dir, amend=("lab lead", "unit re-identified"))  # a correction is an amendment
    assert store.load_run("r1").data["duts"]["bay1"]["microcode"] == "npu-mc 4.3"
    assert store.load_run("r1", version=0).data["duts"]["bay1"]["microcode"] == "npu-mc 4.2.1-MP"


def test_a_killed_run_keeps_its_finished_tests_and_shows_incomplete(tmp_path):
    url = f"sqlite:///{tmp_path / 'r.sqlite'}"
    run_and_kill(url, tmp_path)
    with open_store(url) as store:
        [info] = store.list_runs()
        assert info.status == "incomplete"
        stored = store.load_run("killed")
    assert stored.data["status"] == "incomplete"
    assert [t["nodeid"] for t in stored.data["tests"]] == ["t::0", "t::1", "t::2"]
    assert json.loads((tmp_path / "killed" / "results.json").read_text())["status"] == "running"


def test_running_means_the_recorder_is_alive():
    now = utc("2025-01-01T12:00:00+00:00")
    assert effective_status("complete", None, None, now, now) == "complete"
    assert effective_status("running", None, None, now, now) == "running"  # recent, other host: assume alive
    assert effective_status("running", None, None, utc("2025-01-01T00:00:00"), now) == "incomplete"  # stale
    import socket
    assert effective_status("running", socket.gethostname(), os.getpid(), now, now) == "running"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert effective_status("running", socket.gethostname(), dead.pid, now, now) == "incomplete"


# --- schema ---------------------------------------------------------------------------------
def test_migrations_build_exactly_the_models_schema(tmp_path):
    store = open_store(tmp_path / "r.sqlite")
    with store.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True, "version_table": VERSION_TABLE})
        diff = compare_metadata(context, Base.metadata)
        version = conn.exec_driver_sql(f"SELECT version_num FROM {VERSION_TABLE}").scalar()
    assert diff == []
    assert version == head_revision()


def test_downgraded_schema_is_migrated_back_on_open(tmp_path):
    from alembic import command

    from phonebench.bench.store.db import alembic_config

    path = tmp_path / "r.sqlite"
    write_example_run(tmp_path, "r1", sinks=[StoreSink(open_store(path), tmp_path)])
    with open_store(path).engine.begin() as conn:
        command.downgrade(alembic_config(conn), "base")
    with open_store(path) as store:  # empty again: created from scratch
        assert store.list_runs() == []


# --- bad input and faults -------------------------------------------------------------------
def test_a_corrupt_database_file_is_refused_untouched(tmp_path):
    path = tmp_path / "r.sqlite"
    path.write_bytes(b"\x00garbage" * 500)
    before = _digest(path)
    with pytest.raises(StoreError, match="not an SQLite database") as err:
        open_store(path)
    assert "not changed" in str(err.value)
    assert _digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.sqlite"]


def test_a_damaged_sqlite_file_is_refused_untouched(tmp_path):
    path = tmp_path / "r.sqlite"
    with open_store(path) as store:  # closed: the WAL is checkpointed into the file
        write_example_run(tmp_path, "r1", sinks=[StoreSink(store, tmp_path)])
    data = bytearray(path.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # header intact, schema page destroyed
    path.write_bytes(bytes(data))
    before = _digest(path)
    with pytest.raises(StoreError, match="corrupt"):
        open_store(path)
    assert _digest(path) == before


def test_a_foreign_sqlite_database_is_refused_untouched(tmp_path):
    import sqlite3

    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    conn.execute("INSERT INTO invoices VALUES (1, 9.5)")
    conn.commit()
    conn.close()
    before = _digest(path)
    with pytest.raises(StoreError, match="not a phonebench store .*invoices"):
        open_store(path)
    assert _digest(path) == before
    assert not (tmp_path / "other.db-wal").exists()  # not even the journal mode was changed


def test_a_store_from_a_newer_phonebench_is_refused(tmp_path):
    import sqlite3

    path = tmp_path / "r.sqlite"
    open_store(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"UPDATE {VERSION_TABLE} SET version_num = '9999_future'")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="9999_future.*unknown to this"):
        open_store(path)


def test_an_unusable_store_fails_the_sink_not_the_run(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the database folder should be")
    sink = StoreSink(str(blocker / "r.sqlite"), tmp_path)
    rec = RunRecorder(tmp_path, {"name": "s"}, run_id="r1", sinks=[sink])
    rec.add_test(TestRecord("t::a", None, "passed", 0.1, verdicts=[compare("v", 1.0, "ms", 2.0)]))
    rec.finish()
    data = json.loads(rec.results_path.read_text())
    assert data["status"] == "complete" and len(data["tests"]) == 1
    assert len(rec.sink_errors) == 3
    assert "not-a-dir" in rec.sink_errors[0]
    assert "not retried" in rec.sink_errors[1]  # no waiting on a dead store every test
    assert "not-a-dir" in rec.sink_errors[2]  # but the run's last event always tries again


def test_the_sink_catches_up_when_the_store_comes_back(tmp_path):
    blocker = tmp_path / "db"
    blocker.write_text("in the way")
    sink = StoreSink(str(blocker / "r.sqlite"), tmp_path, retry_after_s=0)
    rec = RunRecorder(tmp_path, {"name": "s"}, run_id="r1", sinks=[sink])
    rec.add_test(TestRecord("t::a", None, "passed", 0.1))
    assert len(rec.sink_errors) == 2  # start, t::a
    blocker.unlink()
    rec.add_test(TestRecord("t::b", None, "passed", 0.1))
    rec.finish()
    assert len(rec.sink_errors) == 2
    with open_store(blocker / "r.sqlite") as store:
        stored = store.load_run("r1")
    assert [t["nodeid"] for t in stored.data["tests"]] == ["t::a", "t::b"]
    assert stored.data["status"] == "complete"


@pytest.fixture
def tiny_disk(tmp_path):
    """A 4 MiB tmpfs (root only); skipped where it cannot be mounted."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root; test_report_reports_disk_full injects ENOSPC instead")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(folder: Path, leave: int) -> None:
    stat = os.statvfs(folder)
    free = stat.f_bavail * stat.f_frsize
    (folder / "filler").write_bytes(b"\0" * max(0, free - leave))


def test_a_full_disk_under_the_store_is_reported_and_keeps_what_was_committed(tiny_disk, tmp_path):
    sink = StoreSink(str(tiny_disk / "r.sqlite"), tmp_path, retry_after_s=0)
    rec = RunRecorder(tmp_path / "reports", {"name": "s"}, run_id="r1", sinks=[sink])
    rec.add_dut("bay1", {"name": "bay1", "serial": "X"})
    rec.add_test(TestRecord("t::first", "bay1", "passed", 0.1, verdicts=[compare("v", 1.0, "ms", 2.0)]))
    assert rec.sink_errors == [] and sink.stored_tests == 1
    _fill(tiny_disk, leave=0)
    big = [compare(f"v{i}", 1.0, "ms", 2.0, detail="x" * 2000) for i in range(200)]
    rec.add_test(TestRecord("t::second", "bay1", "passed", 0.1, verdicts=big))
    rec.finish()
    assert rec.sink_errors and "disk full" in rec.sink_errors[0]
    assert "the store has 1 of this run's 2 tests" in rec.sink_errors[0]
    assert len(json.loads(rec.results_path.read_text())["tests"]) == 2  # the local record is whole
    (tiny_disk / "filler").unlink()
    with open_store(tiny_disk / "r.sqlite") as store:
        assert [t["nodeid"] for t in store.load_run("r1").data["tests"]] == ["t::first"]
        store.import_folder(rec.run_dir)  # and the rest goes in once there is room
        assert len(store.load_run("r1").data["tests"]) == 2


# --- import ---------------------------------------------------------------------------------
def test_store_import_adds_runs_made_without_the_store(tmp_path):
    for run_id in ("r1", "r2"):
        write_example_run(tmp_path / "reports", run_id, ExampleRun(finish=run_id == "r1"))
    with open_store(tmp_path / "r.sqlite") as store:
        results = store.import_folder(tmp_path / "reports")  # `latest` is a link: not imported twice
        assert sorted(r.run_id for r in results) == ["r1", "r2"]
        assert {r.run_id: r.status for r in store.list_runs()} == {"r1": "complete", "r2": "incomplete"}
        assert [r.tests_added for r in store.import_folder(tmp_path / "reports" / "r1")] == [0]
        assert {r.run_id for r in store.list_runs()} == {"r1", "r2"}
        with pytest.raises(StoreError, match="no results.json"):
            store.import_folder(tmp_path)
        (tmp_path / "bad").mkdir()
        (tmp_path / "bad" / "results.json").write_text('{"hello": 1}')
        with pytest.raises(StoreError, match="not a phonebench results.json"):
            store.import_folder(tmp_path / "bad")
        (tmp_path / "bad" / "results.json").write_text(json.dumps(
            {"schema": "phonebench.results/1", "run_id": "broken", "tests": [{"nodeid": "t"}]}))
        with pytest.raises(StoreError, match="malformed record .*nothing of it was stored"):
            store.import_folder(tmp_path / "bad")
        assert "broken" not in {r.run_id for r in store.list_runs()}


# --- configuration --------------------------------------------------------------------------
def test_database_url_resolution(tmp_path, monkeypatch):
    monkeypatch.delenv("PHONEBENCH_DATABASE", raising=False)
    assert resolve_database_url(None, tmp_path) == f"sqlite:///{tmp_path / 'results.sqlite'}"
    assert resolve_database_url("postgresql://u@db/bench", tmp_path) == "postgresql://u@db/bench"
    monkeypatch.setenv("PHONEBENCH_DATABASE", "postgresql://other/bench")
    assert resolve_database_url("postgresql://u@db/bench", tmp_path) == "postgresql://other/bench"


def test_unsupported_and_malformed_urls_are_clear(tmp_path):
    with pytest.raises(StoreError, match="not supported"):
        open_store("mysql://u@h/db")
    with pytest.raises(StoreError, match="not valid"):
        open_store("postgresql://u@h:notaport/db")


# --- the command line -----------------------------------------------------------------------
def bench(*argv: str) -> int:
    with mock.patch.object(cli, "SUBCOMMAND_MODULES", ["phonebench.bench.cli.results"]):
        return cli.main(list(argv))


def test_cli_runs_report_matrix_and_import(tmp_path, capsys):
    reports = tmp_path / "reports"
    write_example_run(reports, "r1", ExampleRun(duts=[ExampleDut()]))
    db = ["--database", str(tmp_path / "r.sqlite")]
    assert bench("store-import", str(reports), *db) == 0
    assert "r1: 5 tests (5 new)" in capsys.readouterr().out
    assert bench("runs", *db) == 0
    out = capsys.readouterr().out
    assert "r1" in out and "complete" in out and "bay1" in out
    (reports / "r1" / "report.html").unlink(missing_ok=True)
    assert bench("report", "r1", *db) == 0
    assert (reports / "r1" / "report.html").is_file()
    assert bench("report", str(reports / "latest"), "--output", str(tmp_path / "x.html")) == 0
    assert (tmp_path / "x.html").is_file()
    capsys.readouterr()
    assert bench("matrix", *db) == 0
    assert "| Qualcomm SM8650 | npu-mc 4.2.1-MP | known |" in capsys.readouterr().out
    assert bench("matrix", *db, "--output", str(tmp_path / "m.html")) == 0
    assert "<table>" in (tmp_path / "m.html").read_text()
    assert bench("report", "no-such-run", *db) == 2
    assert "no run 'no-such-run'" in capsys.readouterr().err


def test_cli_report_of_a_run_whose_folder_is_gone(tmp_path, capsys):
    import shutil

    rec = write_example_run(tmp_path / "reports", "r1")
    db = ["--database", str(tmp_path / "r.sqlite")]
    assert bench("store-import", str(rec.run_dir), *db) == 0
    shutil.rmtree(rec.run_dir)
    assert bench("report", "r1", *db, "--output", str(tmp_path / "r1.html")) == 0
    assert "plots of raw data are left out" in capsys.readouterr().err
    html = (tmp_path / "r1.html").read_text()
    assert "voice_latency_p99" in html and "the run folder is unknown" in html


def test_cli_default_store_is_in_the_results_dir(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("PHONEBENCH_DATABASE", raising=False)
    write_example_run(tmp_path, "r1")
    assert bench("store-import", str(tmp_path / "r1"), "--results-dir", str(tmp_path)) == 0
    assert (tmp_path / "results.sqlite").is_file()
    monkeypatch.setenv("PHONEBENCH_DATABASE", str(tmp_path / "elsewhere.sqlite"))
    assert bench("runs", "--results-dir", str(tmp_path)) == 0
    assert "no runs" in capsys.readouterr().out


def test_cli_refuses_a_corrupt_store_with_a_clear_message(tmp_path, capsys):
    path = tmp_path / "r.sqlite"
    path.write_text("this is a text file")
    assert bench("runs", "--database", str(path)) == 2
    err = capsys.readouterr().err
    assert "not an SQLite database" in err and "hint:" in err
    assert path.read_text() == "this is a text file"


def test_report_reports_disk_full(tmp_path, monkeypatch):
    from phonebench.core import files
    from phonebench.bench.report import ReportError, render_run

    rec = write_example_run(tmp_path, "r1")
    render_run(rec.run_dir)
    before = (rec.run_dir / "report.html").read_bytes()

    def full(_fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", full)
    with pytest.raises(ReportError, match="disk full .*report.html.*not written.*unchanged"):
        render_run(rec.run_dir)
    assert (rec.run_dir / "report.html").read_bytes() == before  # the previous report is intact
    assert not list(rec.run_dir.glob(".report-*"))


def test_every_verdict_field_has_a_measurement_column():
    """The store maps a verdict's fields by name: a new Verdict field needs a column and a migration."""
    from phonebench.bench.store.models import MEASUREMENT_FIELDS, Measurement

    columns = {c.key for c in Measurement.__mapper__.column_attrs}
    assert set(MEASUREMENT_FIELDS) <= columns and {"detail", "description", "extra"} <= columns
