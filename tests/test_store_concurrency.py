"""Many bench processes, one store (issue 36): writers recording runs and calibrations while
readers list, load and read calibration state, on one SQLite file and on PostgreSQL. Every row is
accounted for and no process is refused; nothing here is timed (benchmarks/bench_store_concurrency.py
prints throughput and worst waits)."""
from __future__ import annotations

from pathlib import Path

import pytest

from phonebench.bench.procedures.calibration.book import CalibrationBook
from phonebench.bench.store import open_store
from tests.postgres_helpers import ScratchPostgres, postgres_bindir
from tests.store_load import EQUIPMENT, run_load
from tests.system_packages import require

WRITERS, READERS, RUNS, TESTS, ROUNDS = 4, 3, 3, 6, 15


def _check_everything_landed(url: str, result) -> None:
    assert result.errors == []
    store = open_store(url)
    try:
        stored = {r.run_id: r for r in store.list_runs(limit=None)}
        for report in result.reports:
            for run_id in report.runs:
                assert stored[run_id].status == "complete", run_id
                assert len(store.load_run(run_id).data["tests"]) == TESTS, run_id
        history = CalibrationBook(store).history(limit=None)
        assert len([h for h in history if h.equipment.key == EQUIPMENT]) == WRITERS * RUNS
    finally:
        store.close()


def test_many_processes_share_one_sqlite_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'results.sqlite'}"
    result = run_load(url, tmp_path, WRITERS, READERS, RUNS, TESTS, ROUNDS)
    _check_everything_landed(url, result)


def test_many_processes_share_one_postgresql_store(tmp_path: Path) -> None:
    if postgres_bindir() is None:
        require("postgresql", False)
    with ScratchPostgres() as server:
        url = server.create_database("load")
        result = run_load(url, tmp_path, WRITERS, READERS, RUNS, TESTS, ROUNDS)
        _check_everything_landed(url, result)
