"""The nightly's questions from the command line (docs/nightly.md):

  bench compare RUN --against RUN|BUILD|accepted   did tonight's build regress against a baseline? With
                                                   the handover: each regression's build range and bisect
                                                   command, what each gate could see (--json: the same)
  bench accept-build RUN [--model M]                 make a run the baseline of its phone models
  bench trend [--metric M] [--model M] [--html F]    each statistic per model across nights, change points;
                                                   --html: the morning page, what moved first
"""
from __future__ import annotations

import argparse
import datetime as dt
import getpass
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from phonebench.core.errors import UsageError
from ..results.compare import ALPHA, DEFAULT_THRESHOLD, NOT_CALLED, Night, compare_models, parse_threshold
from ..results.compare_record import blind, handover, night_record
from ..results.detectable import POWER
from ..results.morning import RECENT
from . import Subcommands

if TYPE_CHECKING:  # annotations only
    from ..results.morning import Morning
    from ..results.trend import Series
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
    p.add_argument("--json", action="store_true",
                   help="the comparisons, the handover and the blind gates as JSON on stdout (docs/nightly.md)")
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
    p.add_argument("--html", metavar="FILE", help="also write the morning page here: what moved first (docs/results.md)")
    p.add_argument("--all", action="store_true", help="list every series, not only those with a change point")
    p.add_argument("--against", default=ACCEPTED, metavar="RUN|BUILD|accepted",
                   help="with --html: the baseline of tonight's calls, as for bench compare (default: accepted)")
    p.add_argument("--recent", type=int, default=RECENT, metavar="NIGHTS",
                   help=f"with --html: change points and bisect results of the last N nights lead (default {RECENT})")
    p.add_argument("--bisects", metavar="DIR", help="with --html: where bench bisect writes its results "
                                                    "(default: <results-dir>/bisect)")
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
    if args.json:
        print(json.dumps(night_record(night, str(tonight.get("run_id")), against).as_json(), indent=1))
    else:
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
    from ..report.render import write_atomically
    from ..report.trend_page import render_page, run_links
    from ..results.trend import find_changes, series_of
    from ..store.history import history

    since = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) - dt.timedelta(days=args.days) if args.days else None
    thresholds = thresholds_of(args.sla_profile)
    with _open(args, reading=True) as store:
        points = history(store, args.metric, args.model, since=since)
        all_series = series_of(points)
        for s in all_series:
            find_changes(s, thresholds.get(s.metric.split(" (")[0], DEFAULT_THRESHOLD))  # the label's name part
        if args.html:
            page = Path(args.html)
            morning = _morning(store, args, all_series, thresholds)
            links = run_links({r.run_id: r.run_dir for r in store.list_runs(limit=None)}, page)
    print("\n".join(render_trend(all_series, args.all)))
    if args.html:
        write_atomically(page, render_page(all_series, "phonebench: the morning page", dt.datetime.now(dt.timezone.utc),
                                           morning, links))
        print(f"morning page: {args.html} ({len(morning.calls)} call(s) tonight, {len(morning.changes)} recent "
              f"change point(s), {len(morning.bisects)} bisect result(s); {len(morning.unchanged)} series unchanged)")
    return 1 if any(s.changes and s.changes[-1].call == "regressed" for s in all_series) else 0


def _morning(store: Store, args: argparse.Namespace, all_series: list[Series], thresholds: dict[str, float]) -> Morning:
    """What the morning page leads with: tonight's calls against the baseline, the recent change
    points, and the bisect results of the page's statistics and models."""
    from .results import _results_dir
    from ..results.bisect_record import FOLDER, read_bisects
    from ..results.morning import assemble

    if args.recent < 1:
        raise UsageError(f"--recent {args.recent}: the window is at least one night")
    night, against, why = None, None, None
    tonight = max((s.nights[-1] for s in all_series if s.nights),
                  key=lambda n: (n.started or dt.datetime.min, n.run_id), default=None)
    if tonight is None:
        why = "no complete run in the store"
    else:
        data = store.load_run(tonight.run_id).data
        try:
            baselines, against = _baselines(store, data, args.against)
        except UsageError as exc:
            if args.against != ACCEPTED:
                raise
            why = f"{exc} (`bench accept-build RUN`)"
        else:
            night = compare_models(data, baselines, thresholds)
    found, problems = read_bisects(Path(args.bisects) if args.bisects else _results_dir(args) / FOLDER)
    wanted = [b for b in found if (not args.metric or b.metric.split(" (")[0] in args.metric)
              and (not args.model or b.model in args.model)]
    return assemble(all_series, night, against, why, wanted, problems, args.recent)


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
            if (command := c.builds.bisect(s.metric, s.model)) is not None:
                lines.append(f"         which build? {command}")
    changed = sum(bool(s.changes) for s in all_series)
    lines.append(f"{changed} series with a change point")
    return lines


def render(night: Night, run: str, against: str, phones: bool = False, show_all: bool = False) -> list[str]:
    lines = [f"{run} against {against}: any false alarm among the {night.family}"
             f" model-level comparisons at most {ALPHA:.0%} (Holm); detects: the change called with "
             f"{100 * POWER:.0f} % power",
             f"{'claim':>5}  {'statistic':34} {'model':26} {'baseline':>12} {'tonight':>12} {'change':>8} "
             f"{'95 % CI of the change':>26} {'p (Holm)':>9} {'detects':>8}  call"]
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
        sees = f"±{100 * c.detectable.detects:.1f} %" if c.detectable else "-"
        where = c.model if c.phone is None else f"  {c.phone}"
        lines.append(f"{c.claim or '-':>5}  {c.metric[:34]:34} {where[:26]:26} {c.baseline.value:12.5g} "
                     f"{c.tonight.value:12.5g} {rel:>8} {ci:>26} {p:>9} {sees:>8}  {c.call}")
    if hidden:
        lines.append(f"({hidden} model-level statistics state no uncertainty and are not called: --all lists them)")
    regressed = night.regressions
    lines.append(f"{len(regressed)} regression(s)" + (": " + ", ".join(f"{c.metric} on {c.model}" for c in regressed)
                                                      if regressed else ""))
    return lines + handover_lines(night) + blind_lines(night)


def handover_lines(night: Night) -> list[str]:
    """Each regression's build range and the command that searches it."""
    lines = []
    for h in map(handover, night.regressions):
        lines.append(f"  {h.metric} on {h.model} moved: {h.build_range}")
        lines.append(f"    {h.bisect}" if h.bisect else f"    nothing to bisect: {h.why_no_bisect}")
    return lines


def blind_lines(night: Night) -> list[str]:
    """The gates a change of their threshold's size passes unseen on most nights, and the A/B that would see it."""
    gates = [blind(c) for c in night.blind]
    if not gates:
        return []
    lines = [f"{len(gates)} gate(s) too coarse tonight for their threshold (a change of that size passes most "
             "nights unseen):"]
    for g in gates:
        ab = f"an A/B would: {g.ab}" if g.ab else f"an A/B needs two builds: {g.why_no_ab}"
        lines.append(f"  {g.metric} on {g.model}: could not see a {100 * g.threshold:g} % change (called on "
                     f"{100 * g.power_at_threshold:.0f} % of such nights; detects ±{100 * g.detects:.1f} %); {ab}")
    return lines
