"""`bench run`: the HIL suites against a station, a results folder, a readable summary."""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from phonebench.core.dburl import with_password
from phonebench.core.exits import PHONES_UNREACHABLE, REPORTED_PARTS_HELD, RESULTS_NOT_WRITTEN, STORE_BEHIND
from phonebench.core.errors import ConfigError
from phonebench.core.station import StationConfig, load_station
from .console import Console
from .plan import show_plan
from .request import add_request_args, from_cli, pytest_argv
from ..station.request import ProfileRef, RunRequest
from ..station.selection import Inventory
from ..results.summary import print_summary
from phonebench.fixtures.collection import roles_needed
from phonebench.fixtures.options import GivenRequest
from phonebench.fixtures.session import BENCH, seed_record
from . import Subcommands

if TYPE_CHECKING:  # annotations only
    from ..results.run_record import RunRecorder
    from ..results.run_progress import RunProgress

log = logging.getLogger(__name__)

NEXT_STEP = "next: open the report (claims first); `bench runs` lists the stored runs, `bench run -v` prints every verdict"


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
    request = from_cli(args)  # a misspelt profile or a bad station file: one line now, not an error per test
    if args.plan:
        return show_plan(request, as_json=False)
    # -v is bench's too (more logging); SUPPRESS keeps the top-level count when it is given before `run`
    return run_request(request, Console(quiet=args.quiet, verbose=args.verbose > 0, pytest_lines=args.verbose_tests,
                                        preflight=not args.no_preflight))


def run_request(request: RunRequest, console: Console) -> int:
    """The run `request` asks for: on its labgrid places, or claimed, healed and run on its station."""
    places = request.station.places
    if places is not None and places.pattern:
        from ..lab.run import run_each_place

        return run_each_place(request, places)
    if places is not None:
        from ..lab.run import place_held

        with place_held(request, places) as on_place:
            return run_request(on_place, console)
    from ..station.backend import validate_emulated
    from ..station.selection import check_selection
    from phonebench.core.files import check_free_space
    from ..results.run_record import claim_run_dir

    station = request.station.config()
    check_selection(request, station)  # an unknown DUT, bay, persona or fault: one line, exit 4, no run folder
    if station.emulated is not None:
        validate_emulated(station.emulated)  # an unknown persona or fault, said before anything starts
    check_free_space(request.results.folder)  # WriteFailed (a BenchError, exit 2) before any phone is touched
    # refuses an id already used or unsafe
    run_dir = claim_run_dir(request.results.folder, request.results.run_id, reuse_empty=False)
    request = request.in_run(run_dir)
    _heal(request, station)
    if station.emulated is None:
        code = _run_on_station(request, station, console)
        _release(run_dir)
        return code
    from ..station.backend import launch_emulated
    from ..store.db import password_in_environment

    # The emulated station runs as its own process; the run reaches it through the station file
    # it writes, by the default transport: the path a lab's run takes to hardware. That file has
    # no store password: the run finds it in its environment.
    with password_in_environment(station.database), launch_emulated(station, run_dir / "emulated") as live:
        code = _run_on_station(request.at_station(live), load_station(live), console)
    if run_dir.is_dir() and {p.name for p in run_dir.iterdir()} <= {"emulated", "junit.xml"}:  # nothing ran: the id stays free
        shutil.rmtree(run_dir, ignore_errors=True)
    return code


def _heal(request: RunRequest, station: StationConfig) -> None:
    """A run killed earlier: marked incomplete, the store level with its record (docs/faults.md)."""
    from .results import heal_before_run

    heal_before_run(request.results.folder, with_password(request.store, station.database))


def _bays_preflight(station: StationConfig, console: Console) -> bool:
    """A station of several bays: the preflight of every instrument of the file, before the workers
    start (a station of one bay is checked after collection, for what the selected tests need)."""
    if not console.preflight:
        return True
    from ..procedures.preflight import gate

    go, lines = gate(str(station.source))
    if lines:
        print("\n".join(lines), file=sys.stderr)
    return go


class _SessionGrab:
    """Keeps pytest's config so the run's record is read from memory, whole, even when the disk
    refused part of it."""

    config: pytest.Config | None = None

    def pytest_configure(self, config: pytest.Config) -> None:
        self.config = config


