"""Many bench processes on one results store (issue 36): 4 writers recording runs test by test and
filing calibrations, 4 readers listing runs, loading one and reading calibration state, all at
once; SQLite (one file) and PostgreSQL (a private cluster) side by side. Prints each store's
throughput (store operations per second) and worst wait of any one operation, and fails when any
process was refused. Figures, not assertions: the machine's load moves them."""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.postgres_helpers import ScratchPostgres, postgres_bindir  # noqa: E402
from tests.store_load import LoadResult, run_load  # noqa: E402

WRITERS, READERS, RUNS, TESTS, ROUNDS = 4, 4, 4, 20, 40


def _row(name: str, result: LoadResult) -> str:
    return (f"{name:11} {result.operations:6d} ops in {result.seconds:6.1f} s = {result.operations / result.seconds:7.1f} "
            f"ops/s   worst wait {result.worst_wait_s * 1000:7.1f} ms   refused/crashed {len(result.errors)}")


def main() -> int:
    print(f"{WRITERS} writers x {RUNS} runs x {TESTS} tests (+ a calibration per run), {READERS} readers x {ROUNDS} "
          "rounds, all at once")
    results: dict[str, LoadResult] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        results["SQLite"] = run_load(f"sqlite:///{folder / 'results.sqlite'}", folder / "sqlite", WRITERS, READERS,
                                     RUNS, TESTS, ROUNDS)
        print(_row("SQLite", results["SQLite"]), flush=True)
        if postgres_bindir() is None:
            print("PostgreSQL  skipped: Debian's postgresql is not installed (sudo apt-get install postgresql)")
        else:
            with ScratchPostgres() as server:
                results["PostgreSQL"] = run_load(server.create_database("load"), folder / "pg", WRITERS, READERS,
                                                 RUNS, TESTS, ROUNDS)
            print(_row("PostgreSQL", results["PostgreSQL"]))
    errors = [e for r in results.values() for e in r.errors]
    for error in errors[:10]:
        print(f"  error: {error}")
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
