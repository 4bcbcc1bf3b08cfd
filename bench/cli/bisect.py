"""`bench bisect --good BUILD --bad BUILD --catalogue PATH`: which build of the catalogue's range
changed a gate, per phone model, with A/B steps on the same phones (docs/ab-and-bisect.md).

Exit codes: 0 no culprit in the range on any model; 1 a culprit named on some model; 2 a bench
error (the good or bad build cannot be installed; what was measured is kept); 4, 10, 11 as
`bench ab` (docs/faults.md).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from phonebench.core.errors import DeviceError
from ..ab.bisect import BisectResult, Step, bisect
from ..ab.protocol import BuildUnusable
from ..ab.records import AbResult
from ..ab.report import bisect_text, step_lines, write_bisect
from ..ab.run import ab_oracle, plan_for
from ..ab.measure import StationBench
from ..ab.session import ab_bench, resolve_build, station_config
from ..catalogue.catalogue import load_catalogue
from ..results.compare import parse_threshold
from ..results.run_record import new_run_id
from . import Subcommands
from .ab import add_common, asked_gates, models_of, phone_exit, say_left_out, state_power



def register(subparsers: Subcommands) -> None:
    p = subparsers.add_parser("bisect", help="find the catalogue build that changed a gate, with A/B steps")
    p.add_argument("--good", required=True, help="the last build known good (an id of the catalogue)")
    p.add_argument("--bad", required=True, help="the first build known bad")
    add_common(p)
    p.set_defaults(func=cmd_bisect)


def cmd_bisect(args: argparse.Namespace) -> int:
    catalogue = load_catalogue(args.catalogue)
    good, bad = resolve_build(catalogue, args.good), resolve_build(catalogue, args.bad)
    builds = tuple(b.id for b in catalogue.between(good, bad))
    config, seed = station_config(args.station, args.seed)
    folder = Path(args.results_dir or config.results_dir) / f"bisect-{new_run_id()}"
    try:
        with ab_bench(config, catalogue=catalogue, duts=args.dut or None, metrics=asked_gates(args.metric),
                      results_dir=folder) as opened:
            say_left_out("bisect", opened.left_out)
            record = BisectResult(builds[0], builds[-1], builds, opened.metrics)
            code = _bisect_on(opened.bench, args, record, seed, folder)
    except DeviceError as exc:  # opening a phone: each phone's own failures later stop that phone only
        return phone_exit("bisect", exc)
    if code is not None:
        return code
    print("\n".join(bisect_text(record)))
    return 1 if any(s.culprits for s in record.models.values()) else 0


def _bisect_on(bench: StationBench, args: argparse.Namespace, record: BisectResult, seed: int | None,
               folder: Path) -> int | None:
    """The search on the opened phones, `record` filled and saved as it goes; an exit code when it
    stops before the end."""
    models = models_of(bench.units(), args.model)
    print(f"bench bisect: {record.good} .. {record.bad} ({len(record.builds)} builds) on "
          f"{', '.join(u.name for u in bench.units() if u.model in models)} "
          f"(seed {'none: real phones' if seed is None else seed}); results: {folder}")
    threshold = parse_threshold(args.threshold)
    first = plan_for(record.metrics, models, threshold=threshold, last=args.max_blocks)
    print(f"  the range step: {first.describe()}")
    state_power(first, record.metrics, [sum(u.model == m for u in bench.units()) for m in models], seed)

    def save(**extra: object) -> None:  # after every block and step: nothing measured is lost
        write_bisect(record, folder, {"seed": seed, **extra})

    def look(ab: AbResult, block: int) -> None:
        save(running={"block": block, "ab": ab.to_dict()})
        print(f"    {ab.a} vs {ab.b}, block {block}: {sum(g.settled for g in ab.gates)} of {len(ab.gates)} "
              f"gates settled, {ab.lab_minutes:.1f} lab min", flush=True)

    def step_done(_: BisectResult, step: Step) -> None:
        save()
        print("\n".join(step_lines(step)), flush=True)

    oracle = ab_oracle(bench, threshold=threshold, last=args.max_blocks, seed=seed, on_look=look)
    try:
        bisect(record.builds, oracle, models=models, metrics=record.metrics, result=record, on_step=step_done)
    except BuildUnusable as exc:
        save(stopped=str(exc))
        print(f"bench bisect: {exc}: the range cannot be compared (what was measured: {folder})", file=sys.stderr)
        return 2
    save()
    return None
