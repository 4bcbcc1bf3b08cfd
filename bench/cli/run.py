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

from phonebench.core.exits import PHONES_UNREACHABLE, REPORTED_PARTS_HELD, RESULTS_NOT_WRITTEN, STORE_BEHIND
from phonebench.core.errors import ConfigError, UsageError
from phonebench.core.station import MAX_EMULATED_BAYS, EmulatedConfig, StationConfig, load_station
from .plan import DEFAULT_SUITES, plan
from ..station.selection import Inventory
from ..results.summary import print_summary
from phonebench.fixtures.plugin import roles_needed
from phonebench.fixtures.session import BENCH, seed_record
from . import Subcommands

if TYPE_CHECKING:  # annotations only
    from ..results.run_record import RunRecorder
    from ..results.run_progress import RunProgress

log = logging.getLogger(__name__)

NEXT_STEP = "next: open the report (claims first); `bench runs` lists the stored runs, `bench run -v` prints every verdict"


def register(subparsers: Subcommands) -> None:
    p = subparsers.add_parser("run", help="run the HIL suites against a station and write a report")
    add_selection_args(p)
    p.add_argument("suites", nargs="*", help=f"test files or folders (default: {DEFAULT_SUITES})")
    p.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                   help="the summary lists every test and verdict (and more logging, as `bench -v`)")
    p.add_argument("--no-preflight", action="store_true",
                   help="skip the station preflight (bench station check) before the tests")
    p.add_argument("--seed", type=int, help="emulated station: the night's noise seed (default: a fresh one; the run "
                                            "record keeps it, so --seed replays that night)")
    p.add_argument("--plan", action="store_true",
                   help="print the run's plan (expected lab time per phone, the makespan; as `bench plan`) and "
                        "exit: nothing is opened")
    from ..lab.run import add_place_args

    add_place_args(p)
    p.set_defaults(func=run)


def add_selection_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--station", help="station file (TOML); default: the embedded emulated station")
    p.add_argument("--dut", action="append", default=[], help="only this DUT (repeatable)")
    p.add_argument("--bay", action="append", default=[], help="only this bay of a multi-bay station (repeatable)")
    p.add_argument("--bays", type=int, help="emulated station: a fleet of N bays (1-4) tested in parallel")
    p.add_argument("--jobs", type=int, help="bays tested at once (default: all selected bays)")
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
    p.add_argument("--verbose-tests", action="store_true", help="pytest's own per-test lines")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="for CI logs: no live lines or progress bars; the summary lists only what failed")


def results_dir(args: argparse.Namespace) -> Path:
    if args.results_dir:
        return Path(args.results_dir).resolve()
    if args.station:
        return load_station(args.station).results_dir.resolve()  # also validates the file before pytest starts
    return Path("reports").resolve()


def pytest_args(args: argparse.Namespace, run_dir: Path) -> list[str]:
    suites = getattr(args, "suites", None) or [str(DEFAULT_SUITES)]
    out = [*suites, "-p", "phonebench", "--rootdir", str(DEFAULT_SUITES.parent), "-p", "no:cacheprovider",
           "-p", "no:labgrid",  # labgrid's own pytest plugin (lab extra) is for labgrid targets, not the bench
           "--results-dir", str(run_dir.parent), "--run-id", run_dir.name,
           "--junitxml", str(run_dir / "junit.xml"), "-o", "junit_family=xunit2",
           "-v" if args.verbose_tests else "-qq"]
    if not args.quiet and not args.verbose_tests:
        out.append("--live")
    if args.station:
        out += ["--station", args.station]
    for name in args.dut:
        out += ["--dut", name]
    if len(getattr(args, "bay", None) or []) == 1:  # a station of one bay: that bay's name is checked
        out += ["--bay", args.bay[0]]
    for flag, value in (("-m", args.marker), ("-k", args.keyword), ("--persona", args.persona),
                        ("--sla-profile", getattr(args, "sla_profile", None))):
        if value:
            out += [flag, value]
    for fault in args.fault:
        out += ["--fault", fault]
    return out


