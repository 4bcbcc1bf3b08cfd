"""What `bench compare` detects, and how often it cries wolf (seeded Monte-Carlo, docs/nightly.md).

A night is 8 statistics x 4 phone models, each measured with the relative standard error its
verdict states. Honest nights (no change) give the false-alarm rate: the share of nights with any
call other than "unchanged", which Holm's correction bounds by 5 %. Nights where one statistic of
one model moved by a planted regression give the power: the share where that comparison is called
"regressed". Printed per relative standard error and planted change, at the 5 % practical threshold.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from phonebench.bench.results.compare import REGRESSED, UNCHANGED, compare_runs  # noqa: E402

STATISTICS, MODELS, NIGHTS, Z95 = 8, 4, 400, 1.6448536


def _night(rng: np.random.Generator, rel_se: float, planted: float = 0.0) -> dict:
    tests = []
    for model in range(MODELS):
        verdicts = []
        for k in range(STATISTICS):
            truth = 100.0 * (1.0 + (planted if (model, k) == (0, 0) else 0.0))
            value = float(truth * (1.0 + rng.normal(0.0, rel_se)))
            verdicts.append({"name": f"s{k}", "value": value, "unit": "ms", "comparator": "<=",
                             "evidence": "measured", "bound": value + Z95 * rel_se * truth, "confidence": 0.95})
        tests.append({"dut": f"P{model}", "verdicts": verdicts})
    return {"tests": tests, "duts": {f"P{m}": {"product_model": f"M{m}"} for m in range(MODELS)}}


def main() -> int:
    rng = np.random.default_rng(2026)
    print(f"{STATISTICS} statistics x {MODELS} models a night, {NIGHTS} seeded nights per row, 5 % threshold")
    print(f"{'rel. s.e.':>9} {'false alarms':>13} " + " ".join(f"{f'power +{p:.0%}':>11}" for p in (0.08, 0.10, 0.15)))
    worst_false = 0.0
    for rel_se in (0.01, 0.02, 0.03):
        false = sum(bool([c for c in compare_runs(_night(rng, rel_se), _night(rng, rel_se)).comparisons
                          if c.phone is None and c.call != UNCHANGED]) for _ in range(NIGHTS)) / NIGHTS
        worst_false = max(worst_false, false)
        powers = []
        for planted in (0.08, 0.10, 0.15):
            hits = 0
            for _ in range(NIGHTS):
                night = compare_runs(_night(rng, rel_se, planted), _night(rng, rel_se))
                hits += any(c.phone is None and c.metric == "s0" and c.model == "M0" and c.call == REGRESSED
                            for c in night.comparisons)
            powers.append(hits / NIGHTS)
        print(f"{rel_se:9.0%} {false:13.1%} " + " ".join(f"{p:11.1%}" for p in powers))
    print("power >= 0.95 where the planted change is about 7-8 times the statistic's stated relative s.e.")
    return 0 if worst_false <= 0.08 else 1  # 5 % nominal, with the spread of 400 nights


if __name__ == "__main__":
    raise SystemExit(main())