def _run_on_station(request: RunRequest, station: StationConfig, console: Console) -> int:
    """The suites against a station file (every bay in parallel when it has several)."""
    run_dir = request.results.run_dir
    if station.multi_bay:
        return run_parallel_bays(request, station, console)
    preflight = None
    if console.preflight:  # after collection: the instruments the selected tests need
        from ..procedures.preflight import PreflightGate

        preflight = PreflightGate(str(station.source), lambda item: roles_needed(item, list(item.fixturenames)))
    grab, inventory = _SessionGrab(), Inventory()
    code = pytest.main(pytest_argv(request, *console.pytest_options(run_dir)),
                       plugins=[GivenRequest(request), grab, inventory, *([preflight] if preflight else [])])
    if code == PHONES_UNREACHABLE:  # pytest printed the one line; the record says no test was reached
        return PHONES_UNREACHABLE
    if preflight is not None and preflight.lines:
        print("\n".join(preflight.lines), file=sys.stderr)
    bench = grab.config.stash.get(BENCH, None) if grab.config is not None else None
    recorder = bench.recorder if bench is not None else None
    results = run_dir / "results.json"
    if recorder is None:
        if not results.exists():
            _release(run_dir)  # nothing ran: the id stays free, no folder holding only junit.xml
            if preflight is not None and preflight.refused:
                return 2
            if code == pytest.ExitCode.NO_TESTS_COLLECTED:
                print(inventory.nothing_selected(request.selection), file=sys.stderr)
            elif code != pytest.ExitCode.USAGE_ERROR:  # pytest said why in one line already
                print(f"bench run: no test ran (pytest exit code {int(code)})", file=sys.stderr)
            return int(code) or 1
        data = json.loads(results.read_text(encoding="utf-8"))
    else:
        data = recorder.data
    print_summary(data, results, quiet=console.quiet, verbose=console.verbose)
    report = run_dir / "report.html"
    if report.exists():
        print(f"report:  {report}")
    print(NEXT_STEP)
    if recorder is not None and recorder.write_errors:
        return _results_not_written(recorder)
    if bench is not None and bench.store_sink is not None and bench.store_sink.refused is not None:
        print(f"bench: {bench.store_sink.refused}", file=sys.stderr)
        return STORE_BEHIND
    if bench is not None and bench.store_sink is not None and bench.store_sink.stored_tests < len(data["tests"]):
        stored = bench.store_sink.stored_tests
        print(f"bench: the results store has {stored} of this run's {len(data['tests'])} tests ({results} has all); "
              f"add the rest with `bench store-import {run_dir}`", file=sys.stderr)
        return STORE_BEHIND
    bad = data["summary"].get("failed", 0) + data["summary"].get("error", 0)
    if code == pytest.ExitCode.OK and bad == 0:
        return held_claims(request.profile, data)
    return 1 if code in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) else int(code)


class _Selected:
    """Counts the tests a collection kept after -k / -m."""

    count = 0

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.count = len(session.items)


def _nothing_selected(request: RunRequest, bay: str, phones: list[str]) -> str | None:
    """The one line for a -k / -m that selects no test, from a collection of one bay and its
    `phones` (collection starts no station and writes no run); None when something is selected."""
    if not (request.selection.keyword or request.selection.marker):
        return None
    one_bay = request.for_bay(bay, phones, request.results.run_dir)
    inventory, selected = Inventory(), _Selected()
    with contextlib.redirect_stdout(io.StringIO()):
        pytest.main(pytest_argv(one_bay, "--collect-only", "-qq"), plugins=[GivenRequest(one_bay), inventory, selected])
    return inventory.nothing_selected(request.selection) if selected.count == 0 else None


def _phones_reachable(request: RunRequest, station: StationConfig, phones: list[str]) -> bool:
    """Before the bay workers start: say which adb server the run uses, and when no phone answers,
    stop with one line and a run record that says the tests were never reached."""
    from ..station.reach import reach_phones

    reach = reach_phones(station, phones)
    if reach.adb:
        print(f"bench: {reach.adb}", flush=True)
    if not reach.none_reached:
        return True
    line = reach.stop_line()
    _record_not_started(request, station, f"stopped before any test: {line}")
    print(f"bench run: {line} (exit {PHONES_UNREACHABLE}; the run {request.results.run_id} is stored incomplete)",
          file=sys.stderr)
    return False


def _record_not_started(request: RunRequest, station: StationConfig, reason: str) -> None:
    """A run record (results.json and the store) of a run that stopped before its first test."""
    from phonebench.fixtures.session import station_record
    from ..results.run_record import RunRecorder
    from ..store import StoreSink

    folder = request.results.folder
    sink = StoreSink(with_password(request.store, station.database), folder)
    try:
        RunRecorder(folder, station_record(station, request.profile.name), run_id=request.results.run_id,
                    sinks=[sink]).finish("incomplete", reason=reason)
    finally:
        sink.close()


def _release(run_dir: Path) -> None:
    """Remove a claimed run folder that holds nothing but pytest's junit.xml of no test."""
    junit = run_dir / "junit.xml"
    with contextlib.suppress(OSError):
        if {p.name for p in run_dir.iterdir()} <= {"junit.xml"}:
            junit.unlink(missing_ok=True)
            run_dir.rmdir()


def _results_not_written(recorder: RunRecorder) -> int:
    tests = len(recorder.data["tests"])
    lines = [f"bench: the run folder {recorder.run_dir} did not take the whole record: "
             + "; ".join(recorder.write_errors)]
    if recorder.tests_on_disk == tests:
        lines.append(f"  {recorder.results_path} has all {tests} tests")
    elif recorder.rescued_to is not None:
        lines.append(f"  {recorder.results_path} has {recorder.tests_on_disk} of {tests} tests; all {tests} are in "
                     f"{recorder.rescued_to}")
        lines.append(f"  to recover: free space, `cp {recorder.rescued_to} {recorder.results_path}`, then "
                     f"`bench store-import {recorder.run_dir}`")
    else:
        lines.append(f"  {recorder.results_path} has {recorder.tests_on_disk} of {tests} tests; the whole record "
                     "was logged above (no folder would take it)")
    print("\n".join(lines), file=sys.stderr)
    return RESULTS_NOT_WRITTEN