class _SessionGrab:
    """Keeps pytest's config so the run's record is read from memory, whole, even when the disk
    refused part of it."""

    config: pytest.Config | None = None

    def pytest_configure(self, config: pytest.Config) -> None:
        self.config = config


def run(args: argparse.Namespace) -> int:
    """Run the suites; exit codes in docs/faults.md (pytest's, plus 8 and 9 from phonebench.core.exits)."""
    if getattr(args, "plan", False):
        return plan(argparse.Namespace(suites=getattr(args, "suites", None), station=args.station, dut=args.dut,
                                       marker=args.marker, keyword=args.keyword, sla_profile=args.sla_profile, jobs=args.jobs,
                                       database=None, results_dir=args.results_dir, json=False,
                                       place=args.place, places=args.places, coordinator=args.coordinator))
    if getattr(args, "sla_profile", None):  # a misspelt profile is one line now, not an error in every test
        from ..specs.sla import load_profile

        load_profile(args.sla_profile)
    if getattr(args, "place", None) or getattr(args, "places", None):
        from ..lab.run import run_on_places

        return run_on_places(args, run)
    from ..station.selection import check_selection
    from phonebench.core.files import check_free_space
    from ..results.run_record import claim_run_dir

    check_selection(args)  # an unknown DUT, bay, persona or fault: one line, exit 4, no run folder
    emulated = _emulated_station(args)
    folder = results_dir(args)
    check_free_space(folder)  # WriteFailed (a BenchError, exit 2) before any phone is touched
    if emulated is None:
        run_dir = claim_run_dir(folder, args.run_id, reuse_empty=False)  # refuses an id already used or unsafe
        _heal(folder, args.station)
        code = _run_on_station(args, run_dir)
        _release(run_dir)
        return code
    from ..station.backend import launch_emulated
    from ..store.db import password_in_environment

    run_dir = claim_run_dir(folder, args.run_id, reuse_empty=False)  # refuses an id already used or unsafe
    _heal(folder, args.station)
    # The emulated station runs as its own process; the run reaches it through the station file
    # it writes, by the default transport: the path a lab's run takes to hardware. That file has
    # no store password: the run finds it in its environment.
    with password_in_environment(emulated.database), launch_emulated(emulated, run_dir / "emulated") as live:
        lab_args = argparse.Namespace(**{**vars(args), "station": str(live), "persona": None, "fault": [],
                                         "bays": None})
        code = _run_on_station(lab_args, run_dir)
    if run_dir.is_dir() and {p.name for p in run_dir.iterdir()} <= {"emulated", "junit.xml"}:  # nothing ran: the id stays free
        shutil.rmtree(run_dir, ignore_errors=True)
    return code


def _heal(folder: Path, station_file: str | None) -> None:
    """A run killed earlier: marked incomplete, the store level with its record (docs/faults.md)."""
    from .results import heal_before_run

    heal_before_run(folder, station_file)


def _emulated_station(args: argparse.Namespace) -> StationConfig | None:
    """The emulated station this run starts (none given, --bays, or a file with [emulated]), with
    --persona and --fault given to its phones; None for a station of hardware."""
    from ..station.backend import validate_emulated, with_behaviour

    if getattr(args, "bays", None):
        if args.station:
            raise ConfigError("--bays makes an emulated fleet; it does not go with --station",
                              hint="put `bays = N` in the station file's [emulated] table instead")
        if not 1 <= args.bays <= MAX_EMULATED_BAYS:
            raise ConfigError(f"--bays {args.bays}: the emulated rack has 1 to {MAX_EMULATED_BAYS} bays")
        config = StationConfig(name="emulated", source=None, emulated=EmulatedConfig(bays=args.bays))
    elif args.station:
        config = load_station(args.station)
    else:
        config = StationConfig(name="emulated", source=None, emulated=EmulatedConfig())
    if config.emulated is None:
        if getattr(args, "seed", None) is not None:
            raise UsageError(f"--seed sets an emulated station's noise; {args.station} has real phones (leave it out)")
        if args.persona or args.fault:
            raise ConfigError("--persona and --fault apply to an emulated station only",
                              hint=f"{args.station} describes hardware")
        return None
    config.emulated = with_behaviour(config.emulated, args.persona, args.fault).for_night(getattr(args, "seed", None))
    validate_emulated(config.emulated)  # an unknown persona or fault, said before anything starts
    return config


