"""`bench run --place NAME` / `--places PATTERN`: a run on a labgrid place, or one per place."""
from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from phonebench.core.errors import ConfigError
from phonebench.core.files import safe_name, write_atomically
from phonebench.drivers.locks import ENV_WAIT as LOCK_WAIT_ENV
from .places import DEFAULT_WAIT_S, ENV_COORDINATOR, Lab
from .resources import station_toml


def add_place_args(p: argparse.ArgumentParser, waiting: bool = True) -> None:
    """--place, --places, --coordinator; and --place-wait where places are acquired (`bench plan`
    only reads them)."""
    p.add_argument("--place", help="labgrid place to acquire and test (its bay's resources are the station)")
    p.add_argument("--places", help="every labgrid place matching this pattern, one run each, at once (up to --jobs)")
    p.add_argument("--coordinator", default=os.environ.get(ENV_COORDINATOR),
                   help=f"labgrid coordinator HOST:PORT (default: ${ENV_COORDINATOR})")
    if waiting:
        p.add_argument("--place-wait", type=float, default=DEFAULT_WAIT_S,
                       help=f"seconds to wait for a place someone else holds (default {DEFAULT_WAIT_S:.0f})")


def _lab(args: argparse.Namespace) -> Lab:
    if not args.coordinator:
        raise ConfigError("--place needs a labgrid coordinator", hint=f"pass --coordinator HOST:PORT or set {ENV_COORDINATOR}")
    if args.station or getattr(args, "bays", None):
        raise ConfigError("--place builds the station from the place's resources; drop --station / --bays")
    return Lab(args.coordinator)


def run_on_places(args: argparse.Namespace, run_station: Callable[[argparse.Namespace], int]) -> int:
    lab = _lab(args)
    if args.places:
        return _each_place(args, lab)
    return _one_place(args, lab, run_station)


def _one_place(args: argparse.Namespace, lab: Lab, run_station: Callable[[argparse.Namespace], int]) -> int:
    previous = signal.signal(signal.SIGTERM, _interrupt)  # a stopped bench still releases its place
    try:
        with lab.held(args.place, args.place_wait) as resources, _lock_wait(args.place_wait):
            results_dir = Path(args.results_dir or "reports").resolve()
            path = place_station_file(results_dir, args.place, station_toml(args.place, resources))
            station_args = argparse.Namespace(**{**vars(args), "place": None, "places": None, "station": str(path),
                                                 "results_dir": str(results_dir)})
            return run_station(station_args)
    finally:
        signal.signal(signal.SIGTERM, previous)


def place_stations(args: argparse.Namespace, folder: Path) -> dict[str, Path]:
    """The station file of each place `--place` / `--places` selects, written into `folder` from
    the resources its matches select, as a run builds it from the ones it acquires; nothing is
    acquired or opened (what `bench plan` reads)."""
    lab = _lab(args)
    places = lab.select(args.places) if args.places else lab.select(args.place)
    return {place: place_station_file(folder, place, station_toml(place, lab.resources(place))) for place in places}


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


def _each_place(args: argparse.Namespace, lab: Lab) -> int:
    """One `bench run --place` per matching place, up to --jobs at once (default: all); the worst
    exit code wins. Places sharing an instrument still run side by side: each takes it only for
    one use (docs/lab.md)."""
    places = lab.select(args.places)
    at_once = max(1, min(getattr(args, "jobs", None) or len(places), len(places)))
    waiting = list(places)
    running: dict[str, subprocess.Popen] = {}
    codes: dict[str, int] = {}
    while waiting or running:
        while waiting and len(running) < at_once:
            place = waiting.pop(0)
            running[place] = subprocess.Popen([sys.executable, "-m", "phonebench.bench.cli", "run", *_child_args(args),
                                               "--place", place])
        for place, proc in list(running.items()):
            if proc.poll() is not None:
                codes[place] = running.pop(place).returncode
        if running:
            time.sleep(0.2)
    for place in places:
        print(f"place {place}: exit code {codes[place]}")
    return max(codes.values())


def _child_args(args: argparse.Namespace) -> list[str]:
    """The selection of this run, for each place's own `bench run`."""
    out = ["--coordinator", args.coordinator, "--place-wait", str(args.place_wait), "-q"]
    for flag, value in (("-m", args.marker), ("-k", args.keyword), ("--results-dir", args.results_dir)):
        if value:
            out += [flag, value]
    for dut in args.dut:
        out += ["--dut", dut]
    return [*out, *(args.suites or [])]
