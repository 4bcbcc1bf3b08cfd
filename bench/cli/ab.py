"""`bench ab A B --catalogue PATH`: two catalogue builds A/B'd on the same phones, ABBA blocks,
each gate decided sequentially per phone model (docs/ab-and-bisect.md).

Exit codes: 0 no gate regressed; 1 a gate regressed on some model; 2 a bench error (a build that
cannot be installed: named with its kind, what was measured kept; a phone lost on the way); 4
usage (an unknown gate or model, --seed with real phones); 10 a phone another bench holds; 11 a
phone not reachable (docs/faults.md).
"""
from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from phonebench.core.errors import DeviceError, UsageError
from phonebench.core.exits import PHONE_BUSY, PHONES_UNREACHABLE
from phonebench.drivers.locks import PhoneBusy
from ..ab.gates import DEFAULT_METRICS, DIALOG_LENGTH, ENERGY_PER_DIALOG, GATES, gates_named
from ..ab.operating import stated_power, what_gates_detect
from ..ab.protocol import BuildUnusable
from ..ab.records import AbResult, Unit
from ..ab.report import ab_text, dialog_lines, length_beside, write_ab
from ..ab.run import LAST_LOOK, plan_for, run_ab
from ..ab.sequential import AbPlan
from ..ab.measure import StationBench
from ..ab.session import ab_bench, resolve_build, station_config
from ..catalogue.catalogue import load_catalogue
from ..results.compare import parse_threshold
from ..results.run_record import new_run_id
from . import Subcommands

log = logging.getLogger(__name__)


def add_common(p: argparse.ArgumentParser) -> None:
    """Options `bench ab` and `bench bisect` share."""
    p.add_argument("--catalogue", required=True, help="catalogue.toml, or the folder holding it (docs/builds.md)")
    p.add_argument("--station", help="station file (TOML); default: the embedded emulated fleet")
    p.add_argument("--dut", action="append", default=[], help="only this phone (repeatable; default: every phone)")
    p.add_argument("--metric", action="append", default=[],
                   help=f"a gate: {', '.join(GATES)} (repeatable; default: those of {', '.join(DEFAULT_METRICS)} "
                        "every bay has the instruments for)")
    p.add_argument("--model", action="append", default=[], help="only this phone model (repeatable)")
    p.add_argument("--threshold", default="3 %", help="the change that matters, relative (default: %(default)s)")
    p.add_argument("--max-blocks", type=int, default=LAST_LOOK,
                   help="ABBA blocks per phone at most (default: %(default)s; looks from the third)")
    p.add_argument("--seed", type=int, default=None,
                   help="noise seed of the emulated phones (default: a fresh one; recorded either way)")
    p.add_argument("--results-dir", help="where the result folder goes (default: the station's results folder)")


def register(subparsers: Subcommands) -> None:
    p = subparsers.add_parser("ab", help="A/B two catalogue builds on the same phones, each gate decided sequentially")
    p.add_argument("a", help="build A (the baseline), an id of the catalogue")
    p.add_argument("b", help="build B, an id of the catalogue")
    add_common(p)
    p.set_defaults(func=ab)


def ab(args: argparse.Namespace) -> int:
    catalogue = load_catalogue(args.catalogue)
    builds = (resolve_build(catalogue, args.a), resolve_build(catalogue, args.b))  # unknown: said before any phone
    config, seed = station_config(args.station, args.seed)
    folder = Path(args.results_dir or config.results_dir) / f"ab-{new_run_id()}"
    try:
        with ab_bench(config, catalogue=catalogue, duts=args.dut or None, metrics=asked_gates(args.metric),
                      results_dir=folder) as opened:
            say_left_out("ab", opened.left_out)
            return _ab_on(opened.bench, args, builds, opened.metrics, seed, folder)
    except DeviceError as exc:  # opening a phone: each phone's own failures later stop that phone only
        return phone_exit("ab", exc)


