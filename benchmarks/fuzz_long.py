"""Long fuzz tier (`make fuzz`): every parser of outside bytes (tests/fuzz_targets.py) on at least
10,000 generated inputs each, seeded. Prints, per parser, the examples run, how many were refused
with the parser's own error type, and any unhandled exception (the script then exits 1).

    python benchmarks/fuzz_long.py [--examples N] [--seed S] [--only SUBSTRING]
"""
from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from hypothesis import given, seed, settings  # noqa: E402

from fuzz_targets import FUZZ_PROFILE, TARGETS, Target  # noqa: E402


def fuzz(target: Target, examples: int, at_seed: int) -> tuple[int, int, float]:
    counts = {"run": 0, "refused": 0}

    @seed(at_seed)
    @settings(settings.get_profile(FUZZ_PROFILE), max_examples=examples)
    @given(target.strategy)
    def check(value: object) -> None:
        counts["run"] += 1
        try:
            target.call(value)
        except target.errors:
            counts["refused"] += 1

    t0 = time.perf_counter()
    check()
    return counts["run"], counts["refused"], time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--only", default="", help="only parsers whose name contains this")
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)  # refused inputs log warnings by design
    warnings.filterwarnings("ignore", category=RuntimeWarning)  # overflow in statistics of 1e308 samples
    failed = 0
    print(f"{'parser':45} {'examples':>9} {'refused':>9} {'seconds':>8}")
    for target in TARGETS:
        if args.only not in target.name:
            continue
        try:
            run, refused, seconds = fuzz(target, args.examples, args.seed)
        except Exception as exc:  # hypothesis re-raises the shrunk failing example
            failed += 1
            print(f"{target.name:45} UNHANDLED {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
            continue
        print(f"{target.name:45} {run:9d} {refused:9d} {seconds:8.1f}")
    print("zero unhandled exceptions" if not failed else f"{failed} parsers raised unhandled exceptions")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
