"""`bench run` on a station of several bays: one pytest worker process per bay, run at once,
merged into one run (phonebench.bench.results.aggregate).

Workers are processes, not threads: pytest keeps per-session state, and an emulated bay is CPU
work in Python (its ADB daemon, runtime and physics), so processes are what spreads it over
cores. Each worker records its bay under <run>/bays/<bay>/ and writes no store row and no report;
the parent merges, stores, renders and points reports/latest at the run once.
"""
from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..results.progress_view import BayWatch, ProgressView
from ..results.run_progress import RunProgress
from ..results.aggregate import BAYS_FOLDER, STATION_RECORD, BayOutcome, bay_folder, merge_bays
from ..results.run_record import (BAY_OF_RUN_ENV, RUN_TOKEN_ENV, drop_run_token, hold_recording_lock,
                                  keep_run_token, new_run_token, release_recording_lock)
from phonebench.core.dburl import ENV_VAR as STORE_ENV, with_password
from phonebench.core.files import write_atomically
from phonebench.core.errors import ConfigError
from phonebench.core.station import StationConfig
from phonebench.drivers.locks import ENV_WAIT as LOCK_WAIT_ENV
from phonebench.fixtures.options import REQUEST_FILE, RUN_REQUEST_OPTION
from .console import Console, junit_options
from ..station.request import RunRequest, Selection

log = logging.getLogger(__name__)

SHARED_WAIT_S = 3600.0  # how long a bay waits for a shared instrument another bay's test holds


def selected_bays(station: StationConfig, selection: Selection, dut_names: dict[str, list[str]]) -> list[str]:
    """The bays --bay and --dut ask for (all by default); an unknown name is an error naming the known ones."""
    bays = station.bay_names()
    unknown = [b for b in selection.bays if b not in bays]
    if unknown:
        raise ConfigError(f"--bay {', '.join(unknown)}: not a bay of station {station.name!r}",
                          hint=f"bays: {', '.join(bays)}")
    chosen = [b for b in bays if not selection.bays or b in selection.bays]
    if selection.duts:
        all_duts = {d for names in dut_names.values() for d in names}
        missing = [d for d in selection.duts if d not in all_duts]
        if missing:
            raise ConfigError(f"--dut {', '.join(missing)}: in no bay of station {station.name!r}",
                              hint=f"DUTs: {', '.join(sorted(all_duts))}")
        chosen = [b for b in chosen if set(dut_names.get(b, [])) & set(selection.duts)]
    return chosen


def run_bays(request: RunRequest, station: StationConfig, bays: list[str], record: dict[str, Any],
             quiet: bool, progress: RunProgress | None = None, view: ProgressView | None = None) -> dict[str, Any]:
    """Run each bay's worker (at most `request.jobs` at once) and merge them into the run `record`
    describes; Ctrl-C (or SIGTERM) stops every worker, still merges what they recorded and returns
    the run with "interrupted" set.

    With `progress`, this process (the one writer) reads each running bay's folder as its worker
    records and shows where every phone is in `view` (docs/labtime.md, "While a run runs")."""
    run_dir = request.results.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    jobs = request.jobs or len(bays)
    if jobs < 1:
        raise ConfigError(f"--jobs {jobs}: at least one bay must run at a time")
    pending, outcomes = list(bays), {b: BayOutcome(b, None) for b in bays}
    running: dict[str, tuple[subprocess.Popen[bytes], float]] = {}
    previous = signal.signal(signal.SIGTERM, _interrupt)  # a stopped bench stops its workers too
    # The run is live while this process lives: a bench starting meanwhile must not heal it, and
    # one starting after a kill merges what the bays recorded (phonebench.bench.store.heal).
    lock = hold_recording_lock(run_dir)
    write_atomically(run_dir / BAYS_FOLDER / STATION_RECORD, json.dumps(record))
    store = with_password(request.store, station.database)
    # The workers' calibration records and the merged run share the station's store (in the
    # environment, not on the command line: a PostgreSQL URL may carry a password).
    # The run's token seals what a worker rescues (phonebench.bench.results.run_record): the merge
    # then takes no record another process left under the guessable rescue name.
    token = new_run_token()
    keep_run_token(run_dir.name, token)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", STORE_ENV: store, BAY_OF_RUN_ENV: run_dir.name, RUN_TOKEN_ENV: token}
    # A bay waits for a shared instrument while another bay's test uses it: as long as a test takes.
    env.setdefault(LOCK_WAIT_ENV, str(SHARED_WAIT_S))  # phonebench.drivers.locks reads it
    watches: dict[str, BayWatch] = {}
    next_look = 0.0
    try:
        while pending or running:
            while pending and len(running) < jobs:
                bay = pending.pop(0)
                folder = bay_folder(run_dir, bay)
                command = [sys.executable, "-m", "pytest", *_worker_argv(request, station, bay, folder)]
                with open(folder / "worker.log", "w") as log_file:
                    proc = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, env=env,
                                            start_new_session=True,  # Ctrl-C reaches the parent only
                                            preexec_fn=_die_with_parent)
                running[bay] = (proc, time.monotonic())
                watches[bay] = BayWatch(bay, folder)
                if progress is not None:
                    progress.bay_started(bay)
                _say(view, f"bay {bay}: started (pid {proc.pid})", quiet)
            if progress is not None and view is not None and time.monotonic() >= next_look:
                next_look = time.monotonic() + LOOK_EVERY_S
                for bay in running:
                    view.show(watches[bay].poll(progress))
                view.refresh()
            for bay, (proc, t0) in list(running.items()):
                code = proc.poll()
                if code is None:
                    continue
                outcomes[bay] = BayOutcome(bay, code, time.monotonic() - t0)
                del running[bay]
                if progress is not None and view is not None:  # its last tests, then its phones' last line
                    view.show(watches[bay].poll(progress) + progress.bay_done(bay))
                _say(view, f"bay {bay}: finished in {outcomes[bay].wall_s:.1f} s (exit code {code})",
                     quiet and code in (0, 1))
            time.sleep(0.05)
    except KeyboardInterrupt:
        if view is not None:
            view.close()
        print("bench: interrupted: stopping the bays' workers", file=sys.stderr)
        for bay, (proc, t0) in running.items():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGINT)  # pytest finishes its records on SIGINT
        for bay, (proc, t0) in running.items():
            try:
                code = proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                code = proc.wait()
            outcomes[bay] = BayOutcome(bay, code, time.monotonic() - t0)
        try:
            return {**_finish(run_dir, record, list(outcomes.values()), store, token), "interrupted": True}
        finally:
            release_recording_lock(run_dir, lock)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if view is not None:
        view.close()
    try:
        return _finish(run_dir, record, list(outcomes.values()), store, token)
    finally:
        release_recording_lock(run_dir, lock)


