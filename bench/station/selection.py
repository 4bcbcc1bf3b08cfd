"""`bench run`'s selection checked before anything starts: a DUT, bay, persona or fault that does
not exist is one line naming what does (exit 4, docs/faults.md), not a collection traceback in
every suite, and no run folder is claimed for it."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pytest

from phonebench.core.errors import UsageError

if TYPE_CHECKING:  # annotations only
    from phonebench.core.station import StationConfig
    from .request import RunRequest, Selection


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

    def nothing_selected(self, selection: Selection) -> str:
        """The one line for a run that selected no test."""
        asked = " ".join(f"{flag} {value!r}" for flag, value in (
            ("-k", selection.keyword), ("-m", selection.marker), ("--dut", " ".join(selection.duts))) if value)
        if not self.tests:
            return f"bench run: no tests found in {' '.join(selection.suites) or 'the bench suites'}"
        return (f"bench run: {asked or 'the selection'} selected none of {len(self.tests)} tests; "
                f"tests: {', '.join(self.tests)}; markers (-m): {', '.join(sorted(self.markers)) or 'none'}")


NOT_SELECTABLE = {"parametrize", "usefixtures", "filterwarnings", "skip", "skipif", "xfail", "needs", "evidence"}


def check_selection(request: RunRequest, station: StationConfig | None = None) -> None:
    """Raise UsageError when --persona, --fault, --bay or --dut name nothing of the station
    (`station`: the request's as named, if the caller has parsed it)."""
    from .backend import emulated_bay_duts, emulated_choices, plan_station

    ref = request.station
    station = station or ref.config()  # ConfigError names a bad file
    where = f"{ref.file}" if ref.file is not None else "the emulated station"
    if (ref.persona or ref.faults) and station.emulated is None:
        raise UsageError(f"--persona and --fault make emulated phones misbehave; {ref.file} has real phones "
                         "(leave them out, or run without --station)")
    if ref.seed is not None and station.emulated is None:
        raise UsageError(f"--seed sets an emulated station's noise; {ref.file} has real phones (leave it out)")
    if ref.persona or ref.faults:
        personas, known_faults = emulated_choices()
        if ref.persona:
            _known("--persona", [ref.persona], personas, "a persona of the emulated phones")
        _known("--fault", [f for f in ref.faults if not f.startswith("kill-on:")], known_faults,
               "a fault of the emulated phones (or kill-on:COMMAND)")
    if request.selection.bays:
        # an emulated station: a bay per phone, or the rack's bays
        names = station.bay_names() if station.emulated is None else list(emulated_bay_duts(station.emulated))
        _known("--bay", request.selection.bays, names, f"a bay of {where}")
    if request.selection.duts:
        plan = plan_station(station)
        _known("--dut", request.selection.duts, [d.name for d in plan.duts], f"a DUT of station {plan.name!r}")