def _ab_on(bench: StationBench, args: argparse.Namespace, builds: tuple[str, str], metrics: tuple[str, ...],
           seed: int | None, folder: Path) -> int:
    models = models_of(bench.units(), args.model)
    plan = plan_for(metrics, models, threshold=parse_threshold(args.threshold), last=args.max_blocks)
    print(f"bench ab: {builds[0]} vs {builds[1]} on {', '.join(u.name for u in bench.units() if u.model in models)}"
          f" (seed {'none: real phones' if seed is None else seed}): {plan.describe()}")
    print(f"  each comparison's false alarm <= {plan.alpha / plan.family:.2%}; results: {folder}")
    state_power(plan, metrics, [sum(u.model == m for u in bench.units()) for m in models], seed)

    def look(result: AbResult, block: int) -> None:
        write_ab(result, folder)  # after every block: a failure later loses nothing measured
        print(f"  block {block}: {sum(g.settled for g in result.gates)} of {len(result.gates)} gates settled, "
              f"{result.lab_minutes:.1f} lab min", flush=True)

    try:
        result = run_ab(bench, builds[0], builds[1], metrics=metrics, plan=plan, models=models, seed=seed,
                        on_look=look)
    except BuildUnusable as exc:
        if exc.partial is not None:
            write_ab(exc.partial, folder)
        print(f"bench ab: {exc} (what was measured: {folder})", file=sys.stderr)
        return 2
    beside = {(m, DIALOG_LENGTH): units for m, units in length_beside(result).items()}
    detects = what_gates_detect(plan, {**result.blocks(), **beside}, rng=np.random.default_rng(seed))
    write_ab(result, folder, {"detects": {f"{m}/{g}": v for (m, g), v in detects.items()},
                              "dialog_length_beside": {m: dialog_lines(result, m, detects.get((m, DIALOG_LENGTH)))
                                                       for m in result.models if (m, DIALOG_LENGTH) in beside}})
    print("\n".join(ab_text(result, detects)))
    if any(g.call == "regressed" for g in result.gates):
        return 1
    return 2 if result.stopped else 0  # a phone lost: what it measured is kept, but the A/B is not whole


def asked_gates(names: list[str] | None) -> tuple[str, ...] | None:
    """The gates named with --metric (an unknown one is a usage error, said before any phone), or
    None: the defaults the station's bays can measure (phonebench.bench.ab.gates.defaults_for)."""
    return tuple(g.metric for g in gates_named(names)) if names else None


def say_left_out(command: str, left_out: list[str]) -> None:
    for line in left_out:
        print(f"bench {command}: {line}", file=sys.stderr)


def phone_exit(command: str, exc: DeviceError) -> int:
    """A phone that could not be opened: held by another bench (10) or not reachable (11)."""
    print(f"bench {command}: {exc}", file=sys.stderr)
    return PHONE_BUSY if isinstance(exc, PhoneBusy) else PHONES_UNREACHABLE


def state_power(plan: AbPlan, metrics: Sequence[str], phones_per_model: list[int], seed: int | None) -> None:
    """What each gate detects in this plan, at the emulated fleet's measured spread (docs/ab-and-bisect.md)."""
    rng = np.random.default_rng(seed)
    for metric in metrics:
        for units in sorted(set(phones_per_model)):
            detects, power = stated_power(plan, GATES[metric].spread, units, rng=rng)
            print(f"  {metric}: detects {100 * detects:.1f} % with 95 % power, {100 * power:.0f} % power at "
                  f"{plan.threshold:.0%}, on a model of {units} phone(s) (at the emulated fleet's spread "
                  f"{100 * GATES[metric].spread:.2g} % a block)")
    if ENERGY_PER_DIALOG in metrics and DIALOG_LENGTH not in metrics:
        reach = ", ".join(f"{100 * stated_power(plan, GATES[DIALOG_LENGTH].spread, n, rng=rng)[0]:.0f} % on a model of "
                          f"{n} phone(s)" for n in sorted(set(phones_per_model)))
        print(f"  energy_per_dialog decides energy at a fixed dialog length (the first dialogs' window on each phone);"
              f" a change of dialog length is dialog_length's, shown beside it, not decided (it would detect "
              f"{reach}: --metric dialog_length)")


def models_of(units: Sequence[Unit], wanted: list[str]) -> list[str]:
    """The station's phone models, or the ones asked for (an unknown one is a usage error)."""
    present = list(dict.fromkeys(u.model for u in units))
    unknown = [m for m in wanted if m not in present]
    if unknown:
        raise UsageError(f"--model {', '.join(unknown)}: no phone of that model here; models: {', '.join(present)}")
    return wanted or present
