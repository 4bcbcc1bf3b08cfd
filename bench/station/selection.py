"""`bench run`'s selection checked before anything starts: a DUT, bay, persona or fault that does
not exist is one line naming what does (exit 4, docs/faults.md), not a collection traceback in
every suite, and no run folder is claimed for it."""
from __future__ import annotations

import argparse
from collections.abc import Sequence

import pytest

from phonebench.core.errors import UsageError


def _known(what: str, given: Sequence[str], known: Sequence[str], where: str) -> None:
    unknown = [g for g in given if g not in known]
    if unknown:
        raise UsageError(f"{what} {', '.join(unknown)}: not {where}; known: {', '.join(known) or 'none'}")


class Inventory:
    """A pytest plugin noting every collected test and marker before -k / -m deselect any, so that
    a selection of nothing can say what exists."""

    def __init__(self) -> None:
        self.tests: list[str] = []
        self.markers: set[str] = set()

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            name = getattr(item, "originalname", None) or item.name
            if name not in self.tests:
                self.tests.append(name)
            self.markers.update(m.name for m in item.iter_markers() if m.name not in NOT_SELECTABLE)

    def nothing_selected(self, args: argparse.Namespace) -> str:
        """The one line for a run that selected no test."""
        asked = " ".join(f"{flag} {value!r}" for flag, value in (("-k", args.keyword), ("-m", args.marker),
                                                                 ("--dut", " ".join(args.dut))) if value)
        if not self.tests:
            return f"bench run: no tests found in {' '.join(args.suites) or 'the bench suites'}"
        return (f"bench run: {asked or 'the selection'} selected none of {len(self.tests)} tests; "
                f"tests: {', '.join(self.tests)}; markers (-m): {', '.join(sorted(self.markers)) or 'none'}")


NOT_SELECTABLE = {"parametrize", "usefixtures", "filterwarnings", "skip", "skipif", "xfail", "needs", "evidence"}


def check_selection(args: argparse.Namespace) -> None:
    """Raise UsageError when --persona, --fault, --bay or --dut name nothing of the station."""
    from .backend import emulated_bay_duts, emulated_choices, emulated_fleet, plan_station
    from phonebench.core.station import EmulatedConfig, load_station

    faults = list(getattr(args, "fault", None) or [])
    persona = getattr(args, "persona", None)
    station = load_station(args.station) if args.station else None  # ConfigError names a bad file
    if (persona or faults) and station is not None and station.emulated is None:
        raise UsageError(f"--persona and --fault make emulated phones misbehave; {args.station} has real phones "
                         "(leave them out, or run without --station)")
    if persona or faults:
        personas, known_faults = emulated_choices()
        if persona:
            _known("--persona", [persona], personas, "a persona of the emulated phones")
        _known("--fault", [f for f in faults if not f.startswith("kill-on:")], known_faults,
               "a fault of the emulated phones (or kill-on:COMMAND)")
    emulated = None
    if getattr(args, "bays", None):
        emulated = EmulatedConfig(bays=args.bays)
    elif persona or faults:
        emulated = emulated_fleet(persona, faults)
    bays = list(getattr(args, "bay", None) or [])
    if bays:
        if station is not None and station.emulated is None:
            names = station.bay_names()
        else:  # an emulated station: a bay per phone, or the rack's bays
            names = list(emulated_bay_duts(emulated or (station.emulated if station else None) or EmulatedConfig()))
        _known("--bay", bays, names, f"a bay of {args.station}" if station is not None else "a bay of the emulated station")
    if args.dut:
        plan = plan_station(args.station, emulated=emulated)
        names = [d.name for d in plan.duts]
        _known("--dut", args.dut, names, f"a DUT of station {plan.name!r}")
