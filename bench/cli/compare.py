"""`bench compare RUN --against RUN`: did tonight's build regress against a baseline run?"""
from __future__ import annotations

import argparse

from ..results.compare import ALPHA, Night, compare_runs, parse_threshold
from . import Subcommands


def register(subparsers: Subcommands) -> None:
    from .results import _store_args

    p = subparsers.add_parser("compare", help="a run's statistics against a baseline run's, per claim and phone model")
    p.add_argument("run", help="tonight's run id")
    p.add_argument("--against", required=True, metavar="RUN", help="the baseline run id (the last accepted build's)")
    p.add_argument("--sla-profile", default="default", help="where each statistic's practical threshold is stated")
    p.add_argument("--phones", action="store_true", help="list the phone-by-phone comparisons too")
    _store_args(p)
    p.set_defaults(func=compare)


def compare(args: argparse.Namespace) -> int:
    """Exit 0 when nothing regressed, 1 when something did (docs/nightly.md)."""
    from .results import _open
    from ..specs.sla import load_profile

    with _open(args, reading=True) as store:
        tonight, baseline = store.load_run(args.run).data, store.load_run(args.against).data
    profile = load_profile(args.sla_profile)
    thresholds = {e.metric: parse_threshold(e.parameters["regression"]) for e in profile.entries.values()
                  if "regression" in e.parameters}
    night = compare_runs(tonight, baseline, thresholds)
    print("\n".join(render(night, args.run, args.against, args.phones)))
    return 1 if night.regressions else 0


def render(night: Night, run: str, against: str, phones: bool = False) -> list[str]:
    lines = [f"{run} against {against}: any false alarm among the {sum(c.phone is None and c.p is not None for c in night.comparisons)}"
             f" model-level comparisons at most {ALPHA:.0%} (Holm)",
             f"{'claim':>5}  {'statistic':34} {'model':26} {'baseline':>12} {'tonight':>12} {'change':>8} "
             f"{'95 % CI of the change':>26} {'p (Holm)':>9}  call"]
    for c in night.comparisons:
        if c.phone is not None and not phones:
            continue
        interval = c.interval()
        ci = f"[{interval[0]:+.4g}, {interval[1]:+.4g}] {c.unit}" if interval else "no uncertainty stated"
        rel = f"{100 * c.relative:+.1f} %" if c.relative is not None else "-"
        p = f"{c.p_holm:.3g}" if c.p_holm is not None else "-"
        where = c.model if c.phone is None else f"  {c.phone}"
        lines.append(f"{c.claim or '-':>5}  {c.metric[:34]:34} {where[:26]:26} {c.baseline.value:12.5g} "
                     f"{c.tonight.value:12.5g} {rel:>8} {ci:>26} {p:>9}  {c.call}")
    regressed = night.regressions
    lines.append(f"{len(regressed)} regression(s)" + (": " + ", ".join(f"{c.metric} on {c.model}" for c in regressed)
                                                      if regressed else ""))
    return lines
