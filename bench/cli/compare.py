"""The nightly's questions from the command line (docs/nightly.md):

  bench compare RUN --against RUN|BUILD|accepted   did tonight's build regress against a baseline?
  bench accept-build RUN [--model M]                 make a run the baseline of its phone models
  bench trend [--metric M] [--model M] [--html F]    each statistic per model across nights, change points
"""
from __future__ import annotations

import argparse
import datetime as dt
import getpass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from phonebench.core.errors import UsageError
from ..results.compare import ALPHA, DEFAULT_THRESHOLD, NOT_CALLED, Night, compare_models, parse_threshold
from ..ab.report import bisect_offer
from . import Subcommands

if TYPE_CHECKING:  # annotations only
    from ..store.store import Store

ACCEPTED = "accepted"


def register(subparsers: Subcommands) -> None:
    from .results import _store_args

    p = subparsers.add_parser("compare", help="a run's statistics against a baseline's, per claim and phone model")
    p.add_argument("run", help='tonight\'s run id ("latest": the newest run)')
    p.add_argument("--against", required=True, metavar="RUN|BUILD|accepted",
                   help="a baseline run id; a runtime build (its newest complete run); or `accepted`: each "
                        "phone model's accepted baseline (bench accept-build)")
    p.add_argument("--sla-profile", default="default", help="where each statistic's practical threshold is stated")
    p.add_argument("--phones", action="store_true", help="list the phone-by-phone comparisons too")
    p.add_argument("--all", action="store_true", help="list the statistics that state no uncertainty too (not called)")
    _store_args(p)
    p.set_defaults(func=compare)

    p = subparsers.add_parser("accept-build", help="accept a complete run's build as its phone models' baseline")
    p.add_argument("run", help='the run id ("latest": the newest run)')
    p.add_argument("--model", action="append", default=[], help="only this phone model (repeatable; default: all)")
    p.add_argument("--by", default=None, help="who accepts it (default: the user name)")
    p.add_argument("--note", default=None, help="why, for the record")
    _store_args(p)
    p.set_defaults(func=accept_build)

    p = subparsers.add_parser("trend", help="each statistic per phone model across nights, with change points")
    p.add_argument("--metric", action="append", default=[], help="only this statistic (repeatable)")
    p.add_argument("--model", action="append", default=[], help="only this phone model (repeatable)")
    p.add_argument("--days", type=int, default=None, help="only nights of the last N days")
    p.add_argument("--sla-profile", default="default", help="where each statistic's practical threshold is stated")
    p.add_argument("--html", metavar="FILE", help="also write the history page here")
    p.add_argument("--all", action="store_true", help="list every series, not only those with a change point")
    _store_args(p)
    p.set_defaults(func=trend)


def thresholds_of(profile_name: str) -> dict[str, float]:
    from ..specs.sla import load_profile

    profile = load_profile(profile_name)
    return {e.metric: parse_threshold(e.parameters["regression"]) for e in profile.entries.values()
            if "regression" in e.parameters}


def compare(args: argparse.Namespace) -> int:
    """Exit 0 when nothing regressed, 1 when something did (docs/nightly.md)."""
    from .results import _open

    with _open(args, reading=True) as store:
        tonight = store.load_run(args.run).data
        baselines, against = _baselines(store, tonight, args.against)
    night = compare_models(tonight, baselines, thresholds_of(args.sla_profile))
    print("\n".join(render(night, str(tonight.get("run_id")), against, args.phones, args.all)))
    return 1 if night.regressions else 0


def _baselines(store: Store, tonight: dict[str, Any], against: str) -> tuple[dict[str | None, dict[str, Any]], str]:
    """The baseline run of each model (None: all models), and how to name it."""
    from ..results.builds import run_models
    from ..store import StoreError
    from ..store.history import accepted_baselines, runs_of_build

    if against == ACCEPTED:
        accepted = accepted_baselines(store)
        models = run_models(tonight)
        missing = sorted(m for m in models if m not in accepted)
        if len(missing) == len(models):
            raise UsageError(f"no accepted baseline for {', '.join(missing) or 'any model'}: "
                             "accept a run first with `bench accept-build RUN`")
        for m in missing:
            print(f"bench compare: no accepted baseline for {m}: its phones are not compared")
        present = sorted(m for m in models if m in accepted)
        baselines: dict[str | None, dict[str, Any]] = {m: store.load_run(accepted[m].run_id).data for m in present}
        return baselines, "accepted (" + ", ".join(f"{m}: {accepted[m].run_id}" for m in present) + ")"
    try:
        return {None: store.load_run(against).data}, against
    except StoreError:
        pass
    builds = {m: [r for r in runs_of_build(store, against, m) if r != tonight.get("run_id")]
              for m in run_models(tonight)}
    found = {m: runs[0] for m, runs in builds.items() if runs}
    if not found:
        raise UsageError(f"{against!r} is neither a stored run nor a build any complete run's phones of "
                         f"{', '.join(sorted(run_models(tonight))) or 'these models'} ran (`bench runs` lists runs; a "
                         "build is a runtime version string)")
    by_model: dict[str | None, dict[str, Any]] = {m: store.load_run(r).data for m, r in found.items()}
    return (by_model,
            f"build {against} (" + ", ".join(f"{m}: run {r}" for m, r in sorted(found.items())) + ")")


