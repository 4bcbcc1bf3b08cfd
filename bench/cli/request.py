"""The run request from the command line: the arguments `bench run` and `bench plan` share, and the
one `RunRequest` they make (phonebench.bench.station.request)."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..lab.run import add_place_args
from ..station.request import DEFAULT_SUITES, LabPlaces, RunRequest, Selection, StationRef, build_request


def add_request_args(p: argparse.ArgumentParser) -> None:
    """What a run is, on the command line of `bench run` and `bench plan` alike."""
    p.add_argument("suites", nargs="*", help=f"test files or folders (default: {DEFAULT_SUITES})")
    p.add_argument("--station", help="station file (TOML); default: the embedded emulated station")
    p.add_argument("--dut", action="append", default=[], help="only this DUT (repeatable)")
    p.add_argument("--bay", action="append", default=[], help="only this bay of a multi-bay station (repeatable)")
    p.add_argument("--bays", type=int, help="emulated station: a fleet of N bays (1-4) tested in parallel")
    p.add_argument("--jobs", type=int, help="bays (or places) tested at once (default: all of them)")
    p.add_argument("-m", "--marker", help="only tests with this marker expression, e.g. acceptance")
    p.add_argument("-k", "--keyword", help="only tests matching this pytest -k expression")
    p.add_argument("--sla-profile", help="SLA profile to judge against, e.g. nightly (default: the station's; "
                                         "sla_profiles/README.md)")
    p.add_argument("--results-dir", help="where the run folder goes (default: the station's, ./reports)")
    p.add_argument("--run-id", help="name of the run folder (a plain name; an id already used is refused)")
    from ..station.backend import emulated_choices

    personas, faults = emulated_choices()
    p.add_argument("--persona", metavar="NAME",
                   help=f"emulated station: SLA behaviour persona for every phone; one of {', '.join(personas)}")
    p.add_argument("--fault", action="append", default=[], metavar="NAME",
                   help=f"emulated station: inject a fault into every phone (repeatable); one of {', '.join(faults)}, "
                        "kill-on:COMMAND")
    p.add_argument("--seed", type=int, help="emulated station: the night's noise seed (default: a fresh one; the run "
                                            "record keeps it, so --seed replays that night)")
    add_place_args(p)


def from_cli(args: argparse.Namespace, store: str | None = None) -> RunRequest:
    """The request of `bench run` / `bench plan` (add_request_args); `store`: a store URL or SQLite
    path given on the command line (`bench plan --database`)."""
    places = None
    if args.place or args.places:
        places = LabPlaces(coordinator=args.coordinator, place=args.place, pattern=args.places, wait_s=args.place_wait)
    station = StationRef(file=Path(args.station) if args.station else None, places=places, bays=args.bays,
                         persona=args.persona, faults=tuple(args.fault), seed=args.seed)
    selection = Selection(suites=tuple(args.suites), duts=tuple(args.dut), bays=tuple(args.bay),
                          marker=args.marker, keyword=args.keyword)
    return build_request(station, selection, sla_profile=args.sla_profile, results_dir=args.results_dir,
                         run_id=args.run_id, store=store, jobs=args.jobs)
