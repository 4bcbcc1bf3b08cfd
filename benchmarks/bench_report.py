"""Report render time: report.html of a run with 1,000 checks, with 4 plots (one DUT) and with 100
plots (25 DUTs), written through the real RunRecorder from the seeded example run.

Target: <= 5 s wall for each, judged on the median of --repeat renders (the fastest is printed
too). Prints a table and exits 0.
Usage: python benchmarks/bench_report.py [--repeat 3]
"""
from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _timing import against  # noqa: E402  (benchmarks/ is on sys.path when run as a script)
from phonebench.bench.report import render_run  # noqa: E402
from tests.report_example import ExampleDut, ExampleRun, write_example_run  # noqa: E402

CHECKS = 1000
TARGET_S = 5.0
OWN_CHECKS, OWN_PLOTS = 6, 4  # each example DUT's own checks, and how many of them have a plot


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    print(f"{'report render':34s} {'median':>8s} {'fastest':>8s} {'size':>8s}  target")
    with tempfile.TemporaryDirectory(prefix="bench_report_") as tmp:
        for n_duts in (1, 25):
            duts = [ExampleDut(name=f"bay{i}", serial=f"S{i}") for i in range(n_duts)]
            rec = write_example_run(tmp, f"report-{n_duts}",
                                    ExampleRun(duts=duts, extra_checks=CHECKS // n_duts - OWN_CHECKS))
            checks = sum(len(t["verdicts"]) for t in rec.data["tests"])
            took = []
            for _ in range(args.repeat):
                start = time.perf_counter()
                path = render_run(rec.run_dir)
                took.append(time.perf_counter() - start)
            median = statistics.median(took)
            what = f"{checks:,} checks, {OWN_PLOTS * n_duts} plots"
            print(f"{what:34s} {median:7.2f}s {min(took):7.2f}s {path.stat().st_size / 1e6:6.1f}MB  "
                  f"<= {TARGET_S:.0f} s: {against(median, TARGET_S, at_most=True)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
