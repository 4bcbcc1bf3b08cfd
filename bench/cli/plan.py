"""`bench plan`: before anything runs, the expected lab time of each phone and the night's makespan
for the selected station or labgrid places, from the profile's sample sizes and the per-test lab
time the results store measured on each phone's model (documented defaults where it has none;
docs/labtime.md)."""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..lab.run import add_place_args
from ..results import labtime
from phonebench.core.errors import ConfigError
from phonebench.core.paths import data_dir
from . import Subcommands

if TYPE_CHECKING:  # annotations only
    from phonebench.core.station import StationConfig

DEFAULT_SUITES = data_dir("suites")  # bench run's default too: `bench run --plan` imports this module


def register(subparsers: Subcommands) -> None:
    p = subparsers.add_parser("plan", help="expected lab time per phone and the night's makespan, before a run")
    p.add_argument("suites", nargs="*", help=f"test files or folders (default: {DEFAULT_SUITES})")
    p.add_argument("--station", help="station file (TOML); default: the embedded emulated station")
    p.add_argument("--dut", action="append", default=[], help="only this DUT (repeatable)")
    p.add_argument("-m", "--marker", help="only tests with this marker expression, e.g. regression")
    p.add_argument("-k", "--keyword", help="only tests matching this pytest -k expression")
    p.add_argument("--sla-profile", help="SLA profile whose sample sizes to plan for (default: the station's)")
    p.add_argument("--jobs", type=int, help="bays (or places) tested at once (default: all of them)")
    p.add_argument("--database", help="store URL or SQLite path (default: as `bench runs`)")
    p.add_argument("--results-dir", help="results folder (default: the station's, ./reports)")
    p.add_argument("--json", action="store_true", help="the plan as JSON on stdout")
    add_place_args(p, waiting=False)
    p.set_defaults(func=plan)


class _Collected:
    """The tests pytest would run, with the phone each runs on (nothing is opened)."""

    def __init__(self) -> None:
        self.tests: list[tuple[str, str | None]] = []

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:
            callspec = getattr(item, "callspec", None)
            self.tests.append((item.nodeid, callspec.params.get("dut") if callspec else None))


