"""Coverage of the std upper bound at nominal 95 %, by a seeded Monte-Carlo over the emulated
runtime's per-token latency distributions (nominal, jittery, stall-heavy), old method vs new.

Each replication is one claim-4 measurement: `--runs` inferences of 15 decode steps handed to
`std_verdict` as a list of runs with independence "block" (what the default profile does). The
truth is the population std of the same generator from 6 M tokens. Methods: the chi-square bound
with the effective sample size (the old verdict), the studentized bootstrap over runs alone, and
the verdict's bound now (the largest of those two and the bulk + exponential-tail bound). Prints
coverage with its binomial standard error, and the time per verdict.

Usage: python benchmarks/bench_coverage.py [--reps 300] [--runs 1000]
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from latency_series import DISTRIBUTIONS, coverage  # noqa: E402  (tests/ is on sys.path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=300, help="Monte-Carlo replications per distribution")
    parser.add_argument("--runs", type=int, default=1000, help="inferences per replication (15 tokens each)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    se = math.sqrt(0.95 * 0.05 / args.reps)
    print(f"coverage of the 95 % upper std bound, {args.reps} seeded replications of {args.runs} runs x 15 tokens "
          f"(binomial standard error {se:.3f} at 0.95)")
    print(f"{'distribution':14s} {'chi-square (old)':>17s} {'bootstrap alone':>16s} {'verdict (new)':>14s} "
          f"{'ms / verdict':>13s}")
    for name in DISTRIBUTIONS:
        start = time.perf_counter()
        found = coverage(name, args.reps, args.runs, seed=args.seed)
        took = (time.perf_counter() - start) / args.reps
        print(f"{name:14s} {found['chi-square']:17.3f} {found['bootstrap']:16.3f} {found['verdict']:14.3f} "
              f"{1e3 * took:13.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
