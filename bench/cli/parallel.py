"""`bench run` on a station of several bays, before and after its workers (phonebench.bench.cli.bays):
what is said once for the whole station — a selection of no test, the instruments' preflight,
which phones answer — then the workers' run with its progress, and its outcome."""
from __future__ import annotations

import contextlib
import io
import logging
import sys

import pytest

from phonebench.core.dburl import with_password
from phonebench.core.errors import ConfigError
from phonebench.core.exits import PHONES_UNREACHABLE
from phonebench.core.station import StationConfig
from phonebench.fixtures.options import GivenRequest
from phonebench.fixtures.session import seed_record
from .console import Console
from .run_outcome import bays_outcome
from ..results.run_progress import RunProgress
from ..station.request import RunRequest
from ..station.selection import Inventory

log = logging.getLogger(__name__)


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
    return bays_outcome(request, run_bays(request, station, bays, record, console.quiet, progress, view), console)


def run_progress(request: RunRequest, station: StationConfig) -> RunProgress:
    """Progress of a run of bays with each phone's plan as `bench plan` makes it for this selection
    (no plan, and still progress, when it cannot be made: docs/labtime.md)."""
    from .plan import phone_plans
    from ..results.run_progress import PhonePlanned

    plans: dict[str, PhonePlanned] = {}
    try:
        plans = {p.dut: PhonePlanned(p.lab_time_s, {t.key: t.lab_time_s for t in p.tests})
                 for p in phone_plans(request, station)}
    except Exception as exc:  # display only: a plan that cannot be made never stops the run
        log.warning("progress without a plan: %s", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    return RunProgress(plans)


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
        pytest.main(one_bay.pytest_argv("--collect-only", "-qq"), plugins=[GivenRequest(one_bay), inventory, selected])
    return inventory.nothing_selected(request.selection) if selected.count == 0 else None


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
