"""Results store speed: measurement insert rate (rows/s) on SQLite and PostgreSQL the way a run
writes them (one transaction per test), with and without the hash chain (issue 48: its insert
overhead), `bench store verify`'s time per 1,000 records, and matrix build time over 10,000 runs
(report render time: bench_report.py). Prints a table; exits 0."""
from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
from sqlalchemy import insert  # noqa: E402

from phonebench.bench.results.matrix import build_matrix, to_markdown  # noqa: E402
from phonebench.bench.store import open_store  # noqa: E402
from phonebench.bench.store.store import Store  # noqa: E402
from phonebench.bench.store.verify import verify_store  # noqa: E402
from phonebench.bench.store.models import Measurement, Run, RunDut, TestResult  # noqa: E402
from tests.postgres_helpers import ScratchPostgres, postgres_bindir  # noqa: E402

TESTS, VERDICTS = 200, 50  # 10,000 measurements per insert benchmark
MATRIX_RUNS = 10_000
VERIFY_RUNS, VERIFY_TESTS, VERIFY_VERDICTS = 100, 10, 5  # 1,100 records (run headers and tests), 5,000 verdicts
MATRIX_VERDICTS = ("fingerprint", "bit_exact_after_adapter", "redundancy_engage_mV", "voice_latency_p99",
                   "token_latency_std", "power_sustained_mean", "cover_temp_max")
FLEET = [("Qualcomm", "SM8650", "npu-mc 4.2.1-MP"), ("Qualcomm", "SM8550", "npu-mc 3.9-ES"),
         ("MediaTek", "MT6989", "apu-mc 2.0-ES"), ("MediaTek", "MT6985", "apu-mc 1.7-MP"),
         ("HiSilicon", "Kirin 9000S", "davinci-mc 5.1-MP"), ("HiSilicon", "Kirin 9010", "davinci-mc 9.9-XX")]


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def insert_rate(url: str, chained: bool = True) -> tuple[float, float]:
    """Measurements/s and tests/s, syncing after every test as the sink does during a run (its
    recorder named); chained=False leaves the chain out, to measure what chaining costs."""
    if not chained:
        with mock.patch.object(Store, "_chain_run", lambda *args, **kwargs: None):
            return insert_rate(url)
    rng = np.random.default_rng(0)
    data: dict[str, Any] = {"schema": "phonebench.results/1", "run_id": "insert-bench", "status": "running",
                            "started": "2025-01-01T00:00:00+00:00", "finished": None, "code_version": "bench",
                            "station": {"name": "bench"}, "duts": {"bay1": {"name": "bay1", "serial": "S1"}},
                            "instruments": {}, "tests": [], "summary": {}}
    recorder = (socket.gethostname(), os.getpid())
    with open_store(url) as store:
        store.sync_run(data, recorder=recorder)
        start = time.perf_counter()
        for i in range(TESTS):
            data["tests"].append({"nodeid": f"suites/test_x.py::test_{i}[bay1]", "dut": "bay1", "outcome": "passed",
                                  "duration_s": 0.1, "message": "", "markers": [], "verdicts": [
                                      {"name": f"check_{j}", "value": float(rng.normal()), "unit": "ms",
                                       "outcome": "pass", "limit": 2.0, "comparator": "<=", "statistic": "p99",
                                       "bound": 1.5, "confidence": 0.95, "n": 1000, "n_required": 459, "detail": "",
                                       "raw": [f"raw/t{i}/c{j}.npz"], "extra": {}} for j in range(VERDICTS)]})
            store.sync_run(data, recorder=recorder)
        elapsed = time.perf_counter() - start
    return TESTS * VERDICTS / elapsed, TESTS / elapsed


def populate_matrix_store(url: str) -> None:
    """10,000 runs of one DUT each, with the seven verdicts the matrix reads, bulk-inserted."""
    rng = np.random.default_rng(1)
    base = dt.datetime(2024, 1, 1)
    with open_store(url) as store, store.engine.begin() as conn:
        conn.execute(insert(Run), [{"id": i + 1, "run_id": f"run-{i:05d}", "status": "complete",
                                    "started": base + dt.timedelta(hours=i), "updated": base,
                                    "station_record": {}, "summary": {}} for i in range(MATRIX_RUNS)])
        duts, tests, measurements = [], [], []
        for i in range(MATRIX_RUNS):
            manufacturer, soc, microcode = FLEET[i % len(FLEET)]
            duts.append({"run_pk": i + 1, "name": "bay1", "serial": f"S{i % 40}", "soc_manufacturer": manufacturer,
                         "soc_model": soc, "microcode": microcode, "identity": {}})
            tests.append({"id": i + 1, "run_pk": i + 1, "seq": 0, "nodeid": "t", "dut": "bay1", "outcome": "passed",
                          "markers": []})
            for j, name in enumerate(MATRIX_VERDICTS):
                extra = {"verdict": "known", "rule": "wrap", "width_bits": 16, "adapter": "tile"} \
                    if name == "fingerprint" else {}
                measurements.append({"test_pk": i + 1, "run_pk": i + 1, "dut": "bay1", "seq": j, "name": name,
                                     "outcome": "fail" if rng.random() < 0.02 else "pass", "extra": extra})
        conn.execute(insert(RunDut), duts)
        conn.execute(insert(TestResult), tests)
        conn.execute(insert(Measurement), measurements)