def _bays_preflight(args: argparse.Namespace) -> bool:
    """A station of several bays: the preflight of every instrument of the file, before the workers
    start (a station of one bay is checked after collection, for what the selected tests need)."""
    if args.no_preflight:
        return True
    from ..procedures.preflight import gate

    go, lines = gate(args.station)
    if lines:
        print("\n".join(lines), file=sys.stderr)
    return go


def _run_on_station(args: argparse.Namespace, run_dir: Path) -> int:
    """The suites against a station file (every bay in parallel when it has several)."""
    station = load_station(args.station)
    if station.multi_bay:
        return run_parallel_bays(args, station, run_dir)
    preflight = None
    if not args.no_preflight:  # after collection: the instruments the selected tests need
        from ..procedures.preflight import PreflightGate

        preflight = PreflightGate(args.station, lambda item: roles_needed(item, list(item.fixturenames)))
    grab, inventory = _SessionGrab(), Inventory()
    code = pytest.main(pytest_args(args, run_dir), plugins=[grab, inventory, *([preflight] if preflight else [])])
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
                print(inventory.nothing_selected(args), file=sys.stderr)
            elif code != pytest.ExitCode.USAGE_ERROR:  # pytest said why in one line already
                print(f"bench run: no test ran (pytest exit code {int(code)})", file=sys.stderr)
            return int(code) or 1
        data = json.loads(results.read_text(encoding="utf-8"))
    else:
        data = recorder.data
    print_summary(data, results, quiet=args.quiet, verbose=getattr(args, "verbose", 0) > 0)
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
        return held_claims(args, data)
    return 1 if code in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) else int(code)


class _Selected:
    """Counts the tests a collection kept after -k / -m."""

    count = 0

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.count = len(session.items)


def _nothing_selected(args: argparse.Namespace, bay: str) -> str | None:
    """The one line for a -k / -m that selects no test, from a collection of one bay (collection
    starts no station and writes no run); None when something is selected."""
    if not (args.keyword or args.marker):
        return None
    suites = getattr(args, "suites", None) or [str(DEFAULT_SUITES)]
    argv = [*suites, "-p", "phonebench", "--rootdir", str(DEFAULT_SUITES.parent), "-p", "no:cacheprovider",
            "-p", "no:labgrid", "--collect-only", "-qq", "--station", args.station, "--bay", bay]
    for flag, value in (("-k", args.keyword), ("-m", args.marker)):
        if value:
            argv += [flag, value]
    inventory, selected = Inventory(), _Selected()
    with contextlib.redirect_stdout(io.StringIO()):
        pytest.main(argv, plugins=[inventory, selected])
    return inventory.nothing_selected(args) if selected.count == 0 else None


def _phones_reachable(station: StationConfig, phones: list[str], run_dir: Path) -> bool:
    """Before the bay workers start: say which adb server the run uses, and when no phone answers,
    stop with one line and a run record that says the tests were never reached."""
    from ..station.reach import reach_phones

    reach = reach_phones(station, phones)
    if reach.adb:
        print(f"bench: {reach.adb}", flush=True)
    if not reach.none_reached:
        return True
    line = reach.stop_line()
    _record_not_started(station, run_dir, f"stopped before any test: {line}")
    print(f"bench run: {line} (exit {PHONES_UNREACHABLE}; the run {run_dir.name} is stored incomplete)",
          file=sys.stderr)
    return False


