"""The store as a RunRecorder sink: every recorder event brings the stored run up to date in one
transaction, so each test is committed when it ends and a killed run keeps what it finished."""
from __future__ import annotations

import logging
import os
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .db import StoreError, describe

if TYPE_CHECKING:  # annotations only
    from .store import Store

log = logging.getLogger(__name__)

RETRY_AFTER_S = 60.0  # an unreachable database is not retried on every test (each try can take seconds)


class StoreSink:
    """phonebench.bench.results.run_record.ResultSink writing to the results store.

    `target` is an open Store, or a URL/path opened on the first event, so an unreachable
    database fails the sink (the recorder logs it and keeps results.json) and never the run.
    Raw data stays in the run folder, <results_dir>/<run_id>; the store keeps that location.
    """

    def __init__(self, target: str | Path | Store, results_dir: str | Path | None = None,
                 retry_after_s: float = RETRY_AFTER_S) -> None:
        # A URL or path is opened (and closed) by the sink; an open Store stays its owner's.
        self._location = target if isinstance(target, (str, Path)) else None
        self._store: Store | None = None if isinstance(target, (str, Path)) else target
        self.results_dir = Path(results_dir) if results_dir is not None else None
        self.retry_after_s = retry_after_s
        self._down_since: float | None = None
        self._down_error: StoreError | None = None
        self._claimed = False
        self.refused: StoreError | None = None  # the run id is another run's in the store
        self.stored_tests = 0
        self.healed: list[Any] | None = None  # killed runs healed when this one started (phonebench.bench.store.heal)

    def run_updated(self, data: dict[str, Any], event: str, payload: object) -> None:
        if self.refused is not None:
            raise self.refused
        store = self._open(retry_now=event == "finish")  # the last event always tries again
        run_dir = self.results_dir / data["run_id"] if self.results_dir is not None else None
        if self.healed is None:
            self._heal(store)
        if not self._claimed:
            self._claim(store, data["run_id"], run_dir)
        try:
            result = store.sync_run(data, run_dir=run_dir, recorder=(socket.gethostname(), os.getpid()))
        except StoreError as exc:
            self._mark_down(exc)
            folder = run_dir or data["run_id"]
            raise StoreError(f"{exc.args[0].splitlines()[0]}; the store has {self.stored_tests} of this run's "
                             f"{len(data.get('tests') or [])} tests",
                             hint=f"`bench store-import {folder}` adds the rest once the store works") from None
        if self._down_since is not None:
            log.warning("results store %s is back: caught up to %d tests", describe(store.url), result.tests_stored)
        self._down_since = self._down_error = None
        self.stored_tests = result.tests_stored

    def _heal(self, store: Store) -> None:
        """Before this run's first record: heal the runs a killed bench left in this store."""
        from .heal import heal_killed_runs

        try:
            self.healed = heal_killed_runs(store, self.results_dir)
            for healed in self.healed:
                log.warning("%s", healed)
        except StoreError as exc:  # this run still records; the next start tries again
            log.warning("results store %s: killed runs not checked: %s", describe(store.url), exc)
            self.healed = []

    def _claim(self, store: Store, run_id: str, run_dir: Path | None) -> None:
        """Refuse to add to a stored run of the same id that another recorder wrote: two runs'
        tests must never mix under one summary."""
        try:
            existing = store.run_owner(run_id)
        except StoreError as exc:
            self._mark_down(exc)
            raise
        if existing is not None and existing != (socket.gethostname(), os.getpid()):
            self.refused = StoreError(
                f"results store {describe(store.url)} already has a run {run_id!r} (recorded by "
                f"{existing[0]} pid {existing[1]}); this run is kept in {run_dir or run_id}/results.json only",
                hint="run ids are never reused: run again without --run-id, or with a new one")
            raise self.refused
        self._claimed = True

    def _open(self, retry_now: bool = False) -> Store:
        if not retry_now and self._down_since is not None and \
                time.monotonic() - self._down_since < self.retry_after_s:
            raise StoreError(f"results store still unavailable (not retried for {self.retry_after_s:.0f} s): "
                             f"{self._down_error}")
        if self._store is None and self._location is not None:
            from .store import open_store

            try:
                self._store = open_store(self._location)
            except StoreError as exc:
                self._mark_down(exc)
                raise
        if self._store is None:  # the owner's store, after close()
            raise StoreError("results store closed")
        return self._store

    def _mark_down(self, exc: StoreError) -> None:
        if self._down_since is None:
            self._down_error = exc
        self._down_since = time.monotonic()

    def close(self) -> None:
        if self._store is not None and self._location is not None:
            self._store.close()
        self._store = None
