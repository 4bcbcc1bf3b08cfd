"""`bench run`: the HIL suites against a station, a results folder, a readable summary."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from bench.core.paths import data_dir
from bench.core.station import load_station
from bench.summary import print_summary

DEFAULT_SUITES = data_dir("suites")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("run", help="run the HIL suites against a station and write a report")
    add_selection_args(p)
    p.add_argument("suites", nargs="*", help=f"test files or folders (default: {DEFAULT_SUITES})")
    p.set_defaults(func=run)


def add_selection_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--station", help="station file (TOML); default: the embedded emulated station")
    p.add_argument("--dut", action="append", default=[], help="only this DUT (repeatable)")
    p.add_argument("-m", "--marker", help="only tests with this marker expression, e.g. acceptance")
    p.add_argument("-k", "--keyword", help="only tests matching this pytest -k expression")
    p.add_argument("--results-dir", help="where the run folder goes (default: the station's, ./reports)")
    p.add_argument("--run-id", help="name of the run folder")
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
           "--results-dir", str(run_dir.parent), "--run-id", run_dir.name,
           "--junitxml", str(run_dir / "junit.xml"), "-o", "junit_family=xunit2",
           "-v" if args.verbose_tests else "-qq"]
    if not args.quiet and not args.verbose_tests:
        out.append("--live")
    if args.station:
        out += ["--station", args.station]
    for name in args.dut:
        out += ["--dut", name]
    for flag, value in (("-m", args.marker), ("-k", args.keyword), ("--persona", args.persona)):
        if value:
            out += [flag, value]
    for fault in args.fault:
        out += ["--fault", fault]
    return out


def run(args: argparse.Namespace) -> int:
    from bench.results import new_run_id

    run_dir = results_dir(args) / (args.run_id or new_run_id())
    code = pytest.main(pytest_args(args, run_dir))
    results = run_dir / "results.json"
    if not results.exists():
        print(f"bench: no results in {run_dir} (pytest exit code {int(code)})")
        return int(code) or 1
    data = json.loads(results.read_text())
    print_summary(data, results, quiet=args.quiet)
    report = run_dir / "report.html"
    if report.exists():
        print(f"report:  {report}")
    bad = data["summary"].get("failed", 0) + data["summary"].get("error", 0)
    if code == pytest.ExitCode.OK and bad == 0:
        return 0
    return 1 if code in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) else int(code)
