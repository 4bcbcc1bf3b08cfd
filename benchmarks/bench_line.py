"""Production line throughput on the emulated line: a batch of 20 phones (2 faulty) back to back
through one fixture, as `bench line` runs it.

Figures: units per hour (wall clock, everything emulated in this process), the bench's own
overhead per unit (cycle time not spent waiting for the phone or an instrument; target <= 2 s),
first-pass yield, and units per hour projected for real phones and instruments (their waits take
the simulated time they stand for, the bench's work its measured time).

    python benchmarks/bench_line.py [--count 20] [--faulty 2]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.acceptance.line import run_line  # noqa: E402
from bench.acceptance.runner import AcceptanceStation  # noqa: E402
from bench.calibration.fixture import EmulatedFixture  # noqa: E402
from bench.calibration.runner import calibrate_station  # noqa: E402
from bench.calibration.settings import CalibrationSettings  # noqa: E402
from bench.core.station import load_station  # noqa: E402
from emulation.line import EmulatedLine  # noqa: E402

OVERHEAD_TARGET_S = 2.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--faulty", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-line-") as tmp:
        results = Path(tmp) / "reports"
        with EmulatedLine(count=args.count, faulty=args.faulty, seed=7) as line:
            station_file = line.write_station(Path(tmp) / "line.toml", results_dir=results)
            calibrate_station(load_station(station_file), EmulatedFixture(line.world), CalibrationSettings())
            with AcceptanceStation(station_file, batch="bench") as station:
                run = run_line(line, station, "bench")
    f = run.figures()
    overheads = [u.result.overhead_s for u in run.units if u.result.overhead_s is not None]
    met = "met" if statistics.fmean(overheads) <= OVERHEAD_TARGET_S else "MISSED"
    cycles = [u.result.cycle_s for u in run.units]
    rows = [
        ("units (PASS / FAIL / other)", f"{f['units']} ({f['passed']} / {f['failed']} / {f['other']})",
         "as planted" if f["as_expected"] else "NOT as planted"),
        ("first-pass yield", f"{100 * f['first_pass_yield']:.1f} %", f"{args.count - args.faulty} good units"),
        ("units per hour, emulated (wall)", f"{f['units_per_hour']:.0f}", f"batch took {f['wall_s']:.1f} s"),
        ("units per hour, real-time projection", f"{f['units_per_hour_real_time']:.0f}",
         f"{f['world_s']:.0f} s simulated phone/instrument time"),
        ("cycle time per unit (wall)", f"{statistics.fmean(cycles):.2f} s", f"max {max(cycles):.2f} s"),
        ("bench overhead per unit, mean", f"{statistics.fmean(overheads):.2f} s",
         f"target <= {OVERHEAD_TARGET_S:g} s: {met}"),
        ("bench overhead per unit, median / max", f"{statistics.median(overheads):.2f} / {max(overheads):.2f} s", ""),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"emulated production line: {args.count} phones, {args.faulty} faulty, one fixture")
    for name, value, note in rows:
        print(f"  {name:<{width}}  {value:>16}  {note}")
    for unit in run.units:
        if unit.result.outcome != "pass":
            print(f"  {unit.serial} {unit.result.outcome.upper()}: {unit.result.reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
