"""`bench run`: the HIL suites against a station, a results folder, a readable summary."""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.core.exits import RESULTS_NOT_WRITTEN, STORE_BEHIND
from bench.core.paths import data_dir
from bench.core.errors import ConfigError
from bench.core.station import MAX_EMULATED_BAYS, load_station
from bench.summary import print_summary
from fixtures.session import BENCH

DEFAULT_SUITES = data_dir("suites")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("run", help="run the HIL suites against a station and write a report")
    add_selection_args(p)
    p.add_argument("suites", nargs="*", help=f"test files or folders (default: {DEFAULT_SUITES})")
    p.add_argument("--no-preflight", action="store_true",
                   help="skip the station preflight (bench station check) before the tests")
    from bench.lab.run import add_place_args

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
    p.add_argument("--results-dir", help="where the run folder goes (default: the station's, ./reports)")
    p.add_argument("--run-id", help="name of the run folder (a plain name; an id already used is refused)")
    p.add_argument("--persona", help="emulated station: SLA behaviour persona for every phone")
    p.add_argument("--fault", action="append", default=[], help="emulated station: inject a fault (repeatable)")
    p.add_argument("--verbose-tests", action="store_true", help="pytest's own per-test lines")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="for CI logs: no live lines or progress bars; the summary lists only what failed")


def results_dir(args: argparse.Namespace) -> Path:
    if args.results_dir:
        return Path(args.results_dir)
    if args.station:
        return load_station(args.station).results_dir  # also validates the file before pytest starts
    return Path("reports")


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
    for flag, value in (("-m", args.marker), ("-k", args.keyword), ("--persona", args.persona)):
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
    """Run the suites; exit codes in docs/faults.md (pytest's, plus 8 and 9 from bench.core.exits)."""
    if getattr(args, "place", None) or getattr(args, "places", None):
        from bench.lab.run import run_on_places

        return run_on_places(args, run)
    from bench.core.files import check_free_space
    from bench.results import claim_run_dir

    folder = results_dir(args)
    if args.station and not args.no_preflight:
        from bench.preflight import gate

        if not gate(args.station):
            return 2
    check_free_space(folder)  # WriteFailed (a BenchError, exit 2) before any phone is touched
    run_dir = claim_run_dir(folder, args.run_id, reuse_empty=False)  # refuses an id already used or unsafe
    from bench.cli.results import heal_before_run

    heal_before_run(folder, args.station)  # a run killed earlier: marked incomplete, store level with its record
    station = _bay_station(args)
    if station is not None:
        return run_parallel_bays(args, station, run_dir)
    grab = _SessionGrab()
    code = pytest.main(pytest_args(args, run_dir), plugins=[grab])
    bench = grab.config.stash.get(BENCH, None) if grab.config is not None else None
    recorder = bench.recorder if bench is not None else None
    results = run_dir / "results.json"
    if recorder is None:
        if not results.exists():
            with contextlib.suppress(OSError):
                run_dir.rmdir()  # claimed but never used (usage error, no station): the id stays free
            print(f"bench: no results in {run_dir} (pytest exit code {int(code)})")
            return int(code) or 1
        data = json.loads(results.read_text(encoding="utf-8"))
    else:
        data = recorder.data
    print_summary(data, results, quiet=args.quiet)
    report = run_dir / "report.html"
    if report.exists():
        print(f"report:  {report}")
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
        return 0
    return 1 if code in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) else int(code)


def _results_not_written(recorder: Any) -> int:
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


# --- several bays at once (bench/cli/bays.py, bench/aggregate.py) -----------------------------------
def _bay_station(args: argparse.Namespace) -> Any:
    """The station when this run is one of bays (a multi-bay file, --bays, --bay); else None."""
    from bench.core.station import EmulatedConfig, StationConfig

    if getattr(args, "bays", None):
        if args.station:
            raise ConfigError("--bays makes an emulated fleet; it does not go with --station",
                              hint="put `bays = N` in the station file's [emulated] table instead")
        if not 1 <= args.bays <= MAX_EMULATED_BAYS:
            raise ConfigError(f"--bays {args.bays}: the emulated fleet has 1 to {MAX_EMULATED_BAYS} bays")
        return StationConfig(name="emulated", source=None, emulated=EmulatedConfig(bays=args.bays))
    if not args.station:
        return None
    station = load_station(args.station)
    return station if station.multi_bay else None


def run_parallel_bays(args: argparse.Namespace, station: Any, run_dir: Path) -> int:
    from bench.backend import emulated_bay_duts, emulated_fleet
    from bench.cli.bays import run_bays, selected_bays

    if station.emulated is not None:
        if args.persona or args.fault:
            station.emulated.phones = emulated_fleet(args.persona, args.fault).phones
        dut_names = emulated_bay_duts(station.emulated)
    else:
        dut_names = {b.name: list(b.duts) for b in station.bays}
    bays = selected_bays(station, args, dut_names)
    if not bays:
        raise ConfigError("no bay selected", hint=f"bays: {', '.join(station.bay_names())}")
    run_dir.mkdir(parents=True, exist_ok=True)
    station_file = str(station.source) if station.source else _write_emulated_station(station, run_dir)

    def worker_args(bay: str, folder: Path) -> list[str]:
        selection = argparse.Namespace(**{**vars(args), "station": None, "persona": None, "fault": [], "bay": [],
                                          "dut": [d for d in args.dut if d in dut_names.get(bay, [])],
                                          "quiet": True, "verbose_tests": False})
        return pytest_args(selection, folder)

    record = {"name": station.name, "file": station_file, "emulated": station.emulated is not None,
              "location": station.location, "sla_profile": station.sla_profile}
    data = run_bays(args, station_file, bays, run_dir, worker_args, args.jobs or len(bays), record,
                    station.database)
    results = run_dir / "results.json"
    print_summary(data, results, quiet=args.quiet)
    for problem in data.get("problems", []):
        print(f"problem: {problem}")
    if (run_dir / "report.html").exists():
        print(f"report:  {run_dir / 'report.html'}")
    bad = data["summary"].get("failed", 0) + data["summary"].get("error", 0)
    return 0 if bad == 0 and data["status"] == "complete" and data["tests"] else 1


def _write_emulated_station(station: Any, run_dir: Path) -> str:
    """The embedded fleet as a station file the workers load (each starts its own bay of it)."""
    emulated = station.emulated
    lines = ["[emulated]", f"bays = {emulated.bays}", f"instruments = {str(emulated.instruments).lower()}"]
    for phone in emulated.phones:
        lines += ["[[emulated.phone]]", f"serial = {json.dumps(phone.serial)}", f"seed = {phone.seed}",
                  f"sla_persona = {json.dumps(phone.sla_persona)}", f"faults = {json.dumps(list(phone.faults))}"]
        if phone.npu_persona:
            lines.append(f"npu_persona = {json.dumps(phone.npu_persona)}")
    path = run_dir / "station.toml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)
