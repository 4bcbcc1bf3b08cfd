"""Many bench processes on one results store at once: writers record runs test by test (as a
bench session does) and file calibrations; readers list runs, load one and read the calibration
state (as `bench runs`, `bench report`, the operator page and the line's acceptance do). Shared by
tests/test_store_concurrency.py and benchmarks/bench_store_concurrency.py."""
from __future__ import annotations

import datetime as dt
import multiprocessing
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EQUIPMENT = ("instrument", "Keysight Technologies", "N6705C", "MY-LOAD-1")


@dataclass
class WorkerReport:
    name: str
    operations: int = 0
    worst_wait_s: float = 0.0
    errors: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    calibrations: int = 0

    def timed(self, started: float) -> None:
        self.operations += 1
        self.worst_wait_s = max(self.worst_wait_s, time.perf_counter() - started)


def _equipment() -> Any:
    from phonebench.bench.procedures.calibration.records import Equipment

    return Equipment(*EQUIPMENT, role="supply")


def writer(url: str, folder: str, name: str, runs: int, tests: int) -> WorkerReport:
    """Record `runs` runs of `tests` tests each through the store sink, filing a calibration after each."""
    from phonebench.bench.procedures.calibration.book import CalibrationBook
    from phonebench.bench.procedures.calibration.records import conclude
    from phonebench.bench.results.run_record import RunRecorder
    from phonebench.bench.store import StoreSink, open_store
    from phonebench.core.errors import BenchError
    from phonebench.core.records import TestRecord
    from phonebench.core.judge import compare

    report = WorkerReport(name)
    for r in range(runs):
        run_id = f"{name}-run{r}"
        sink = StoreSink(url, folder)
        started = time.perf_counter()
        rec = RunRecorder(Path(folder), {"name": f"station-{name}"}, run_id=run_id, sinks=[sink])
        rec.add_dut("bay1", {"name": "bay1", "serial": f"SER-{name}", "soc_model": "SM8650", "microcode": "mc1"})
        report.timed(started)
        for i in range(tests):
            started = time.perf_counter()
            rec.add_test(TestRecord(f"suite::t{i}", "bay1", "passed", 0.01,
                                    verdicts=[compare("power_mean", 4.0 + i / 100, "W", 4.2)]))
            report.timed(started)
        started = time.perf_counter()
        rec.finish("complete")
        report.timed(started)
        sink.close()
        report.errors += rec.sink_errors
        report.runs.append(run_id)
        started = time.perf_counter()
        try:
            store = open_store(url)
            try:
                CalibrationBook(store).save(conclude(_equipment(), "zero-offset", "1", [], {"offset_a": 1e-6 * r}, [],
                                                     dt.timedelta(days=30), station=f"station-{name}"))
                report.calibrations += 1
            finally:
                store.close()
        except BenchError as exc:
            report.errors.append(f"calibration: {str(exc).splitlines()[0]}")
        report.timed(started)
    return report


def reader(url: str, name: str, rounds: int) -> WorkerReport:
    """List runs, load the newest and read the calibration state, `rounds` times, each through a
    freshly opened store (a new process's first contact with the file is where it used to fail)."""
    from phonebench.bench.procedures.calibration.book import CalibrationBook
    from phonebench.bench.store import open_store
    from phonebench.core.errors import BenchError

    report = WorkerReport(name)
    for _ in range(rounds):
        started = time.perf_counter()
        try:
            store = open_store(url)
            try:
                runs = store.list_runs(limit=20)
                if runs:
                    store.load_run(runs[0].run_id)
                CalibrationBook(store).latest(_equipment(), "zero-offset")
            finally:
                store.close()
        except BenchError as exc:
            report.errors.append(str(exc).splitlines()[0])
        report.timed(started)
    return report


@dataclass
class LoadResult:
    reports: list[WorkerReport]
    seconds: float

    @property
    def errors(self) -> list[str]:
        return [f"{r.name}: {e}" for r in self.reports for e in r.errors]

    @property
    def operations(self) -> int:
        return sum(r.operations for r in self.reports)

    @property
    def worst_wait_s(self) -> float:
        return max(r.worst_wait_s for r in self.reports)


def run_load(url: str, folder: Path, writers: int, readers: int, runs: int, tests: int, rounds: int) -> LoadResult:
    """Start every writer and reader process at once and wait for them all."""
    from phonebench.bench.store import open_store

    open_store(url).close()  # the schema exists before the crowd arrives, as on a lab's store
    context = multiprocessing.get_context("spawn")  # fresh interpreters: no engine shared by fork
    started = time.perf_counter()
    with context.Pool(writers + readers) as pool:
        jobs = [pool.apply_async(writer, (url, str(folder), f"w{i}", runs, tests)) for i in range(writers)]
        jobs += [pool.apply_async(reader, (url, f"r{i}", rounds)) for i in range(readers)]
        reports = [job.get(timeout=1800) for job in jobs]
    return LoadResult(reports, time.perf_counter() - started)