def collect(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    suites = args.suites or [str(DEFAULT_SUITES)]
    argv = [*suites, "-p", "phonebench", "--rootdir", str(DEFAULT_SUITES.parent), "-p", "no:cacheprovider",
            "-p", "no:labgrid", "--collect-only", "-qq"]
    if args.station:
        argv += ["--station", args.station]
    if args.sla_profile:  # a regression profile's run leaves the line checks out: so does its plan
        argv += ["--sla-profile", args.sla_profile]
    for name in args.dut:
        argv += ["--dut", name]
    for flag, value in (("-m", args.marker), ("-k", args.keyword)):
        if value:
            argv += [flag, value]
    grab = _Collected()
    with contextlib.redirect_stdout(io.StringIO()):  # pytest's collection listing is not the plan
        code = pytest.main(argv, plugins=[grab])
    if code == pytest.ExitCode.INTERRUPTED:  # Ctrl-C during the collection is the user's, not a plan error
        raise KeyboardInterrupt
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        raise ConfigError(f"could not collect the suites {' '.join(suites)} (pytest exit code {int(code)})",
                          hint="run `bench run` with the same selection to see why")
    return grab.tests


def _bays(station: StationConfig | None, duts: list[str]) -> dict[str, str]:
    """Which bay each phone is tested in; one bay for a station without bays (its phones in turn)."""
    if station is not None and station.bays:
        return {d: b.name for b in station.bays for d in b.duts}
    return {d: "station" for d in duts}


def _missing_sqlite(url: str) -> bool:
    return url.startswith("sqlite:///") and not Path(url[len("sqlite:///"):]).exists()


def phone_plans(args: argparse.Namespace, station_path: str | None,
                 results_dir: str | None) -> tuple[str, list[labtime.PhonePlan]]:
    """The profile's name and each phone's planned lab time, for the tests `args` selects on the
    station file `station_path` (the embedded emulated station when None)."""
    from .results import database_url
    from phonebench.core.station import load_station
    from ..specs.sla import load_profile
    from ..store import open_store

    station = load_station(station_path) if station_path else None
    profile_name = args.sla_profile or (station.sla_profile if station else "default")
    search = (station.source.parent,) if station is not None and station.source else ()
    profile = load_profile(profile_name, search=search)
    n_planned = {entry.metric: entry.n_required for entry in profile}
    tests = collect(argparse.Namespace(**{**vars(args), "station": station_path}))
    phones = list(dict.fromkeys(d for _, d in tests if d is not None))
    url = database_url(argparse.Namespace(database=args.database, station=station_path, results_dir=results_dir))
    measured: dict[str, tuple[str | None, list[Any]]] = {dut: (None, []) for dut in phones}
    if not _missing_sqlite(url):  # planning never creates a store
        with open_store(url) as store:
            measured = {dut: store.lab_time_facts(dut) for dut in phones}
    plans = []
    for dut in phones:
        model, facts = measured[dut]
        keys = [labtime.test_key(nodeid, d) for nodeid, d in tests if d == dut]
        plans.append(labtime.plan_phone(dut, model, keys, labtime.rates_from_facts(facts), n_planned))
    return profile.name, plans


def _assemble(profile: str, planned: list[tuple[str, labtime.PhonePlan]], jobs: int | None) -> dict[str, Any]:
    """The plan as data: each phone with its bay, and the makespan of the bays `jobs` at a time
    (each bay one phone at a time)."""
    per_bay: dict[str, float] = {}
    for bay, p in planned:
        per_bay[bay] = per_bay.get(bay, 0.0) + p.lab_time_s
    slots = max(1, min(jobs or len(per_bay), len(per_bay) or 1))
    return {"profile": profile, "bays_at_once": slots,
            "bays": [{"bay": bay, "lab_time_s": round(seconds, 1)} for bay, seconds in per_bay.items()],
            "phones": [{"dut": p.dut, "bay": bay, "model": p.model, "lab_time_s": round(p.lab_time_s, 1),
                        "tests": [{"test": t.key, "lab_time_s": round(t.lab_time_s, 1), "source": t.source}
                                  for t in p.tests]} for bay, p in planned],
            "makespan_s": round(labtime.makespan(per_bay.values(), slots), 1) if per_bay else 0.0}


def build_plan(args: argparse.Namespace) -> dict[str, Any]:
    if getattr(args, "place", None) or getattr(args, "places", None):
        return build_places_plan(args)
    from phonebench.core.station import load_station

    station = load_station(args.station) if args.station else None
    profile, plans = phone_plans(args, args.station, args.results_dir)
    bay_of = _bays(station, [p.dut for p in plans])
    return {"station": station.name if station else "emulated",
            **_assemble(profile, [(bay_of.get(p.dut, p.dut), p) for p in plans], args.jobs)}


def build_places_plan(args: argparse.Namespace) -> dict[str, Any]:
    """The plan of `bench run --place NAME` / `--places PATTERN`: each place is a bay whose station
    is built from the resources its matches select, as the run builds it from the ones it
    acquires; the coordinator is only read (nothing is acquired, locked or opened). The places
    run at once, up to --jobs, as `bench run --places` starts them."""
    from ..lab.run import place_stations

    results_dir = str(Path(args.results_dir or "reports").resolve())  # the store a place's run writes to
    planned: list[tuple[str, labtime.PhonePlan]] = []
    profiles: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="bench-plan-") as folder:
        for place, path in place_stations(args, Path(folder)).items():
            profile, plans = phone_plans(args, str(path), results_dir)
            profiles.add(profile)
            planned += [(place, p) for p in plans]
    return {"station": f"labgrid places {args.places or args.place}", "coordinator": args.coordinator,
            **_assemble(", ".join(sorted(profiles)), planned, args.jobs)}


def plan_lines(plan: dict[str, Any]) -> list[str]:
    places = "coordinator" in plan
    where = f"{plan['station']} on coordinator {plan['coordinator']}" if places else f"station {plan['station']}"
    lines = [f"plan for {where} (profile {plan['profile']}), {len(plan['phones'])} phone(s), "
             f"{plan['bays_at_once']} {'place' if places else 'bay'}(s) at once"]
    for phone in plan["phones"]:
        lines.append(f"  {'place ' + phone['bay'] + ': ' if places else ''}{phone['dut']} "
                     f"({phone['model'] or 'model not in the store'}): {labtime.minutes(phone['lab_time_s'])} of lab time")
        for test in sorted(phone["tests"], key=lambda t: -t["lab_time_s"]):
            if test["lab_time_s"] >= 30:  # the seconds-long checks only clutter the plan
                lines.append(f"    {labtime.minutes(test['lab_time_s']):>10}  {test['test']}  [{test['source']}]")
    lines.append(f"makespan: {labtime.minutes(plan['makespan_s'])}")
    return lines


def plan(args: argparse.Namespace) -> int:
    result = build_plan(args)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print("\n".join(plan_lines(result)))
    return 0

