"""Coverage of the run-level verdicts (independence "run") at nominal 95 %, by a seeded
Monte-Carlo over latency series designed to break them: each run its own level, latencies drifting
together inside a run, heavy tails, drifts (tests/run_series.py). Claim 5's design: 20 runs.

For each distribution and verdict type (p95, std, mean upper bounds) prints the coverage (a
verdict without a bound is insufficient, never a pass, and counts as covering), the fraction of
replications decided, and the median bound / truth of those (how wide). The truth is the
population value of the mixture over runs, from 200 000 seeded runs.

Usage: python benchmarks/bench_run_coverage.py [--reps 2000] [--runs 20] [--tokens 40]
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from run_series import DISTRIBUTIONS, VERDICTS, coverage  # noqa: E402  (tests/ is on sys.path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000, help="Monte-Carlo replications per distribution")
    parser.add_argument("--runs", type=int, default=20, help="runs per verdict (claim 5: 20)")
    parser.add_argument("--tokens", type=int, default=40, help="token latencies per run")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    se = math.sqrt(0.95 * 0.05 / args.reps)
    print(f"coverage of 95 % upper bounds with independence 'run', {args.reps} seeded replications of "
          f"{args.runs} runs x {args.tokens} tokens (binomial standard error {se:.3f} at 0.95)")
    print(f"{'distribution':14s} " + " ".join(f"{v + ' cover':>10s} {'decided':>8s} {'width':>6s}" for v in VERDICTS))
    worst = 1.0
    for name in DISTRIBUTIONS:
        found = coverage(name, args.reps, args.runs, args.tokens, seed=args.seed)
        worst = min([worst] + [found[v]["coverage"] for v in VERDICTS])
        print(f"{name:14s} " + " ".join(f"{found[v]['coverage']:10.3f} {found[v]['decided']:8.2f} "
                                        f"{found[v]['width']:6.2f}" for v in VERDICTS))
    print(f"lowest coverage: {worst:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
