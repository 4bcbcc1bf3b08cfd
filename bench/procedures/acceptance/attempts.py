"""Every acceptance attempt of every unit, in the results store: scanned serial, attempt number,
outcome and reason, the run that holds its results, cycle time and the bench's own overhead.

An attempt is written when it starts ("running", with the recording process) and completed when
it ends, so a bench killed mid-attempt (a power cut) leaves a row that reads as incomplete once
its process is gone, next to the run's finished tests.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import socket
from dataclasses import dataclass, field
from typing import Any, Iterator

from sqlalchemy import func, select
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import Session

from ...store import StoreError, chain, db
from ...store.models import AcceptanceAttempt, Station
from ...store.store import Store, effective_status, iso, station_id

log = logging.getLogger(__name__)

RUNNING, PASS, FAIL, INCOMPLETE, WRONG_UNIT, REFUSED = "running", "pass", "fail", "incomplete", "wrong-unit", "refused"
KILLED_REASON = "the bench stopped during the attempt (power cut or kill); finished results are kept"


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


@dataclass
class AttemptRecord:
    serial: str
    attempt: int
    outcome: str  # effective: a "running" row whose process is gone reads "incomplete"
    reason: str | None
    run_id: str | None
    started: str | None
    finished: str | None
    cycle_s: float | None
    overhead_s: float | None
    station: str | None
    batch: str | None
    read_serial: str | None = None
    retest_of: int | None = None
    failing: list[dict[str, Any]] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    operator: str | None = None  # who scanned the unit (the page's signed-in operator, or the station's)
    id: int | None = None


class AttemptBook:
    """Acceptance attempts in one results store (a phonebench.bench.store.Store)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def start(self, serial: str, *, station: str | None, batch: str | None = None, retest_of: int | None = None,
              operator: str | None = None, details: dict[str, Any] | None = None) -> AttemptRecord:
        """A new attempt of this unit (numbered after every earlier one), outcome running."""
        return self._insert(serial, RUNNING, None, station=station, batch=batch, retest_of=retest_of,
                            operator=operator, details=details, finished=False)

    def record(self, serial: str, outcome: str, reason: str, *, station: str | None, batch: str | None = None,
               read_serial: str | None = None, operator: str | None = None,
               details: dict[str, Any] | None = None) -> AttemptRecord:
        """An attempt that ended before any test ran (wrong unit, unreadable serial, refused)."""
        return self._insert(serial, outcome, reason, station=station, batch=batch, operator=operator,
                            details=details, finished=True, read_serial=read_serial)

    def _insert(self, serial: str, outcome: str, reason: str | None, *, station: str | None, batch: str | None,
                operator: str | None, details: dict[str, Any] | None, finished: bool,
                retest_of: int | None = None, read_serial: str | None = None) -> AttemptRecord:
        for attempt in (1, 2, 3):
            try:
                with Session(db.writer(self.store.engine), expire_on_commit=False) as s, s.begin():
                    number = (s.scalar(select(func.max(AcceptanceAttempt.attempt))
                                       .where(AcceptanceAttempt.serial == serial)) or 0) + 1
                    now = _now()
                    row = AcceptanceAttempt(
                        serial=serial, attempt=number, read_serial=read_serial, station_id=station_id(s, station),
                        batch=batch, outcome=outcome, reason=reason, failing=[], retest_of=retest_of, started=now,
                        finished=now if finished else None, cycle_s=0.0 if finished else None, operator=operator,
                        recorder_host=socket.gethostname(), recorder_pid=os.getpid(), details=dict(details or {}))
                    s.add(row)
                    s.flush()
                    _chain(s, row, "insert")
                    return _record(row, station)
            except IntegrityError as exc:  # another station numbered the same unit at once
                if attempt == 3:
                    raise db.database_error(exc, self.store.url) from None
            except DBAPIError as exc:
                raise db.database_error(exc, self.store.url) from None
        raise AssertionError("unreachable")

    def update(self, record: AttemptRecord, **changes: Any) -> None:
        """Write fields of a started attempt as they become known (run_id, read_serial, ...)."""
        with self._session() as s:
            row = _attempt_row(s, record.id)
            for key, value in changes.items():
                setattr(row, key, value)
                setattr(record, key, value)
            s.flush()
            _chain(s, row, "state")

    def dispose(self, serial: str, station: str | None, disposition: str, operator: str = "") -> AttemptRecord | None:
        """The operator's decision on a unit's last attempt (e.g. "repair"), kept with that attempt."""
        found = self.attempts(serial=serial, station=station)
        if not found:
            return None
        last = found[-1]
        with self._session() as s:
            row = _attempt_row(s, last.id)
            row.details = {**(row.details or {}), "disposition": disposition, "disposed_by": operator,
                           "disposed_at": iso(_now())}
            last.details = dict(row.details)
            s.flush()  # the one change of a finished attempt: chained with who decided and what
            _chain(s, row, "state", by=operator or None, reason=f"disposition: {disposition}")
        return last

    def finish(self, record: AttemptRecord, outcome: str, reason: str | None, *, failing: list[dict[str, Any]],
               cycle_s: float, overhead_s: float | None, details: dict[str, Any] | None = None) -> None:
        with self._session() as s:
            row = _attempt_row(s, record.id)
            row.outcome, row.reason, row.failing = outcome, reason, list(failing)
            row.finished, row.cycle_s, row.overhead_s = _now(), cycle_s, overhead_s
            row.details = {**(row.details or {}), **(details or {})}
            s.flush()
            _chain(s, row, "state")
        record.outcome, record.reason, record.failing = outcome, reason, list(failing)
        record.cycle_s, record.overhead_s = cycle_s, overhead_s

    @contextlib.contextmanager
    def _session(self) -> Iterator[Session]:
        try:
            with Session(db.writer(self.store.engine), expire_on_commit=False) as s, s.begin():
                yield s
        except DBAPIError as exc:
            raise db.database_error(exc, self.store.url) from None

    # --- reading ----------------------------------------------------------------------------
    def attempts(self, serial: str | None = None, batch: str | None = None, station: str | None = None,
                 limit: int | None = None) -> list[AttemptRecord]:
        """Oldest first."""
        query = select(AcceptanceAttempt, Station.name).outerjoin(Station, AcceptanceAttempt.station_id == Station.id)
        if serial is not None:
            query = query.where(AcceptanceAttempt.serial == serial)
        if batch is not None:
            query = query.where(AcceptanceAttempt.batch == batch)
        if station is not None:
            query = query.where(Station.name == station)
        query = query.order_by(AcceptanceAttempt.started.desc(), AcceptanceAttempt.id.desc())
        if limit:
            query = query.limit(limit)
        try:
            with Session(self.store.engine) as s:
                rows = list(s.execute(query))
        except DBAPIError as exc:
            raise db.database_error(exc, self.store.url) from None
        return [_record(row, name) for row, name in reversed(rows)]

    def takt_s(self, station: str, last: int = 20) -> float | None:
        """Mean cycle time of the station's last finished unit attempts (its takt as run)."""
        done = [a for a in self.attempts(station=station, limit=5 * last)
                if a.outcome in (PASS, FAIL, INCOMPLETE) and a.cycle_s]
        done = done[-last:]
        return sum(a.cycle_s or 0.0 for a in done) / len(done) if done else None  # each one set: filtered above


