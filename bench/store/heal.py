"""Runs a killed bench left behind, healed by the next start (`bench run`, `bench runs`, any run
recording into the store): a run stored as running whose recording process is gone, or a run
folder whose results.json says running while nobody holds its recording lock, is marked
incomplete in results.json and in the store, and the store is brought level with results.json
(what `bench store-import` does), so nothing measured before the kill is missing from either."""
from __future__ import annotations

import json
import logging
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from phonebench.core.files import WriteFailed, write_atomically
from ..results.aggregate import merge_bays, orphaned_bays
from ..results.run_record import RECORDING_LOCK, drop_run_token, recorder_alive
from .db import StoreError
from .importer import read_results

if TYPE_CHECKING:  # the store module imports this one
    from .store import RunningRun, Store

log = logging.getLogger(__name__)

KILLED_NOTE = "the bench stopped while recording this run (killed or a power cut); marked incomplete at the next start"


@dataclass(frozen=True)
class Healed:
    run_id: str
    results: Path | None  # the results.json it was reconciled with; None when there was none
    tests_stored: int | None  # tests in the store afterwards (None: the store only marked it)
    tests_added: int = 0
    status: str = "incomplete"  # the run's status afterwards (complete if killed after its last record)
    problem: str = ""  # why it could not be reconciled, if it could not

    def __str__(self) -> str:
        if self.problem:
            return f"run {self.run_id} was killed: marked incomplete in the store; {self.problem}"
        if self.results is None:
            return f"run {self.run_id} was killed: marked incomplete in the store (its results.json is gone)"
        marked = "marked incomplete" if self.status == "incomplete" else f"its record was already {self.status}"
        return (f"run {self.run_id} was killed: {marked}; the store has its {self.tests_stored} tests "
                f"from {self.results} ({self.tests_added} added)")


def heal_killed_runs(store: Store, results_dir: Path | None = None) -> list[Healed]:
    """Find and heal every killed run of `store`, and of the run folders in `results_dir`."""
    healed: list[Healed] = []
    for run in store.running_runs():
        run_dir = Path(run.run_dir) if run.run_dir else None
        if not _provably_gone(run, recorder_alive(run_dir) if run_dir is not None else None):
            continue
        healed.append(_heal(store, run.run_id, run_dir))
    done = {h.run_id for h in healed}
    if results_dir is not None and Path(results_dir).is_dir():
        # only folders still holding a recording lock: a finished run has none, so this stays cheap
        for lock in sorted(Path(results_dir).glob(f"*/{RECORDING_LOCK}")):
            run_dir = lock.parent
            if run_dir.name in done or run_dir.is_symlink() or recorder_alive(run_dir) is not False:
                continue
            orphans = orphaned_bays(run_dir)
            if orphans is not None:  # a bays run killed before its merge: merge what the bays kept
                merge_bays(run_dir, *orphans)
                drop_run_token(run_dir.name)
            if (run_dir / "results.json").is_file():
                healed.append(_heal(store, run_dir.name, run_dir))
            else:  # killed before its first record: nothing measured, nothing to heal
                _drop_lock(run_dir)
    for item in healed:
        log.info("%s", item)
    return healed


def _provably_gone(run: RunningRun, lock_held: bool | None) -> bool:
    """A stored running run is healed only when its recorder is provably gone: its recording lock
    is free and, on this host, its process is dead too (another host's lock may not be visible
    here: its free lock or a lapsed lease says it); with no lock to read, by process or lease
    alone. Another process merely opening the store never makes a live run dead."""
    if lock_held:
        return False
    if lock_held is False and run.host is not None and run.host != socket.gethostname():
        return True
    return run.recorder_gone


def _heal(store: Store, run_id: str, run_dir: Path | None) -> Healed:
    if run_dir is None or not (run_dir / "results.json").is_file():
        store.set_status(run_id, "incomplete")
        return Healed(run_id, None, None)
    results = run_dir / "results.json"
    try:
        data = read_results(results)
        if data.get("status") == "running":
            data = {**data, "status": "incomplete", "problems": [*(data.get("problems") or []), KILLED_NOTE]}
            write_atomically(results, json.dumps(data, indent=1))
        other = store.other_run(data)
        if other is not None:
            raise StoreError(f"the store has {other} under its id; {results} is kept as it is")
        synced = store.sync_run(data, run_dir=run_dir)
    except (StoreError, WriteFailed, KeyError, TypeError, ValueError, AttributeError) as exc:
        store.set_status(run_id, "incomplete")
        _drop_lock(run_dir)  # said once; `bench store-import` is the way on from here
        return Healed(run_id, results, None, problem=f"{results}: {str(exc).splitlines()[0]}")
    _drop_lock(run_dir)
    return Healed(data["run_id"], results, synced.tests_stored, synced.tests_added, str(data.get("status")))


def _drop_lock(run_dir: Path) -> None:
    try:
        (run_dir / RECORDING_LOCK).unlink()
    except OSError:
        pass
