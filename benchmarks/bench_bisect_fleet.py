"""`bench bisect` end to end on the emulated fleet: a 32-build catalogue, real installs, real A/B
steps through the instruments and the station clock, as a lab runs it.

Issue 51's target: with one culprit that slows NPU work 6 % on one model only, `bench bisect`
names it in at most log2(32) + 2 = 7 A/B steps, with its effect on that model and no culprit on
the others; a range with no change says so in one step; both within the lab minutes that
benchmarks/bench_bisect.py states for its simulated fleet with the four default gates (one
culprit: 83 lab minutes, 69-102 over 93 bisections; no change: 14, 14-16; docs/ab-and-bisect.md).

    python benchmarks/bench_bisect_fleet.py [--culprit 20] [--model MT6989] [--seed N]
    python benchmarks/bench_bisect_fleet.py --no-culprit

Runs the `bench` command itself (a process of its own, the default emulated fleet: four phones of
three models), prints its report, then the figures against the targets; exits 1 when one is missed.
Wall time on two cores: 15-20 minutes with a culprit, 4-5 without.
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from phonebench.emulation.catalogue_factory import write_catalogue  # noqa: E402

BUILDS = 32
MAX_STEPS = int(math.log2(BUILDS)) + 2
# bench_bisect.py's simulated ranges (docs/ab-and-bisect.md, "Measured", table 2)
LAB_MINUTES = {"culprit": (69.0, 102.0), "none": (14.0, 16.0)}
MODEL_OF_SOC = {"MT6989": "PB-Emu Dimensity 9300", "SM8650": "PB-Emu Snapdragon 8 Gen 3",
                "MT6991": "PB-Emu Dimensity 9400"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--culprit", type=int, default=20, help="the culprit's position, 1..31 (0 is the good build)")
    parser.add_argument("--model", default="MT6989", choices=sorted(MODEL_OF_SOC), help="the SoC it slows")
    parser.add_argument("--no-culprit", action="store_true", help="a range with no change")
    parser.add_argument("--seed", type=int, default=20261206)
    parser.add_argument("--folder", type=Path, help="keep the catalogue and the results here")
    args = parser.parse_args()
    folder = args.folder or Path(tempfile.mkdtemp(prefix="phonebench-bisect-fleet-"))
    culprits = {} if args.no_culprit else {args.culprit: {"npu_time": 1.06, "models": [args.model]}}
    catalogue = write_catalogue(folder / "catalogue", n_builds=BUILDS, culprits=culprits)
    good, bad = "3.6.0-dev.001", f"3.6.0-dev.{BUILDS:03d}"
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "phonebench.bench.cli", "bisect", "--good", good, "--bad", bad,
                           "--catalogue", str(catalogue), "--seed", str(args.seed),
                           "--results-dir", str(folder / "results")], text=True, capture_output=True)
    wall_s = time.monotonic() - t0
    print(proc.stdout, end="")
    found = sorted((folder / "results").glob("bisect-*/bisect.json"))
    if not found:
        print(proc.stderr, end="", file=sys.stderr)
        print(f"bench bisect wrote no result (exit {proc.returncode})", file=sys.stderr)
        return 1
    result = json.loads(found[-1].read_text())
    named = {model: [c["build"] for c in entry["culprits"]] for model, entry in result["models"].items()}
    expected = {model: [] for model in named}
    if not args.no_culprit:
        expected[MODEL_OF_SOC[args.model]] = [f"3.6.0-dev.{args.culprit + 1:03d}"]
    steps, minutes = len(result["steps"]), float(result["lab_minutes"])
    low, high = LAB_MINUTES["none" if args.no_culprit else "culprit"]
    checks = {
        f"culprits named {named}, planted {expected}": named == expected,
        f"{steps} A/B steps (at most {1 if args.no_culprit else MAX_STEPS})": steps <= (1 if args.no_culprit else MAX_STEPS),
        f"{minutes:.1f} lab minutes (simulated fleet: {low:g}-{high:g})": minutes <= high,
        f"exit {proc.returncode} ({0 if args.no_culprit else 1} expected)": proc.returncode == (0 if args.no_culprit else 1),
    }
    print(f"\n32-build catalogue, {'no change' if args.no_culprit else f'culprit at {args.culprit} on {args.model}'}, "
          f"seed {args.seed}: {wall_s / 60:.1f} wall minutes on this machine; results in {folder}")
    for text, ok in checks.items():
        print(f"  {'ok  ' if ok else 'MISS'} {text}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
