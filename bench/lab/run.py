"""`bench run --place NAME` / `--places PATTERN`: a run on a labgrid place, or one per place. The
run request names the places; a place held yields the request on the station it makes, which the
`bench` command then runs (nothing here calls back up into it)."""
from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from phonebench.core.errors import ConfigError
from phonebench.core.files import safe_name, write_atomically
from phonebench.drivers.locks import ENV_WAIT as LOCK_WAIT_ENV
from .places import DEFAULT_WAIT_S, ENV_COORDINATOR, Lab
from .resources import station_toml

if TYPE_CHECKING:  # annotations only
    from ..station.request import LabPlaces, RunRequest


def add_place_args(p: argparse.ArgumentParser) -> None:
    """--place, --places, --coordinator, --place-wait (`bench plan` only reads the places)."""
    p.add_argument("--place", help="labgrid place to acquire and test (its bay's resources are the station)")
    p.add_argument("--places", help="every labgrid place matching this pattern, one run each, at once (up to --jobs)")
    p.add_argument("--coordinator", default=os.environ.get(ENV_COORDINATOR),
                   help=f"labgrid coordinator HOST:PORT (default: ${ENV_COORDINATOR})")
    p.add_argument("--place-wait", type=float, default=DEFAULT_WAIT_S,
                   help=f"seconds to wait for a place someone else holds (default {DEFAULT_WAIT_S:.0f})")


def _lab(places: LabPlaces) -> Lab:
    if not places.coordinator:
        raise ConfigError("--place needs a labgrid coordinator", hint=f"pass --coordinator HOST:PORT or set {ENV_COORDINATOR}")
    return Lab(places.coordinator)


@contextlib.contextmanager
def place_held(request: RunRequest, places: LabPlaces, lab: Lab | None = None) -> Iterator[RunRequest]:
    """While the place of `places` is held (acquired, or waited for as long as its wait), the run
    `request` asks for on the station its resources make; released after, also on SIGTERM."""
    lab = lab or _lab(places)
    previous = signal.signal(signal.SIGTERM, _interrupt)  # a stopped bench still releases its place
    try:
        with lab.held(str(places.place), places.wait_s) as resources, _lock_wait(places.wait_s):
            path = place_station_file(request.results.folder, str(places.place), station_toml(str(places.place), resources))
            yield request.at_station(path)
    finally:
        signal.signal(signal.SIGTERM, previous)


def place_stations(places: LabPlaces, folder: Path) -> dict[str, Path]:
    """The station file of each place `--place` / `--places` selects, written into `folder` from
    the resources its matches select, as a run builds it from the ones it acquires; nothing is
    acquired or opened (what `bench plan` reads)."""
    lab = _lab(places)
    return {place: place_station_file(folder, place, station_toml(place, lab.resources(place)))
            for place in lab.select(places.selected)}


def place_station_file(results_dir: Path, place: str, text: str) -> Path:
    """The place's station file, kept under <results>/places/: the run's record, the preflight's
    and the bench's messages name it, so it must outlive the run (a temporary file would not)."""
    path = results_dir / "places" / f"{safe_name(place)}.toml"
    write_atomically(path, text)  # WriteFailed names the folder and what to do
    return path


@contextlib.contextmanager
def _lock_wait(seconds: float) -> Iterator[None]:
    """Places sharing an instrument (a probe board, a mainframe) take turns on it: its lock is
    waited for as long as a place is (phonebench.drivers.locks reads the wait from the environment, as the
    bays of `bench run` do), unless the lab set its own."""
    if os.environ.get(LOCK_WAIT_ENV):
        yield
        return
    os.environ[LOCK_WAIT_ENV] = f"{seconds:g}"
    try:
        yield
    finally:
        os.environ.pop(LOCK_WAIT_ENV, None)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run_each_place(request: RunRequest, places: LabPlaces, lab: Lab | None = None) -> int:
    """One `bench run --place` per place matching `places.pattern`, up to --jobs at once (default:
    all); the worst exit code wins. Places sharing an instrument still run side by side: each takes
    it only for one use (docs/lab.md)."""
    lab = lab or _lab(places)
    selected = lab.select(str(places.pattern))
    at_once = max(1, min(request.jobs or len(selected), len(selected)))
    waiting = list(selected)
    running: dict[str, subprocess.Popen] = {}
    codes: dict[str, int] = {}
    while waiting or running:
        while waiting and len(running) < at_once:
            place = waiting.pop(0)
            running[place] = subprocess.Popen([sys.executable, "-m", "phonebench.bench.cli", "run",
                                               *_child_args(request, places), "--place", place])
        for place, proc in list(running.items()):
            if proc.poll() is not None:
                codes[place] = running.pop(place).returncode
        if running:
            time.sleep(0.2)
    for place in selected:
        print(f"place {place}: exit code {codes[place]}")
    return max(codes.values())


def _child_args(request: RunRequest, places: LabPlaces) -> list[str]:
    """This run's request, for each place's own `bench run` (the profile as it was found here)."""
    selection = request.selection
    out = ["--coordinator", str(places.coordinator), "--place-wait", f"{places.wait_s:g}", "-q",
           "--results-dir", str(request.results.folder), "--sla-profile", str(request.profile.path)]
    for flag, value in (("-m", selection.marker), ("-k", selection.keyword)):
        if value:
            out += [flag, value]
    for dut in selection.duts:
        out += ["--dut", dut]
    return [*out, *selection.suites]
