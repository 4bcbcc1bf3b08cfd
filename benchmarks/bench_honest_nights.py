"""Honest night pairs on the emulated fleet: the nightly compare's false alarms on nights that differ.

Does `bench compare` raise false alarms at no more than its stated rate on nights that really
differ (docs/nightly.md, "Honest nights")?

Each pair is two `bench run --sla-profile nightly` runs of the same build, each with its own noise
seed (as two real nights), compared by `bench compare`'s own code (compare_models, Holm over the
night's model-level comparisons, each entry's practical threshold). A false alarm is a night with
any model-level call other than "unchanged"; the stricter count is a night with any Holm-significant
difference whatever its size (what Holm bounds by 5 %). Prints per pair its seeds, how many
statistics differ and by how much, and its calls; then both counts with their Clopper-Pearson 95 %
upper bounds. Exit 1 when the false alarms are more than 5 % could explain (one-sided binomial p < 0.05).

The full default fleet's full nightly is about an hour of station time per night, so by default
each night runs the gates that need no warm-up (RUNTIME_GATES: claims 3-6, 12, 14; about 7.5 station
minutes a phone, 5-7 wall minutes a night on two cores); `--full` runs the whole nightly, `-k` and
`--dut` choose another selection:

    python benchmarks/bench_honest_nights.py [--pairs 10] [--full | -k EXPR] [--dut EMU0001 ...]
                                             [--station FILE] [--seed-base N] [--results-dir DIR]
"""
from __future__ import annotations

import argparse
import json
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from phonebench.bench.cli.compare import thresholds_of  # noqa: E402
from phonebench.bench.results.compare import ALPHA, NOT_CALLED, UNCHANGED, compare_models  # noqa: E402

PROFILE = "nightly"
RUNTIME_GATES = "first_token or token_latency or spot_check or counters or sustained_and_peak"