# --- several bays at once (bench/cli/bays.py, bench/results/aggregate.py) -----------------------------------
def run_parallel_bays(request: RunRequest, station: StationConfig, console: Console) -> int:
    from .bays import run_bays, selected_bays
    from ..results.progress_view import make_view

    run_dir = request.results.run_dir
    dut_names = {b.name: list(b.duts) for b in station.bays}
    bays = selected_bays(station, request.selection, dut_names)
    if not bays:
        raise ConfigError("no bay selected", hint=f"bays: {', '.join(station.bay_names())}")
    nothing = _nothing_selected(request, bays[0], dut_names.get(bays[0], []))
    if nothing is not None:  # said once here, not by every bay's worker
        print(nothing, file=sys.stderr)
        return int(pytest.ExitCode.NO_TESTS_COLLECTED)
    if not _bays_preflight(station, console):
        return 2
    run_dir.mkdir(parents=True, exist_ok=True)
    duts = request.selection.duts
    phones = [d for bay in bays for d in dut_names.get(bay, []) if not duts or d in duts]
    if not _phones_reachable(request, station, phones):
        return PHONES_UNREACHABLE
    record = {"name": station.name, "file": str(station.source), "emulated": False, **seed_record(station),
              "location": station.location, "sla_profile": request.profile.name}
    progress = None if console.quiet else run_progress(request, station)
    view = make_view(progress, phones) if progress is not None else None
    data = run_bays(request, station, bays, record, console.quiet, progress, view)
    results = run_dir / "results.json"
    print_summary(data, results, quiet=console.quiet, verbose=console.verbose)
    for problem in data.get("problems", []):
        print(f"problem: {problem}")
    if (run_dir / "report.html").exists():
        print(f"report:  {run_dir / 'report.html'}")
    print(NEXT_STEP)
    if "rescued_to" in data:
        where = data["rescued_to"] or "the log above (no folder took it)"
        print(f"bench: the run folder {run_dir} refused the merged record ({data['problems'][-1]}); all "
              f"{len(data['tests'])} tests are in {where}: free space, copy it to {results}, then "
              f"`bench store-import {run_dir}` (exit {RESULTS_NOT_WRITTEN})", file=sys.stderr)
        return RESULTS_NOT_WRITTEN
    if data.get("store_refused"):
        print(f"bench: {data['store_refused']} ({results} has all); add the rest with "
              f"`bench store-import {run_dir}`", file=sys.stderr)
        return STORE_BEHIND
    if data.get("interrupted"):  # Ctrl-C: stored incomplete, summary printed (docs/faults.md)
        print(f"bench run: interrupted: the run {run_dir.name} is stored incomplete with its "
              f"{len(data['tests'])} finished tests (exit {int(pytest.ExitCode.INTERRUPTED)})", file=sys.stderr)
        return int(pytest.ExitCode.INTERRUPTED)
    bad = data["summary"].get("failed", 0) + data["summary"].get("error", 0)
    return held_claims(request.profile, data) if bad == 0 and data["status"] == "complete" and data["tests"] else 1


def run_progress(request: RunRequest, station: StationConfig) -> RunProgress:
    """Progress of a run of bays with each phone's plan as `bench plan` makes it for this selection
    (no plan, and still progress, when it cannot be made: docs/labtime.md)."""
    from .plan import phone_plans
    from ..results.run_progress import PhonePlanned, RunProgress

    plans: dict[str, PhonePlanned] = {}
    try:
        plans = {p.dut: PhonePlanned(p.lab_time_s, {t.key: t.lab_time_s for t in p.tests})
                 for p in phone_plans(request, station)}
    except Exception as exc:  # display only: a plan that cannot be made never stops the run
        log.warning("progress without a plan: %s", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    return RunProgress(plans)


def held_claims(profile_ref: ProfileRef, data: dict[str, Any]) -> int:
    """A run whose tests all passed: 0, or REPORTED_PARTS_HELD when its SLA profile says
    `reported_parts = "held"` and a claim passed partly on the phone's word (docs/faults.md)."""
    from ..specs.claims import claims_grid

    profile = profile_ref.load()
    held = claims_grid(data).qualified_passes() if profile.reported_parts == "held" else []
    if not held:
        return 0
    more = f" and {len(held) - 3} more" if len(held) > 3 else ""
    print(f"bench run: every test passed, but profile {profile.name} holds claims that pass partly on the "
          f"phone's word ({'; '.join(held[:3])}{more}): exit {REPORTED_PARTS_HELD}; the grid above says "
          f"which verdicts are reported", file=sys.stderr)
    return REPORTED_PARTS_HELD