def _record_not_started(station: StationConfig, run_dir: Path, reason: str) -> None:
    """A run record (results.json and the store) of a run that stopped before its first test."""
    from phonebench.fixtures.session import station_record
    from ..results.run_record import RunRecorder
    from ..store import StoreSink, resolve_database_url

    sink = StoreSink(resolve_database_url(station.database, run_dir.parent), run_dir.parent)
    try:
        RunRecorder(run_dir.parent, station_record(station), run_id=run_dir.name, sinks=[sink]).finish(
            "incomplete", reason=reason)
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
def run_parallel_bays(args: argparse.Namespace, station: StationConfig, run_dir: Path) -> int:
    from .bays import run_bays, selected_bays
    from ..results.progress_view import make_view

    dut_names = {b.name: list(b.duts) for b in station.bays}
    bays = selected_bays(station, args, dut_names)
    if not bays:
        raise ConfigError("no bay selected", hint=f"bays: {', '.join(station.bay_names())}")
    nothing = _nothing_selected(args, bays[0])
    if nothing is not None:  # said once here, not by every bay's worker
        print(nothing, file=sys.stderr)
        return int(pytest.ExitCode.NO_TESTS_COLLECTED)
    if not _bays_preflight(args):
        return 2
    run_dir.mkdir(parents=True, exist_ok=True)
    station_file = str(station.source)
    phones = [d for bay in bays for d in dut_names.get(bay, []) if not args.dut or d in args.dut]
    if not _phones_reachable(station, phones, run_dir):
        return PHONES_UNREACHABLE

    def worker_args(bay: str, folder: Path) -> list[str]:
        selection = argparse.Namespace(**{**vars(args), "station": None, "persona": None, "fault": [], "bay": [],
                                          "dut": [d for d in args.dut if d in dut_names.get(bay, [])],
                                          "quiet": True, "verbose_tests": False})
        return pytest_args(selection, folder)

    record = {"name": station.name, "file": station_file, "emulated": False, **seed_record(station),
              "location": station.location, "sla_profile": args.sla_profile or station.sla_profile}
    progress = None if args.quiet else run_progress(args, station_file, run_dir)
    view = make_view(progress, phones) if progress is not None else None
    data = run_bays(args, station_file, bays, run_dir, worker_args, args.jobs or len(bays), record,
                    station.database, progress, view)
    results = run_dir / "results.json"
    print_summary(data, results, quiet=args.quiet, verbose=getattr(args, "verbose", 0) > 0)
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
    return held_claims(args, data) if bad == 0 and data["status"] == "complete" and data["tests"] else 1


def run_progress(args: argparse.Namespace, station_file: str, run_dir: Path) -> RunProgress:
    """Progress of a run of bays with each phone's plan as `bench plan` makes it for this selection
    (no plan, and still progress, when it cannot be made: docs/labtime.md)."""
    from .plan import phone_plans
    from ..results.run_progress import PhonePlanned, RunProgress

    plans: dict[str, PhonePlanned] = {}
    try:
        selection = argparse.Namespace(suites=getattr(args, "suites", None), dut=args.dut, marker=args.marker,
                                       keyword=args.keyword, sla_profile=args.sla_profile, database=None)
        _, phone_list = phone_plans(selection, station_file, str(run_dir.parent))
        plans = {p.dut: PhonePlanned(p.lab_time_s, {t.key: t.lab_time_s for t in p.tests}) for p in phone_list}
    except Exception as exc:  # display only: a plan that cannot be made never stops the run
        log.warning("progress without a plan: %s", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    return RunProgress(plans)


def held_claims(args: argparse.Namespace, data: dict[str, Any]) -> int:
    """A run whose tests all passed: 0, or REPORTED_PARTS_HELD when its SLA profile says
    `reported_parts = "held"` and a claim passed partly on the phone's word (docs/faults.md)."""
    from ..specs.claims import claims_grid
    from ..specs.sla import load_profile

    station = data.get("station") or {}
    name = getattr(args, "sla_profile", None) or station.get("sla_profile") or "default"
    search = (Path(station["file"]).parent,) if station.get("file") else ()
    profile = load_profile(name, search=search)
    held = claims_grid(data).qualified_passes() if profile.reported_parts == "held" else []
    if not held:
        return 0
    more = f" and {len(held) - 3} more" if len(held) > 3 else ""
    print(f"bench run: every test passed, but profile {profile.name} holds claims that pass partly on the "
          f"phone's word ({'; '.join(held[:3])}{more}): exit {REPORTED_PARTS_HELD}; the grid above says "
          f"which verdicts are reported", file=sys.stderr)
    return REPORTED_PARTS_HELD