def accept_build(args: argparse.Namespace) -> int:
    from .results import _open
    from ..store.history import accept_build as accept

    with _open(args) as store:
        made = accept(store, args.run, args.model, by=args.by or getpass.getuser(), note=args.note)
    for a in made:
        print(f"accepted: {a.model} baseline is run {a.run_id} (build {a.build or 'unknown'})")
    return 0


def trend(args: argparse.Namespace) -> int:
    """Exit 0 when no series' latest change is a regression, 1 when one is."""
    from .results import _open
    from ..report.trend_page import render_page
    from ..results.trend import find_changes, series_of
    from ..store.history import history

    since = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) - dt.timedelta(days=args.days) if args.days else None
    with _open(args, reading=True) as store:
        points = history(store, args.metric, args.model, since=since)
    thresholds = thresholds_of(args.sla_profile)
    all_series = series_of(points)
    for s in all_series:
        find_changes(s, thresholds.get(s.metric.split(" (")[0], DEFAULT_THRESHOLD))  # the label's name part
    print("\n".join(render_trend(all_series, args.all)))
    if args.html:
        Path(args.html).write_text(render_page(all_series, "phonebench: history per phone model",
                                               dt.datetime.now(dt.timezone.utc)))
        print(f"history page: {args.html}")
    return 1 if any(s.changes and s.changes[-1].call == "regressed" for s in all_series) else 0


def render_trend(all_series: list, show_all: bool = False) -> list[str]:
    lines = [f"{len(all_series)} series (statistic × phone model); change points at {ALPHA:.0%} (Bonferroni per "
             "series) and at least each entry's practical threshold"]
    for s in all_series:
        if not s.changes and not show_all:
            continue
        lines.append(f"{s.claim or '-':>3}  {s.metric} on {s.model}: {len(s.nights)} nights, latest "
                     f"{s.nights[-1].value:.5g} {s.unit}" + ("" if s.changes else ", no change point"))
        for c in s.changes:
            lines.append(f"       {c.call} {100 * (c.relative or 0):+.1f} % ({c.mean_before:.5g} → {c.mean_after:.5g}"
                         f" {s.unit}, p {c.p:.2g}) at night {c.index + 1}: {c.build_range}")
            offer = bisect_offer(s.metric, s.model, c.before.builds, c.after.builds)
            if offer:
                lines.append(f"         which build? {offer}")
    changed = sum(bool(s.changes) for s in all_series)
    lines.append(f"{changed} series with a change point")
    return lines


def render(night: Night, run: str, against: str, phones: bool = False, show_all: bool = False) -> list[str]:
    lines = [f"{run} against {against}: any false alarm among the {sum(c.phone is None and c.p is not None for c in night.comparisons)}"
             f" model-level comparisons at most {ALPHA:.0%} (Holm)",
             f"{'claim':>5}  {'statistic':34} {'model':26} {'baseline':>12} {'tonight':>12} {'change':>8} "
             f"{'95 % CI of the change':>26} {'p (Holm)':>9}  call"]
    hidden = 0
    for c in night.comparisons:
        if c.phone is not None and not phones:
            continue
        if c.call == NOT_CALLED and not show_all:
            hidden += c.phone is None
            continue
        interval = c.interval()
        ci = f"[{interval[0]:+.4g}, {interval[1]:+.4g}] {c.unit}" if interval else "no uncertainty stated"
        rel = f"{100 * c.relative:+.1f} %" if c.relative is not None else "-"
        p = f"{c.p_holm:.3g}" if c.p_holm is not None else "-"
        where = c.model if c.phone is None else f"  {c.phone}"
        lines.append(f"{c.claim or '-':>5}  {c.metric[:34]:34} {where[:26]:26} {c.baseline.value:12.5g} "
                     f"{c.tonight.value:12.5g} {rel:>8} {ci:>26} {p:>9}  {c.call}")
    if hidden:
        lines.append(f"({hidden} model-level statistics state no uncertainty and are not called: --all lists them)")
    regressed = night.regressions
    lines.append(f"{len(regressed)} regression(s)" + (": " + ", ".join(f"{c.metric} on {c.model}" for c in regressed)
                                                      if regressed else ""))
    return lines