def _chain(s: Session, row: AcceptanceAttempt, action: str, by: str | None = None, reason: str | None = None) -> None:
    """The attempt's entry in the store's hash chain (a running attempt gets one per change)."""
    chain.chain_records(s.connection(), "acceptance_attempts", [row.id], action=action, run_id=row.run_id,
                        labels={row.id: f"{row.serial} attempt {row.attempt}"}, by=by, reason=reason,
                        only_changed=action != "insert")


def _attempt_row(s: Session, attempt_id: int | None) -> AcceptanceAttempt:
    """The stored row of an attempt this book began (one removed under it is the store's fault)."""
    row = s.get(AcceptanceAttempt, attempt_id)
    if row is None:
        raise StoreError(f"acceptance attempt {attempt_id} is no longer in the store")
    return row


def _record(row: AcceptanceAttempt, station: str | None) -> AttemptRecord:
    outcome, reason = row.outcome, row.reason
    if outcome == RUNNING and effective_status("running", row.recorder_host, row.recorder_pid,
                                               row.started) == "incomplete":
        outcome, reason = INCOMPLETE, KILLED_REASON
    return AttemptRecord(serial=row.serial, attempt=row.attempt, outcome=outcome, reason=reason, run_id=row.run_id,
                         started=iso(row.started), finished=iso(row.finished), cycle_s=row.cycle_s,
                         overhead_s=row.overhead_s, station=station, batch=row.batch, read_serial=row.read_serial,
                         retest_of=row.retest_of, failing=list(row.failing or []), details=dict(row.details or {}),
                         operator=row.operator, id=row.id)
