"""`bench run`: the HIL suites against a station, a results folder, a readable summary.

`bench run` is pytest with the bench's plugin and one plugin more: it builds the run request from
its command line once and hands it to pytest with `BenchRun`, whose `pytest_cmdline_main` owns
the run's life around pytest's own session. Before the session: the labgrid place held, the run's
folder claimed, killed runs healed, the emulated station launched as its own process. The tests
then run in this pytest session, or in a worker per bay (phonebench.bench.cli.parallel), or as a
child `bench run` per labgrid place; `--plan` only prints their plan. After: the summary and the
bench's exit codes (phonebench.bench.cli.run_outcome, docs/faults.md)."""
from __future__ import annotations

import argparse
import contextlib
import shutil
from pathlib import Path
from dataclasses import dataclass

import pytest

from phonebench.core.dburl import with_password
from phonebench.core.station import StationConfig, load_station
from phonebench.fixtures.collection import roles_needed
from phonebench.fixtures.options import GIVEN
from .console import Console
from .request import add_request_args, from_cli
from .run_outcome import session_outcome
from ..station.request import RunRequest
from ..station.selection import Inventory
from . import Subcommands


def register(subparsers: Subcommands) -> None:
    p = subparsers.add_parser("run", help="run the HIL suites against a station and write a report")
    add_request_args(p)
    p.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                   help="the summary lists every test and verdict (and more logging, as `bench -v`)")
    p.add_argument("--verbose-tests", action="store_true", help="pytest's own per-test lines")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="for CI logs: no live lines or progress bars; the summary lists only what failed")
    p.add_argument("--no-preflight", action="store_true",
                   help="skip the station preflight (bench station check) before the tests")
    p.add_argument("--plan", action="store_true",
                   help="print the run's plan (expected lab time per phone, the makespan; as `bench plan`) and "
                        "exit: nothing is opened")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the suites; exit codes in docs/faults.md (pytest's, plus 8 and 9 from phonebench.core.exits)."""
    # -v is bench's too (more logging); SUPPRESS keeps the top-level count when it is given before `run`
    console = Console(quiet=args.quiet, verbose=args.verbose > 0, pytest_lines=args.verbose_tests,
                      preflight=not args.no_preflight)
    options = console.pytest_options()
    request = from_cli(args)  # a misspelt profile or a bad station file: one line now, not an error per test
    return int(pytest.main(request.pytest_argv(*options), plugins=[BenchRun(request, console, plan_only=args.plan)]))


@dataclass(frozen=True, eq=False)  # a pytest plugin: registered by identity
class BenchRun:
    """`bench run`'s own part of its pytest: the run's life around pytest's session. Its errors
    (a bad selection, a full disk, a taken run id) leave pytest as the bench's one-line errors."""

    request: RunRequest
    console: Console
    plan_only: bool = False  # `bench run --plan`

    @pytest.hookimpl(tryfirst=True)
    def pytest_cmdline_main(self, config: pytest.Config) -> int:
        """The run `request` asks for: its plan only, its labgrid places each as a child run, or
        claimed, healed and run on its station (a held place's, when it names one)."""
        request = self.request
        if self.plan_only:
            from .plan import show_plan

            return show_plan(request, as_json=False)
        places = request.station.places
        if places is not None and places.pattern:
            from ..lab.run import run_each_place

            return run_each_place(request, places)
        with contextlib.ExitStack() as held:
            if places is not None:
                from ..lab.run import place_held

                request = held.enter_context(place_held(request, places))
            return self._claimed(config, request)

    def _claimed(self, config: pytest.Config, request: RunRequest) -> int:
        """The run on its station, in a run folder claimed for it, killed runs healed first."""
        from ..station.backend import validate_emulated
        from ..station.selection import check_selection
        from phonebench.core.files import check_free_space
        from ..results.run_record import claim_run_dir
        from .results import heal_before_run

        station = request.station.config()
        check_selection(request, station)  # an unknown DUT, bay, persona or fault: one line, exit 4, no run folder
        if station.emulated is not None:
            validate_emulated(station.emulated)  # an unknown persona or fault, said before anything starts
        check_free_space(request.results.folder)  # WriteFailed (a BenchError, exit 2) before any phone is touched
        # refuses an id already used or unsafe
        run_dir = claim_run_dir(request.results.folder, request.results.run_id, reuse_empty=False)
        request = request.in_run(run_dir)
        # a run killed earlier: marked incomplete, the store level with its record (docs/faults.md)
        heal_before_run(request.results.folder, with_password(request.store, station.database))
        if station.emulated is None:
            code = self._on_station(config, request, station)
            _release_unused(run_dir)
            return code
        from ..station.backend import launch_emulated
        from ..store.db import password_in_environment

        # The emulated station runs as its own process; the run reaches it through the station file
        # it writes, by the default transport: the path a lab's run takes to hardware. That file has
        # no store password: the run finds it in its environment.
        with password_in_environment(station.database), launch_emulated(station, run_dir / "emulated") as live:
            code = self._on_station(config, request.at_station(live), load_station(live))
        if run_dir.is_dir() and {p.name for p in run_dir.iterdir()} <= {"emulated", "junit.xml"}:  # nothing ran: the id stays free
            shutil.rmtree(run_dir, ignore_errors=True)
        return code

    def _on_station(self, config: pytest.Config, request: RunRequest, station: StationConfig) -> int:
        """The suites against a station file: every bay in a worker of its own when it has several,
        else this pytest's own session (the rest of the hook's implementations, pytest's last)."""
        if station.multi_bay:
            from .parallel import run_parallel_bays

            return run_parallel_bays(request, station, self.console)
        config.stash[GIVEN] = request  # what the plugin's session runs (phonebench.fixtures.options)
        config.option.xmlpath = str(request.results.run_dir / "junit.xml")  # pytest's junit.xml, in the run
        inventory = Inventory()
        config.pluginmanager.register(inventory)
        preflight = None
        if self.console.preflight:  # after collection: the instruments the selected tests need
            from ..procedures.preflight import PreflightGate

            preflight = PreflightGate(str(station.source), lambda item: roles_needed(item, list(item.fixturenames)))
            config.pluginmanager.register(preflight)
        session = config.pluginmanager.subset_hook_caller("pytest_cmdline_main", remove_plugins=[self])
        code = session(config=config)
        return session_outcome(config, request, code, self.console, inventory, preflight)


def _release_unused(run_dir: Path) -> None:
    """Remove a claimed run folder that holds nothing but pytest's junit.xml of no test."""
    junit = run_dir / "junit.xml"
    with contextlib.suppress(OSError):
        if {p.name for p in run_dir.iterdir()} <= {"junit.xml"}:
            junit.unlink(missing_ok=True)
            run_dir.rmdir()
