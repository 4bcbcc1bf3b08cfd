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

from phonebench.core.dburl import with_password
from phonebench.core.errors import ConfigError
from phonebench.core.station import load_station
from phonebench.fixtures.options import GivenRequest
from .request import DEFAULT_SUITES, add_request_args, from_cli
from ..results import labtime
from ..station.backend import phone_bays
from . import Subcommands

if TYPE_CHECKING:  # annotations only
    from phonebench.core.station import StationConfig
    from ..station.request import LabPlaces, RunRequest


def register(subparsers: Subcommands) -> None:
    p = subparsers.add_parser("plan", help="expected lab time per phone and the night's makespan, before a run")
    add_request_args(p)  # what `bench run` takes: the plan of that very run
    p.add_argument("--database", help="store URL or SQLite path (default: as `bench runs`)")
    p.add_argument("--json", action="store_true", help="the plan as JSON on stdout")
    p.set_defaults(func=plan)


def plan(args: argparse.Namespace) -> int:
    from .results import given_database

    return show_plan(from_cli(args, store=given_database(args.database) if args.database else None), as_json=args.json)


def show_plan(request: RunRequest, as_json: bool) -> int:
    """Print the plan of the run `request` asks for (`bench plan`, `bench run --plan`)."""
    result = build_plan(request)
    print(json.dumps(result, indent=1) if as_json else "\n".join(plan_lines(result)))
    return 0


class _Collected:
    """The tests pytest would run, with the phone each runs on (nothing is opened)."""

    def __init__(self) -> None:
        self.tests: list[tuple[str, str | None]] = []

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:
            callspec = getattr(item, "callspec", None)
            self.tests.append((item.nodeid, callspec.params.get("dut") if callspec else None))


def collect(request: RunRequest) -> list[tuple[str, str | None]]:
    """The tests `request` selects, each with its phone (a regression profile's run leaves the
    line checks out: so does its plan)."""
    grab = _Collected()
    with contextlib.redirect_stdout(io.StringIO()):  # pytest's collection listing is not the plan
        code = pytest.main(request.pytest_argv("--collect-only", "-qq"), plugins=[GivenRequest(request), grab])
    if code == pytest.ExitCode.INTERRUPTED:  # Ctrl-C during the collection is the user's, not a plan error
        raise KeyboardInterrupt
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        suites = " ".join(request.selection.suites) or str(DEFAULT_SUITES)
        raise ConfigError(f"could not collect the suites {suites} (pytest exit code {int(code)})",
                          hint="run `bench run` with the same selection to see why")
    return grab.tests


def _missing_sqlite(url: str) -> bool:
    return url.startswith("sqlite:///") and not Path(url[len("sqlite:///"):]).exists()


def phone_plans(request: RunRequest, station: StationConfig) -> list[labtime.PhonePlan]:
    """Each phone's planned lab time for the tests `request` selects on `station` (its station
    as named, nothing started), at its profile's sample sizes."""
    from ..store import open_store

    n_planned = {entry.metric: entry.n_required for entry in request.profile.load()}
    tests = collect(request)
    phones = list(dict.fromkeys(d for _, d in tests if d is not None))
    url = with_password(request.store, station.database)
    measured: dict[str, tuple[str | None, list[Any]]] = {dut: (None, []) for dut in phones}
    if not _missing_sqlite(url):  # planning never creates a store
        with open_store(url) as store:
            measured = {dut: store.lab_time_facts(dut) for dut in phones}
    plans = []
    for dut in phones:
        model, facts = measured[dut]
        keys = [labtime.test_key(nodeid, d) for nodeid, d in tests if d == dut]
        plans.append(labtime.plan_phone(dut, model, keys, labtime.rates_from_facts(facts), n_planned))
    return plans


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


def build_plan(request: RunRequest) -> dict[str, Any]:
    """The plan as data: each phone in the bay `bench run` tests it in (the emulated fleet has a
    bay per phone), the bays `request.jobs` at a time."""
    if request.station.places is not None:
        return build_places_plan(request, request.station.places)
    station = request.station.config()
    bay_of = phone_bays(station)
    wanted = request.selection.bays
    planned = [(bay_of.get(p.dut, p.dut), p) for p in phone_plans(request, station)]
    return {"station": station.name, **_assemble(request.profile.name,
                                                 [(bay, p) for bay, p in planned if not wanted or bay in wanted],
                                                 request.jobs)}


def build_places_plan(request: RunRequest, places: LabPlaces) -> dict[str, Any]:
    """The plan of `bench run --place NAME` / `--places PATTERN`: each place is a bay whose station
    is built from the resources its matches select, as the run builds it from the ones it
    acquires; the coordinator is only read (nothing is acquired, locked or opened). The places
    run at once, up to --jobs, as `bench run --places` starts them."""
    from ..lab.run import place_stations

    planned: list[tuple[str, labtime.PhonePlan]] = []
    with tempfile.TemporaryDirectory(prefix="bench-plan-") as folder:
        for place, path in place_stations(places, Path(folder)).items():
            planned += [(place, p) for p in phone_plans(request.at_station(path), load_station(path))]
    return {"station": f"labgrid places {places.selected}", "coordinator": places.coordinator,
            **_assemble(request.profile.name, planned, request.jobs)}


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
