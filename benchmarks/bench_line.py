"""Production line throughput on the emulated line: a batch of 20 phones (2 faulty) back to back
through one fixture, as `bench line` runs it, then the same batch through a station of two
fixtures sharing one scope (`bench line --fixtures 2`).

Figures: units per hour (wall clock, everything emulated in this process), the bench's own
overhead per unit (cycle time not spent waiting for the phone or an instrument; target <= 2 s),
first-pass yield, units per hour on the phone/instrument clock with 10 s handling per unit (the
takt; target >= 72 per fixture, >= 130 for two), projected for real phones and instruments (their
waits take the simulated time they stand for, the bench's work its measured time), the first
unit's bench overhead (target <= 10 s), and each acceptance check's budget against its measured
clock time. Exit 1 when any check's mean exceeds its budget (bench/procedures/acceptance/takt.py)
or a takt target is missed: the budgets are guards, not decoration.

    python benchmarks/bench_line.py [--count 20] [--faulty 2] [--fixtures 2]
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from phonebench.bench.procedures.acceptance.line import run_line, run_station  # noqa: E402
from phonebench.bench.procedures.acceptance.runner import AcceptanceStation  # noqa: E402
from phonebench.bench.procedures.calibration.runner import calibrate_station  # noqa: E402
from phonebench.bench.procedures.calibration.settings import CalibrationSettings  # noqa: E402
from phonebench.core.station import load_station  # noqa: E402
from phonebench.bench.procedures.acceptance.takt import BUDGETS, budget_total  # noqa: E402
from phonebench.emulation.line import EmulatedLine, plan_units  # noqa: E402

OVERHEAD_TARGET_S = 2.0
FIRST_UNIT_OVERHEAD_TARGET_S = 10.0
FIXTURE_TARGET_UPH = 72.0
STATION_TARGET_UPH = 130.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--faulty", type=int, default=2)
    parser.add_argument("--fixtures", type=int, default=2, help="fixtures of the station run (0: skip it)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-line-") as tmp:
        results = Path(tmp) / "reports"
        with EmulatedLine(count=args.count, faulty=args.faulty, seed=7) as line:
            station_file = line.write_station(Path(tmp) / "line.toml", results_dir=results)
            calibrate_station(load_station(station_file), None, CalibrationSettings())
            with AcceptanceStation(station_file, batch="bench") as station:
                run = run_line(line, station, "bench")
    f = run.figures()
    overheads = [u.result.overhead_s for u in run.units if u.result.overhead_s is not None]
    first = run.units[0].result.overhead_s or 0.0  # the station warmed at batch start: no first-scan penalty
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
        ("bench overhead of the first unit", f"{first:.2f} s",
         f"target <= {FIRST_UNIT_OVERHEAD_TARGET_S:g} s: {'met' if first <= FIRST_UNIT_OVERHEAD_TARGET_S else 'MISSED'}"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"emulated production line: {args.count} phones, {args.faulty} faulty, one fixture")
    for name, value, note in rows:
        print(f"  {name:<{width}}  {value:>16}  {note}")
    uph = f["units_per_hour_sim"]
    print(f"  {'units per hour, takt (sim clock)':<{width}}  {uph:>16.1f}  {f['handling_s']:g} s handling; "
          f"target >= {FIXTURE_TARGET_UPH:g}: {'met' if uph >= FIXTURE_TARGET_UPH else 'MISSED'}")
    print(f"  {'test time per good / faulty unit':<{width}}  "
          f"{f['test_per_good_unit_s']:>7.1f} / {f['test_per_faulty_unit_s']:<6.1f}  "
          f"budget {budget_total():.0f} s per good unit")
    for unit in run.units:
        if unit.result.outcome != "pass":
            print(f"  {unit.serial} {unit.result.outcome.upper()} after {unit.world_s - f['handling_s']:.1f} s: "
                  f"{unit.result.reason}")
    print("\n  time budget per check (phone/instrument clock, s per unit; measured over the batch)")
    print(f"    {'check':<16} {'budget':>7} {'mean':>7} {'max':>7} {'mean/budget':>12}")
    over = []
    for name, used in run.steps.items():
        budget = BUDGETS[name].budget_s if name in BUDGETS else None
        mean = statistics.fmean(used) if used else 0.0
        ratio = f"{mean / budget:.2f}" if budget else "-"
        if budget is not None and mean > budget:
            over.append(f"{name} {mean:.2f} s > {budget:g} s")
        print(f"    {name:<16} {budget if budget is not None else '-':>7} {mean:7.2f} {max(used, default=0):7.2f} "
              f"{ratio:>12}{'  OVER BUDGET' if budget is not None and mean > budget else ''}")
    missed = [f"{uph:.1f} units/hour per fixture < {FIXTURE_TARGET_UPH:g}"] if uph < FIXTURE_TARGET_UPH else []
    if first > FIRST_UNIT_OVERHEAD_TARGET_S:
        missed.append(f"first unit's overhead {first:.1f} s > {FIRST_UNIT_OVERHEAD_TARGET_S:g} s")
    if args.fixtures > 1:
        station_uph = station_run(args)
        if station_uph < STATION_TARGET_UPH:
            missed.append(f"{station_uph:.1f} units/hour for {args.fixtures} fixtures < {STATION_TARGET_UPH:g}")
    if over:  # a budget is a guard (docs/production.md): whoever changes a check runs this before stopping
        print(f"\nbench_line: {len(over)} check(s) over their budget: {'; '.join(over)}", file=sys.stderr)
    if missed:
        print(f"\nbench_line: takt target(s) missed: {'; '.join(missed)}", file=sys.stderr)
    return 1 if over or missed else 0


def station_run(args: argparse.Namespace) -> float:
    """The station of args.fixtures fixtures sharing one scope; returns its units per hour (sim clock)."""
    plan = plan_units(args.count, args.faulty, seed=7)
    with tempfile.TemporaryDirectory(prefix="bench-station-") as tmp, contextlib.ExitStack() as stack:
        fixtures = {}
        for i in range(args.fixtures):
            name = chr(ord("A") + i)
            line = stack.enter_context(EmulatedLine(units=plan[i::args.fixtures], seed=7 + i, name=f"line-{name}"))
            station_file = line.write_station(Path(tmp) / f"{name}.toml", results_dir=Path(tmp) / "reports")
            calibrate_station(load_station(station_file), None, CalibrationSettings())
            fixtures[name] = (line, stack.enter_context(AcceptanceStation(station_file, batch="bench")))
        run = run_station(fixtures, plan, "bench", shared=("scope",))
    f = run.figures()
    met = "met" if f["units_per_hour_sim"] >= STATION_TARGET_UPH else "MISSED"
    print(f"\nstation of {args.fixtures} fixtures sharing one scope: {f['units']} phones "
          f"({f['passed']} PASS / {f['failed']} FAIL, {'as planted' if f['as_expected'] else 'NOT as planted'})")
    for name, fig in f["per_fixture"].items():
        print(f"  fixture {name}: {fig['units']:2d} units  {fig['units_per_hour_sim']:6.1f} units/hour (sim clock)  "
              f"waited {fig['shared_wait_s']:.1f} s for the scope")
    print(f"  station: {f['units_per_hour_sim']:.1f} units/hour (target >= {STATION_TARGET_UPH:g}: {met}), "
          f"{f['world_s']:.0f} s of station clock, {f['wall_s']:.0f} s wall")
    for role, s in f["shared"].items():
        print(f"  shared {role}: busy {s['busy_s']:.0f} s ({100 * s['utilisation']:.0f} % of the station clock), "
              f"conflicts {s['conflicts']}")
    return float(f["units_per_hour_sim"])


if __name__ == "__main__":
    sys.exit(main())
