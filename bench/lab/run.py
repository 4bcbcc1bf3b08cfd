"""`bench run --place NAME` / `--places PATTERN`: a run on a labgrid place, or one per place."""
from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from phonebench.core.errors import ConfigError
from phonebench.core.files import safe_name, write_atomically
from phonebench.drivers.locks import ENV_WAIT as LOCK_WAIT_ENV
from .places import DEFAULT_WAIT_S, ENV_COORDINATOR, Lab
from .resources import station_toml


def add_place_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--place", help="labgrid place to acquire and test (its bay's resources are the station)")
    p.add_argument("--places", help="every labgrid place matching this pattern, one run each, at once")
    p.add_argument("--coordinator", default=os.environ.get(ENV_COORDINATOR),
                   help=f"labgrid coordinator HOST:PORT (default: ${ENV_COORDINATOR})")
    p.add_argument("--place-wait", type=float, default=DEFAULT_WAIT_S,
                   help=f"seconds to wait for a place someone else holds (default {DEFAULT_WAIT_S:.0f})")


def run_on_places(args: argparse.Namespace, run_station: Callable[[argparse.Namespace], int]) -> int:
    if not args.coordinator:
        raise ConfigError("--place needs a labgrid coordinator", hint=f"pass --coordinator HOST:PORT or set {ENV_COORDINATOR}")
    if args.station or getattr(args, "bays", None):
        raise ConfigError("--place builds the station from the place's resources; drop --station / --bays")
    lab = Lab(args.coordinator)
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
    """One `bench run --place` per matching place, all at once; the worst exit code wins."""
    places = lab.places(args.places)
    if not places:
        raise ConfigError(f"--places {args.places!r} matches no place on {args.coordinator}")
    procs = {place: subprocess.Popen([sys.executable, "-m", "phonebench.bench.cli", "run", *_child_args(args), "--place", place])
             for place in places}
    codes = {place: proc.wait() for place, proc in procs.items()}
    for place, code in codes.items():
        print(f"place {place}: exit code {code}")
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