def verify_time(url: str) -> tuple[float, int]:
    """Seconds `bench store verify` takes per 1,000 records, on runs recorded through the store."""
    with open_store(url) as store:
        for r in range(VERIFY_RUNS):
            tests = [{"nodeid": f"suites/test_x.py::test_{i}[bay1]", "dut": "bay1", "outcome": "passed",
                      "duration_s": 0.1, "message": "", "markers": [], "verdicts": [
                          {"name": f"check_{j}", "value": 0.5 + j, "unit": "ms", "outcome": "pass", "limit": 2.0,
                           "comparator": "<=", "n": 100, "detail": "", "raw": [], "extra": {}}
                          for j in range(VERIFY_VERDICTS)]} for i in range(VERIFY_TESTS)]
            store.sync_run({"schema": "phonebench.results/1", "run_id": f"verify-{r:03d}", "status": "complete",
                            "started": "2025-01-01T00:00:00+00:00", "finished": "2025-01-01T01:00:00+00:00",
                            "code_version": "bench", "station": {"name": "bench"},
                            "duts": {"bay1": {"name": "bay1", "serial": "S1"}}, "instruments": {}, "tests": tests,
                            "summary": {"passed": VERIFY_TESTS}})
    elapsed, result = timed(lambda: verify_store(url))
    assert result.intact, result.problems[:1]
    return elapsed * 1000 / result.records, result.records


def matrix_time(url: str) -> tuple[float, int]:
    """Seconds to build the matrix from the store and format it as Markdown; and its row count."""
    populate_matrix_store(url)
    with open_store(url) as store:
        elapsed, matrix = timed(lambda: build_matrix(store))
        elapsed += timed(lambda: to_markdown(matrix))[0]
    return elapsed, len(matrix.rows)


def main() -> int:
    logging.basicConfig(level=logging.WARNING)
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        rate, tests = insert_rate(str(folder / "insert.sqlite"))
        rows.append((f"SQLite insert ({TESTS} tests x {VERDICTS} verdicts, 1 txn/test)",
                     f"{rate:,.0f} measurements/s ({tests:,.1f} tests/s)"))
        plain, _ = insert_rate(str(folder / "insert-unchained.sqlite"), chained=False)
        rows.append(("SQLite insert without the hash chain (its overhead)",
                     f"{plain:,.0f} measurements/s (chaining costs {100 * (plain / rate - 1):+.0f} % time)"))
        per_1000, records = verify_time(str(folder / "verify.sqlite"))
        rows.append((f"SQLite `bench store verify` ({records:,} records, {VERIFY_VERDICTS} verdicts/test)",
                     f"{per_1000:.3f} s per 1,000 records"))
        elapsed, lines = matrix_time(str(folder / "matrix.sqlite"))
        rows.append((f"SQLite matrix build, {MATRIX_RUNS:,} runs", f"{elapsed:.2f} s ({lines} rows)"))
        if postgres_bindir() is not None:
            with ScratchPostgres() as pg:
                rate, tests = insert_rate(pg.create_database("insert_bench"))
                rows.append((f"PostgreSQL insert ({TESTS} tests x {VERDICTS} verdicts, 1 txn/test, unix socket, "
                             "fsync off)", f"{rate:,.0f} measurements/s ({tests:,.1f} tests/s)"))
                plain, _ = insert_rate(pg.create_database("insert_unchained"), chained=False)
                rows.append(("PostgreSQL insert without the hash chain (its overhead)",
                             f"{plain:,.0f} measurements/s (chaining costs {100 * (plain / rate - 1):+.0f} % time)"))
                per_1000, records = verify_time(pg.create_database("verify_bench"))
                rows.append((f"PostgreSQL `bench store verify` ({records:,} records, {VERIFY_VERDICTS} verdicts/test)",
                             f"{per_1000:.3f} s per 1,000 records"))
                elapsed, lines = matrix_time(pg.create_database("matrix_bench"))
                rows.append((f"PostgreSQL matrix build, {MATRIX_RUNS:,} runs", f"{elapsed:.2f} s ({lines} rows)"))
        else:
            rows.append(("PostgreSQL", "skipped: server not installed"))
    width = max(len(r[0]) for r in rows)
    print(f"{'benchmark'.ljust(width)}  result")
    for name, value in rows:
        print(f"{name.ljust(width)}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