LOOK_EVERY_S = 0.5  # how often the parent reads its bays' folders for progress


def _worker_argv(request: RunRequest, station: StationConfig, bay: str, folder: Path) -> list[str]:
    """pytest's argv for the worker of `bay`, which records it in `folder`: its share of the run is
    handed over as a request file there (read by phonebench.fixtures.options), not as options."""
    phones = next(list(b.duts) for b in station.bays if b.name == bay)
    bay_request = request.for_bay(bay, phones, folder)
    folder.mkdir(parents=True, exist_ok=True)
    write_atomically(folder / REQUEST_FILE, bay_request.to_json())
    return bay_request.pytest_argv(*Console(quiet=True).pytest_options(), *junit_options(folder), RUN_REQUEST_OPTION,
                                   str(folder / REQUEST_FILE), "--bay-worker")


def _say(view: ProgressView | None, line: str, quiet: bool) -> None:
    """A line of the parent's own (a bay started or ended), above the bars when there are bars."""
    if quiet:
        return
    if view is not None:
        view.show([line])
    else:
        print(line, flush=True)


def _die_with_parent() -> None:
    """In a bay worker, before pytest starts: when the parent dies however it dies (kill -9
    included), the kernel sends the worker SIGINT, and pytest ends its session recording the bay
    as incomplete, so nothing outlives a killed run (Linux prctl; elsewhere the worker finishes).

    SIGINT is set back to its default first: a bench started with it ignored (a script's
    background job, `bench run … &`) would pass that on, Python would then raise no
    KeyboardInterrupt in the worker, and neither the parent's stop nor its death would end it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGINT)
    except (OSError, AttributeError):
        pass


_PR_SET_PDEATHSIG = 1


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _finish(run_dir: Path, record: dict[str, Any], outcomes: list[BayOutcome], store: str,
            token: str | None = None) -> dict[str, Any]:
    data = merge_bays(run_dir, record, outcomes, token)
    drop_run_token(run_dir.name)  # merged: no later merge of this run needs it
    _point_latest(run_dir)
    refused = _store(run_dir, data, store)
    if refused is not None:
        data["store_refused"] = refused  # the caller says how to add it (exit code 9)
    if "rescued_to" not in data:  # the report is rendered from results.json on disk
        _render(run_dir)
    return data


def _point_latest(run_dir: Path) -> None:
    latest = run_dir.parent / "latest"
    try:
        if latest.is_symlink() or latest.exists():
            latest.unlink()
        latest.symlink_to(run_dir.name, target_is_directory=True)
    except OSError as exc:
        log.warning("could not update %s: %s", latest, exc)


def _store(run_dir: Path, data: dict[str, Any], store: str) -> str | None:
    """Store the merged run; None when the store has it all, else why not (results.json has all)."""
    from ..store import StoreError, StoreSink

    try:
        sink = StoreSink(store, run_dir.parent)
    except StoreError as exc:
        return str(exc).splitlines()[0]
    try:
        sink.run_updated(data, "finish", data["status"])
        if sink.stored_tests < len(data["tests"]):
            return f"the results store has {sink.stored_tests} of this run's {len(data['tests'])} tests"
    except StoreError as exc:  # results.json is complete; `bench store-import` adds it later
        log.error("run %s not stored: %s", run_dir.name, exc)
        return str(exc).splitlines()[0]
    finally:
        sink.close()
    return None


def _render(run_dir: Path) -> None:
    from phonebench.core.errors import BenchError
    from ..report import render_run

    try:
        render_run(run_dir)
    except BenchError as exc:
        log.error("report for %s not rendered: %s", run_dir.name, exc)
