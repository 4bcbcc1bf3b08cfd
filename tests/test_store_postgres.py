"""The results store on a real PostgreSQL server: a private cluster started for these tests
(tests/postgres_helpers.py ScratchPostgres: initdb + pg_ctl from Debian's `postgresql` package) on a
unix socket in a temporary folder."""
from __future__ import annotations

from phonebench.bench.store.sink import StoreSink

import json
import socket
from typing import Iterator

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, text

from phonebench.bench.results.matrix import build_matrix
from tests.report_example import ExampleDut, ExampleRun, write_example_run
from phonebench.core.records import TestRecord
from phonebench.bench.results.run_record import RunRecorder
from phonebench.bench.store import StoreError, StoreSink, open_store
from phonebench.bench.store.db import VERSION_TABLE
from phonebench.bench.store.models import Base
from tests.system_packages import require
from tests.postgres_helpers import ScratchPostgres, postgres_bindir
from phonebench.core.judge import compare
from tests.store_helpers import run_and_kill



@pytest.fixture(scope="module")
def cluster() -> Iterator[ScratchPostgres]:
    if postgres_bindir() is None:
        require("postgresql", False)
    with ScratchPostgres() as server:
        yield server


@pytest.fixture
def pg_url(cluster: ScratchPostgres, request: pytest.FixtureRequest) -> str:
    return cluster.create_database(request.node.name.replace("[", "_").replace("]", "")[:60])


def test_a_recorded_run_reads_back_exactly(pg_url, tmp_path):
    with open_store(pg_url) as store:
        duts = [ExampleDut(), ExampleDut(name="<script>alert(1)</script>", serial="E2",
                                         microcode='mc "q" & <x>', fingerprint="mismatch")]
        rec = write_example_run(tmp_path, "run-pg", ExampleRun(duts=duts, extra_checks=3),
                                sinks=[StoreSink(store, tmp_path)])
        assert rec.sink_errors == []
        assert store.load_run("run-pg").data == json.loads(rec.results_path.read_text())
        assert [r.run_id for r in store.list_runs()] == ["run-pg"]


def test_migrations_match_the_models_on_postgresql(pg_url):
    with open_store(pg_url) as store, store.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True, "version_table": VERSION_TABLE})
        assert compare_metadata(context, Base.metadata) == []
    with open_store(pg_url) as again:  # opening a current store changes nothing
        assert again.list_runs() == []


def test_a_killed_run_keeps_its_finished_tests_and_shows_incomplete(pg_url, tmp_path):
    run_and_kill(pg_url, tmp_path)
    with open_store(pg_url) as store:
        [info] = store.list_runs()
        stored = store.load_run("killed")
    assert info.status == "incomplete" and stored.data["status"] == "incomplete"
    assert [t["nodeid"] for t in stored.data["tests"]] == ["t::0", "t::1", "t::2"]


def test_matrix_from_postgresql(pg_url, tmp_path):
    with open_store(pg_url) as store:
        write_example_run(tmp_path, "r1", ExampleRun(duts=[ExampleDut(), ExampleDut(
            name="bay2", serial="E2", microcode="mc-X", fingerprint="unknown")]), sinks=[StoreSink(store, tmp_path)])
        matrix = build_matrix(store)
    assert [(r.microcode, r.fingerprint) for r in matrix.rows] == [("mc-X", "unknown"), ("npu-mc 4.2.1-MP", "known")]
    assert matrix.rows[1].cells["latency"].outcome == "pass"


def test_concurrent_stations_share_one_database(pg_url, tmp_path):
    """Two recorders (two stations' runs) writing at once: shared rows (station, DUT unit) race."""
    import threading

    errors: list[str] = []

    def record(run_id: str) -> None:
        with open_store(pg_url) as store:
            rec = write_example_run(tmp_path, run_id, sinks=[StoreSink(store, tmp_path)])
            errors.extend(rec.sink_errors)

    threads = [threading.Thread(target=record, args=(f"r{i}",)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    with open_store(pg_url) as store:
        assert sorted(r.run_id for r in store.list_runs()) == ["r0", "r1", "r2"]


def test_a_foreign_postgresql_database_is_refused_untouched(cluster, pg_url):
    engine = create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE invoices (id integer primary key, total real)"))
        conn.execute(text("INSERT INTO invoices VALUES (1, 9.5)"))
    with pytest.raises(StoreError, match="not a phonebench store .*invoices"):
        open_store(pg_url)
    with engine.connect() as conn:
        tables = set(conn.execute(text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")).scalars())
    engine.dispose()
    assert tables == {"invoices"}


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_postgresql_is_a_clear_error(tmp_path):
    url = f"postgresql://bench:secret@127.0.0.1:{_closed_port()}/bench"
    with pytest.raises(StoreError) as err:
        open_store(url)
    message = str(err.value)
    assert "cannot use PostgreSQL results store" in message and "127.0.0.1" in message
    assert "secret" not in message  # the password is never printed
    assert "bench store-import" in message


def test_unreachable_postgresql_costs_the_run_nothing(tmp_path):
    sink = StoreSink(f"postgresql://bench@127.0.0.1:{_closed_port()}/bench", tmp_path)
    rec = RunRecorder(tmp_path, {"name": "s"}, run_id="r1", sinks=[sink])
    rec.add_dut("bay1", {"name": "bay1", "serial": "X"})
    rec.add_test(TestRecord("t::a", "bay1", "passed", 0.1, verdicts=[compare("v", 1.0, "ms", 2.0)]))
    rec.finish()
    data = json.loads(rec.results_path.read_text())
    assert data["status"] == "complete" and len(data["tests"]) == 1
    assert "cannot use PostgreSQL results store" in rec.sink_errors[0]
    assert all("not retried" in e for e in rec.sink_errors[1:-1])
    assert "cannot use PostgreSQL results store" in rec.sink_errors[-1]  # the last event always tries again


def test_runs_made_while_postgresql_was_down_are_imported(pg_url, tmp_path):
    rec = write_example_run(tmp_path, "offline")
    with open_store(pg_url) as store:
        [result] = store.import_folder(rec.run_dir)
        assert result.tests_added == 5
        assert store.load_run("offline").data == json.loads(rec.results_path.read_text())


def test_the_nightlys_memory_works_on_postgresql(pg_url):
    """Accepted baselines, a build's runs and the history with its change point, on PostgreSQL."""
    import numpy as np

    from phonebench.bench.results.trend import find_changes, series_of
    from phonebench.bench.store.history import accept_build, accepted_baselines, history, runs_of_build
    from tests.nightly_nights import Plan, night

    rng = np.random.default_rng(5)
    with open_store(pg_url) as store:
        for i in range(16):
            store.sync_run(night(Plan(step_night=8), i, rng))
        accept_build(store, "night-0007", by="lab")
        assert {a.run_id for a in accepted_baselines(store).values()} == {"night-0007"}
        assert runs_of_build(store, "3.4.1", "Model A")[0] == "night-0015"
        assert runs_of_build(store, "3.4.1", "Model B") == []
        series = {(s.metric, s.model): s for s in series_of(history(store))}
    changes = find_changes(series[("first_token_p99", "Model A")])
    assert [c.index for c in changes] == [8] and "3.4.0 (run night-0007) → 3.4.1 (run night-0008)" in changes[0].build_range
