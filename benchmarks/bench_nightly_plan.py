"""The nightly's plan for a lab of 100 phones (4 models x 25, 10 hosts) from measured lab times.

Reads a measured nightly run (default: the newest `bench run --sla-profile nightly` under
./reports): each phone's lab time per test on the station clock. Each of the run's phones stands
for its model's 25 units (the default fleet has four phones; each is one model's template here),
each unit's time spread by its own draw of the run-to-run variation the store shows (2 % s.d.,
seeded). Units are scheduled longest-first onto the bays of 10 hosts (`bench plan`'s makespan, the
same code), for 10, 8 and 5 bays per host. Prints the per-phone lab time (target <= 50 min) and
the makespan (target <= 60 min) per layout.

    python benchmarks/bench_nightly_plan.py [RUN_DIR]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_nightly_gates import newest_nightly  # noqa: E402
from phonebench.bench.results import labtime  # noqa: E402

UNITS_PER_MODEL, HOSTS, SPREAD = 25, 10, 0.02
PHONE_TARGET_MIN, MAKESPAN_TARGET_MIN = 50.0, 60.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", nargs="?", help="a nightly run folder (default: the newest under ./reports)")
    args = parser.parse_args()
    folder = Path(args.run) if args.run else newest_nightly(Path("reports"))
    data = json.loads((folder / "results.json").read_text())
    per_phone = {dut: sum(labtime.per_test(data, dut).values()) for dut in data.get("duts") or {}}
    print(f"nightly run {folder.name}: lab time per phone on the station clock")
    worst = 0.0
    for dut, seconds in sorted(per_phone.items()):
        worst = max(worst, seconds / 60)
        print(f"  {dut}: {seconds / 60:.1f} min (target <= {PHONE_TARGET_MIN:g})")
    rng = np.random.default_rng(100)
    units = [s * (1 + rng.normal(0.0, SPREAD)) for s in per_phone.values() for _ in range(UNITS_PER_MODEL)]
    print(f"a lab of {len(units)} phones ({len(per_phone)} models x {UNITS_PER_MODEL}), {HOSTS} hosts:")
    ok = worst <= PHONE_TARGET_MIN
    for bays in (10, 8, 5):
        span = labtime.makespan(units, HOSTS * bays) / 60
        met = span <= MAKESPAN_TARGET_MIN
        ok &= met or bays < 10
        print(f"  {bays:2d} bays per host ({HOSTS * bays} at once): makespan {span:.1f} min "
              f"(target <= {MAKESPAN_TARGET_MIN:g}: {'met' if met else 'missed'})")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