def night(args: argparse.Namespace, run_id: str, seed: int) -> dict:
    """One emulated night: its results.json (the run must end complete)."""
    argv = [sys.executable, "-m", "phonebench.bench.cli", "run", "--sla-profile", PROFILE, "--seed", str(seed),
            "--run-id", run_id, "--results-dir", str(args.results_dir), "-q", "--no-preflight"]
    argv += ["--station", args.station] if args.station else []
    argv += [a for d in args.dut for a in ("--dut", d)] + (["-k", args.keyword] if args.keyword else [])
    results = Path(args.results_dir) / run_id / "results.json"
    if results.parent.exists():
        raise SystemExit(f"{results.parent} exists: a night is run once (move it away, or --start after it)")
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True)
    if not results.exists():
        raise SystemExit(f"{run_id}: no record (exit {done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    data = json.loads(results.read_text())
    print(f"  {run_id}: seed {seed}, exit {done.returncode}, {data['status']}, {len(data['tests'])} tests, "
          f"{(time.monotonic() - started) / 60:.1f} min", flush=True)
    if data["station"].get("seed") != seed:
        raise SystemExit(f"{run_id}: the record says seed {data['station'].get('seed')}, not {seed}")
    return data


def upper_95(k: int, n: int) -> float:
    return 1.0 if k >= n else float(stats.beta.ppf(0.95, k + 1, n - k))


class Tally:
    """What the pairs showed so far: nights with a false alarm, with a significant difference, and
    each called comparison's change in units of its stated s.e. (z: about N(0, 1) when the stated
    uncertainties are honest; smaller when they are generous)."""

    def __init__(self) -> None:
        self.pairs = self.alarms = self.significant = 0
        self.z: list[float] = []

    def add(self, number: int, first: dict, second: dict, thresholds: dict[str, float]) -> None:
        result = compare_models(second, {None: first}, thresholds)
        called = [c for c in result.comparisons if c.phone is None and c.p is not None]
        raised = [c for c in called if c.call not in (UNCHANGED, NOT_CALLED)]
        real = [c for c in called if c.p_holm is not None and c.p_holm < ALPHA]
        diffs = sorted(abs(c.relative) for c in result.comparisons if c.phone is None and c.relative is not None)
        z = [c.difference / c.se for c in called if c.se]
        self.pairs, self.alarms, self.significant = self.pairs + 1, self.alarms + bool(raised), self.significant + bool(real)
        self.z += z
        equal = sum(d < 5e-6 for d in diffs)  # equal to five digits: the same night replayed
        print(f"pair {number} (seeds {first['station'].get('seed')}, {second['station'].get('seed')}): {len(called)} "
              f"model-level comparisons called; statistics differ by a median {100 * diffs[len(diffs) // 2]:.2f} % "
              f"(largest {100 * diffs[-1]:.2f} %), {equal} of {len(diffs)} equal to five digits; |z| at most "
              f"{max(map(abs, z), default=0):.2f}; smallest Holm p "
              f"{min((c.p_holm for c in called if c.p_holm is not None), default=1):.3g}; calls: "
              f"{', '.join(f'{c.metric} on {c.model} {c.call} {100 * (c.relative or 0):+.1f} %' for c in raised) or 'none'}",
              flush=True)

    def verdict(self) -> int:
        n, z = self.pairs, np.array(self.z)
        print(f"false alarms (a call other than unchanged): {self.alarms} of {n} honest pairs "
              f"(95 % upper bound {upper_95(self.alarms, n):.0%}; stated: at most {ALPHA:.0%} of nights)")
        print(f"Holm-significant differences of any size: {self.significant} of {n} (95 % upper bound "
              f"{upper_95(self.significant, n):.0%}; Holm bounds it by {ALPHA:.0%})")
        if z.size:
            print(f"change / stated s.e. over {z.size} comparisons: rms {np.sqrt(np.mean(z ** 2)):.2f}, "
                  f"|z| > 1.96 in {np.mean(np.abs(z) > 1.96):.1%} (honest: rms 1, 5 %)")
        too_many = stats.binom.sf(self.alarms - 1, n, ALPHA) < 0.05 if self.alarms else False
        return 1 if too_many else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("-k", "--keyword", default=RUNTIME_GATES, help="which tests (pytest -k; default: %(default)r)")
    parser.add_argument("--full", action="store_true", help="the whole nightly (every gate, hours a pair)")
    parser.add_argument("--dut", action="append", default=[], help="only this phone (repeatable)")
    parser.add_argument("--station", help="station file (default: the emulated default fleet)")
    parser.add_argument("--seed-base", type=int, help="pair i runs seeds BASE+2i and BASE+2i+1 (default: fresh seeds)")
    parser.add_argument("--results-dir", help="where the runs go (default: a temporary folder)")
    parser.add_argument("--read", action="store_true", help="run nothing: compare the pairs already in --results-dir")
    parser.add_argument("--start", type=int, default=1, help="run pairs START..PAIRS (more pairs into a folder)")
    args = parser.parse_args()
    args.results_dir = Path(args.results_dir or tempfile.mkdtemp(prefix="honest-nights-"))
    args.keyword = None if args.full else args.keyword
    thresholds = thresholds_of(PROFILE)
    tally = Tally()
    if args.read:
        for pair in range(1, args.pairs + 1):
            runs = [args.results_dir / f"honest-{pair}-{side}" / "results.json" for side in "ab"]
            if all(r.exists() for r in runs):
                tally.add(pair, *(json.loads(r.read_text()) for r in runs), thresholds)
        return tally.verdict()
    print(f"{args.pairs} honest night pairs, profile {PROFILE}, {args.station or 'the default fleet'}"
          f"{', phones ' + ', '.join(args.dut) if args.dut else ''}{', -k ' + repr(args.keyword) if args.keyword else ''}; "
          f"runs in {args.results_dir}", flush=True)
    for pair in range(args.start - 1, args.pairs):
        seeds = ((args.seed_base + 2 * pair, args.seed_base + 2 * pair + 1) if args.seed_base is not None
                 else (secrets.randbelow(1 << 32), secrets.randbelow(1 << 32)))
        first, second = (night(args, f"honest-{pair + 1}-{side}", seed) for side, seed in zip("ab", seeds))
        tally.add(pair + 1, first, second, thresholds)
    return tally.verdict()


if __name__ == "__main__":
    raise SystemExit(main())
