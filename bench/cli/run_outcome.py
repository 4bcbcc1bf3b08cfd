"""What a finished `bench run` prints and exits with: the summary, where the report is, and the
bench's exit codes beside pytest's (docs/faults.md) — for a run of this session's own tests and
for the merged run of a station's bays."""
from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import pytest

from phonebench.core.exits import PHONES_UNREACHABLE, REPORTED_PARTS_HELD, RESULTS_NOT_WRITTEN, STORE_BEHIND
from phonebench.fixtures.session import BENCH
from .console import Console
from ..results.summary import print_summary
from ..station.request import ProfileRef, RunRequest
from ..station.selection import Inventory

if TYPE_CHECKING:  # annotations only
    from ..procedures.preflight import PreflightGate
    from ..results.run_record import RunRecorder

NEXT_STEP = "next: open the report (claims first); `bench runs` lists the stored runs, `bench run -v` prints every verdict"


def session_outcome(config: pytest.Config, request: RunRequest, code: int | pytest.ExitCode, console: Console,
                    inventory: Inventory, preflight: PreflightGate | None) -> int:
    """The summary and exit code of a run whose tests ran in this pytest session (`config`, over
    now), which pytest ended with `code`; the record is read from memory, whole, even when the disk
    refused part of it."""
    if code == PHONES_UNREACHABLE:  # pytest printed the one line; the record says no test was reached
        return PHONES_UNREACHABLE
    run_dir = request.results.run_dir
    if preflight is not None and preflight.lines:
        print("\n".join(preflight.lines), file=sys.stderr)
    bench = config.stash.get(BENCH, None)
    recorder = bench.recorder if bench is not None else None
    results = run_dir / "results.json"
    if recorder is None:
        if not results.exists():  # nothing ran: the caller frees the run's id
            if preflight is not None and preflight.refused:
                return 2
            if code == pytest.ExitCode.NO_TESTS_COLLECTED:
                print(inventory.nothing_selected(request.selection), file=sys.stderr)
            elif code in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):  # they ran, none opened the station
                print(f"bench run: the selected tests ran, but none used the station's phones or instruments, "
                      f"so no run was recorded (pytest exit code {int(code)})", file=sys.stderr)
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
    sink = bench.store_sink if bench is not None else None
    if sink is not None and sink.refused is not None:
        print(f"bench: {sink.refused}", file=sys.stderr)
        return STORE_BEHIND
    if sink is not None and sink.stored_tests < len(data["tests"]):
        print(f"bench: the results store has {sink.stored_tests} of this run's {len(data['tests'])} tests ({results} "
              f"has all); add the rest with `bench store-import {run_dir}`", file=sys.stderr)
        return STORE_BEHIND
    bad = data["summary"].get("failed", 0) + data["summary"].get("error", 0)
    if code == pytest.ExitCode.OK and bad == 0:
        return held_claims(request.profile, data)
    return 1 if code in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) else int(code)


def bays_outcome(request: RunRequest, data: dict[str, Any], console: Console) -> int:
    """The summary and exit code of the run a station's bays made, merged into `data`."""
    run_dir = request.results.run_dir
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
