"""Parallel bays: wall time of `bench run` (the default suites, or the files given) on an emulated
fleet of 1, 2 and 4 bays, one worker process per bay, and the parallel efficiency.

speedup(N) = N x wall(1) / wall(N): bays finished per unit of time, relative to one bay.
efficiency(N) = speedup(N) / min(N, cores): against the ideal, which is linear up to the number
of cores (each emulated bay is CPU work in Python: its ADB daemon, runtime and physics, plus
the worker's pytest), flat beyond. Target: efficiency >= 80 % up to the number of cores.

What bounds it: cores (a bay keeps one busy), the other load on the machine (the figures are
one run's ratios, all measured back to back), the parent's merge, store row and report (once
per run, serial), and each worker's start-up (imports, station start), which does not shrink
with more bays. Prints a table; exits 0.

    python benchmarks/bench_bays.py [suite files...]
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BAYS = (1, 2, 4)


def run_bays(count: int, suites: list[str]) -> tuple[float, dict]:
    with tempfile.TemporaryDirectory(prefix="bench-bays-") as folder:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        env.pop("PHONEBENCH_STATION", None)
        env.pop("PHONEBENCH_DATABASE", None)
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "phonebench.bench.cli", "run", "--bays", str(count), "-q", *suites],
                              cwd=folder, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - start
        results = Path(folder) / "reports" / "latest" / "results.json"
        if not results.exists():
            sys.exit(f"bench run --bays {count} wrote no results (exit {proc.returncode}):\n{proc.stdout[-2000:]}")
        return wall, json.loads(results.read_text())


def main() -> int:
    suites = sys.argv[1:]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"cores: {cores}, load average at start: {load:.1f}; suites: {' '.join(suites) or 'default'}")
    print(f"{'bays':>4} {'tests':>6} {'wall s':>8} {'per-bay s':>10} {'speedup':>8} {'efficiency':>10}")
    base = None
    for count in BAYS:
        wall, data = run_bays(count, suites)
        per_bay = [b.get("wall_s", 0.0) for b in data["station"]["bays"].values()]
        base = base or wall
        speedup = count * base / wall
        efficiency = speedup / min(count, cores)
        print(f"{count:>4} {len(data['tests']):>6} {wall:>8.1f} {max(per_bay):>10.1f} {speedup:>8.2f} "
              f"{efficiency:>9.0%}", flush=True)
    print(f"target: efficiency >= 80 % up to {cores} bays (the number of cores); beyond that the ideal is flat")
    return 0


if __name__ == "__main__":
    sys.exit(main())
