"""The results store: runs written as they grow (one transaction per test), read back as
results.json-shaped records, listed, and queried across runs for the compatibility matrix."""
from __future__ import annotations

import datetime as dt
import itertools
import logging
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Unpack

from sqlalchemy import ColumnElement, Engine, Executable, Row, exists, func, insert, or_, select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import Session, aliased, selectinload
from sqlalchemy.orm.exc import StaleDataError

from phonebench.core.dburl import to_url
from phonebench.core.killpoints import kill_point
from phonebench.core.records import TestRecord
from phonebench.core.verdict import VERDICT_FIELDS
from ..results.matrix import FINGERPRINT_NAMES, DutSighting, VerdictFact
from . import chain, db
from .amend import ChangedRun, run_difference
from .importer import read_results, run_folders
from .models import (
    DutUnit,
    InstrumentUnit,
    MEASUREMENT_FIELDS,
    TEST_FIELDS,
    Measurement,
    RawRef,
    Run,
    RunDut,
    RunInstrument,
    Station,
    TestResult,
)

log = logging.getLogger(__name__)

STALE_AFTER = dt.timedelta(hours=6)  # a "running" run not updated for this long was killed
AMENDED = "/amended-"  # an amendment's row is "<run_id>/amended-<n>": a run id is a plain name, never has "/"


def logical_run_id(stored: str) -> str:
    """The run id a person uses, of any version of a run."""
    return stored.split(AMENDED, 1)[0]


def versions_of(run_id: str) -> ColumnElement[bool]:
    """Every stored version of a run: the original and its amendments."""
    return or_(Run.run_id == run_id, Run.run_id.startswith(run_id + AMENDED, autoescape=True))


def current_runs() -> ColumnElement[bool]:
    """Runs no amendment supersedes (what every reader uses; the originals stay readable)."""
    newer = aliased(Run)
    return ~exists(select(newer.id).where(newer.supersedes == Run.id))


def open_store(url_or_path: str | Path) -> Store:
    """Open (creating or migrating if needed) the store at a URL or SQLite path.

    Raises StoreError, naming the database and what to do, when it is unreachable, corrupt, not a
    phonebench store or from a newer phonebench; a database that is not ours is never written to.
    """
    url = to_url(url_or_path)
    engine = db.create_store_engine(url)
    parsed = make_url(db.engine_url(url))
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        path = Path(parsed.database)
        tables, current = db.inspect_sqlite_file(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise db.StoreError(f"cannot create the folder for results database {path}: {exc}") from None
    else:
        tables, current = db.inspect_database(engine, url)
    try:
        db.prepare_schema(engine, url, tables, current)
    except BaseException:
        engine.dispose()
        raise
    return Store(engine, url)


def utc(text: str | None) -> dt.datetime | None:
    """An ISO timestamp as naive UTC (how the store keeps time on every database)."""
    if not text:
        return None
    stamp = dt.datetime.fromisoformat(text)
    if stamp.tzinfo is not None:
        stamp = stamp.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return stamp


def iso(stamp: dt.datetime | None) -> str | None:
    return None if stamp is None else stamp.replace(tzinfo=dt.timezone.utc).isoformat(timespec="seconds")


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


def effective_status(status: str, host: str | None, pid: int | None, updated: dt.datetime | None,
                     now: dt.datetime | None = None) -> str:
    """"running" as stored is only true while the recording process lives; otherwise the run was
    killed and is incomplete (everything committed before the kill is kept)."""
    if status != "running":
        return status
    if host is not None and pid is not None and host == socket.gethostname():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return "incomplete"
        except PermissionError:
            return "running"  # alive, owned by someone else
        return "running"
    if updated is None or (now or _now()) - updated > STALE_AFTER:
        return "incomplete"
    return "running"


@dataclass
class SyncResult:
    run_id: str
    tests_added: int
    measurements_added: int
    tests_stored: int
    amended: bool = False  # stored as an amendment of the run (Store.sync_run(amend=...))


@dataclass
class RunningRun:
    """A run stored as running, and who records it."""

    run_id: str
    run_dir: str | None
    host: str | None
    pid: int | None
    updated: dt.datetime | None

    @property
    def recorder_gone(self) -> bool:
        return effective_status("running", self.host, self.pid, self.updated) != "running"


@dataclass
class RunInfo:
    run_id: str
    station: str | None
    status: str  # effective: running, complete, incomplete
    started: str | None
    finished: str | None
    duts: list[str]
    summary: dict[str, int]
    run_dir: str | None


@dataclass
class LabTimeFact:
    """One stored test's lab time, and the sample counts its verdicts required (name, n_required)."""

    run_id: str
    nodeid: str
    dut: str | None
    lab_time_s: float
    samples: tuple[tuple[str, int], ...]


@dataclass
class StoredRun:
    data: dict[str, Any]  # the results.json shape
    run_dir: Path | None


class Store:
    """One results database. Thread-compatible, not thread-safe: one Store per thread."""

    def __init__(self, engine: Engine, url: str) -> None:
        self.engine = engine
        self.url = url

    def __repr__(self) -> str:
        return f"Store({db.describe(self.url)})"

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- writing ----------------------------------------------------------------------------
    def sync_run(self, data: dict[str, Any], run_dir: str | Path | None = None,
                 recorder: tuple[str, int] | None = None, amend: tuple[str, str] | None = None) -> SyncResult:
        """Bring the stored run up to date with a results.json record in one transaction: run,
        station, DUTs and instruments upserted, tests not stored yet appended, each chained
        (chain.py). Idempotent, so a sink that missed events (database briefly down) catches up on
        the next one.

        Without a recorder (an import, a heal) what is stored is never changed: a record that
        differs from it is refused (ChangedRun) unless `amend` is (by, reason), which stores it as
        a new version superseding the current one; one that only adds tests completes the run."""
        deadline = time.monotonic() + db.SQLITE_LOCK_TIMEOUT_S
        for attempt in itertools.count(1):
            try:
                with Session(db.writer(self.engine), expire_on_commit=False) as session, session.begin():
                    if amend is not None:
                        return self._amend(session, data, run_dir, *amend)
                    return self._sync(session, data, run_dir, recorder)
            except IntegrityError as exc:
                if attempt >= 3:
                    raise db.database_error(exc, self.url) from None
                log.debug("concurrent insert of a shared row (station, unit); retrying")  # another station won
            except StaleDataError as exc:  # a row changed under this transaction: read again, once more
                if attempt >= 3:
                    raise db.StoreError(f"results store {db.describe(self.url)}: run {data.get('run_id')} changed "
                                        f"while it was stored ({exc})",
                                        hint="results.json has the whole run; `bench store-import` adds it") from None
                log.warning("run %s changed while it was stored; storing it again", data.get("run_id"))
            except DBAPIError as exc:
                if exc.orig is None or not db.is_transient(exc.orig) or time.monotonic() >= deadline:
                    raise db.database_error(exc, self.url) from None
                time.sleep(min(0.05 * attempt, 1.0))  # another process's checkpoint or lock: wait it out
        raise AssertionError("unreachable")

    def _current(self, s: Session, run_id: str) -> Run | None:
        return s.scalar(select(Run).where(versions_of(run_id), current_runs()).order_by(Run.id.desc()).limit(1))

    def _sync(self, s: Session, data: dict[str, Any], run_dir: str | Path | None,
              recorder: tuple[str, int] | None) -> SyncResult:
        run = self._current(s, data["run_id"])
        action = "insert" if run is None else "state"
        if run is None:
            run = Run(run_id=data["run_id"])  # added once its header is set (_fill)
        elif recorder is None:  # an import or a heal: what is stored stays as it is
            difference = run_difference(_run_record(run, raw_status=True), data)
            if difference is not None:
                raise ChangedRun(data["run_id"], difference)
        return self._fill(s, run, data, run_dir, recorder, action)

    def _amend(self, s: Session, data: dict[str, Any], run_dir: str | Path | None, by: str, reason: str,
               ) -> SyncResult:
        if not by.strip() or not reason.strip():
            raise db.StoreError(f"run {data['run_id']}: an amendment names who makes it and why",
                                hint="give --by NAME and --reason TEXT")
        old = self._current(s, data["run_id"])
        if old is None:
            raise db.StoreError(f"run {data['run_id']} is not in results store {db.describe(self.url)}: there is "
                                "nothing to amend", hint="import it without --amend")
        if run_difference(_run_record(old, raw_status=True), data, strict=True) is None:
            stored = len(old.tests)
            return SyncResult(data["run_id"], 0, 0, stored)  # identical: nothing to amend
        count = s.scalar(select(func.count()).select_from(Run).where(versions_of(data["run_id"]))) or 1
        run = Run(run_id=f"{data['run_id']}{AMENDED}{count}", supersedes=old.id, amended_by=by.strip(),
                  amend_reason=reason.strip())
        result = self._fill(s, run, data, run_dir, None, "amend", amends=(old.id, by.strip(), reason.strip()))
        log.warning("run %s amended by %s (%s): stored as %s, superseding %s", data["run_id"], by, reason,
                    run.run_id, old.run_id)
        return SyncResult(result.run_id, result.tests_added, result.measurements_added, result.tests_stored,
                          amended=True)

    def _fill(self, s: Session, run: Run, data: dict[str, Any], run_dir: str | Path | None,
              recorder: tuple[str, int] | None, action: str,
              amends: tuple[int, str, str] | None = None) -> SyncResult:
        station = data.get("station") or {}
        station_row = self._station(s, station) if station.get("name") else None
        run.station = station_row
        run.status = data.get("status") or "running"
        run.started = utc(data.get("started"))
        run.finished = utc(data.get("finished"))
        run.code_version = data.get("code_version")
        run.station_record = station
        run.summary = data.get("summary") or {}
        run.updated = _now()
        if run_dir is not None:
            run.run_dir = str(Path(run_dir).resolve())
        if recorder is not None:
            run.recorder_host, run.recorder_pid = recorder
        if run not in s:
            s.add(run)
        s.flush()
        duts = self._sync_duts(s, run, data.get("duts") or {})
        for name, seconds in (data.get("lab_time_s") or {}).items():
            if name in duts and duts[name].lab_time_s != seconds:
                duts[name].lab_time_s = seconds
        self._sync_instruments(s, run, data.get("instruments") or {})
        stored = s.scalar(select(func.count()).select_from(TestResult).where(TestResult.run_pk == run.id)) or 0
        tests = data.get("tests") or []
        added_measurements = 0
        added: dict[int, str | None] = {}
        for seq in range(stored, len(tests)):
            test_pk, count = self._add_test(s, run, seq, tests[seq], duts)
            added[test_pk], added_measurements = tests[seq].get("nodeid"), added_measurements + count
        s.flush()
        self._chain_run(s, run, action, added, amends)
        kill_point("store-commit")
        return SyncResult(data["run_id"], len(tests) - stored, added_measurements, len(tests))

    def _chain_run(self, s: Session, run: Run, action: str, added_tests: dict[int, str | None],
                   amends: tuple[int, str, str] | None = None) -> None:
        """The run header's entry (when its content changed) and one per new test, at the chain head."""
        conn = s.connection()
        chain.lock_head(conn)  # before reading what the head says
        supersedes, by, reason = amends if amends is not None else (None, None, None)
        run_id = logical_run_id(run.run_id)
        entries = chain.record_entries(conn, "runs", [run.id], action=action, run_id=run_id, labels={run.id: run_id},
                                       supersedes=supersedes, by=by, reason=reason, only_changed=True)
        entries += chain.record_entries(conn, "tests", list(added_tests), run_id=run_id, labels=added_tests)
        chain.append(conn, entries)

    def _station(self, s: Session, record: dict[str, Any]) -> Station:
        station = station_row(s, record["name"])
        station.host = record.get("host")
        station.location = record.get("location")
        return station

    def _sync_duts(self, s: Session, run: Run, duts: dict[str, Any]) -> dict[str, RunDut]:
        existing = {d.name: d for d in s.scalars(select(RunDut).where(RunDut.run_pk == run.id))}
        for name, ident in duts.items():
            row = existing.get(name)
            if row is not None and row.identity == ident:
                continue
            if row is None:
                row = existing[name] = RunDut(run_pk=run.id, name=name)
                s.add(row)
            serial = ident.get("serial") or None
            row.identity = ident
            row.address = ident.get("address")
            row.serial = serial
            row.soc_manufacturer = ident.get("soc_manufacturer")
            row.soc_model = ident.get("soc_model")
            row.build_fingerprint = ident.get("build_fingerprint")
            row.runtime_version = ident.get("runtime_version")
            row.microcode = ident.get("microcode")
            row.error = ident.get("error")
            row.unit_id = self._dut_unit(s, ident).id if serial else None
        return existing

    def _dut_unit(self, s: Session, ident: dict[str, Any]) -> DutUnit:
        unit = s.scalar(select(DutUnit).where(DutUnit.serial == ident["serial"]))
        if unit is None:
            unit = DutUnit(serial=ident["serial"])
            s.add(unit)
        unit.soc_manufacturer = ident.get("soc_manufacturer")
        unit.soc_model = ident.get("soc_model")
        unit.product_model = ident.get("product_model")
        s.flush()
        return unit

    def _sync_instruments(self, s: Session, run: Run, instruments: dict[str, Any]) -> None:
        existing = {i.role: i for i in s.scalars(select(RunInstrument).where(RunInstrument.run_pk == run.id))}
        for role, record in instruments.items():
            row = existing.get(role)
            ident = record.get("identity") or {}
            if row is not None and row.identity == ident and row.calibration == record.get("calibration") \
                    and row.address == record.get("address"):
                continue
            if row is None:
                row = RunInstrument(run_pk=run.id, role=role)
                s.add(row)
            row.family = record.get("family")
            row.address = record.get("address")
            row.attached_to = record.get("attached_to")
            row.identity = ident
            row.firmware = ident.get("firmware")
            row.calibration = record.get("calibration")
            row.unit_id = None
            if ident.get("manufacturer") and ident.get("model") and ident.get("serial"):
                row.unit_id = self._instrument_unit(s, ident).id

    def _instrument_unit(self, s: Session, ident: dict[str, Any]) -> InstrumentUnit:
        key = (ident["manufacturer"], ident["model"], ident["serial"])
        unit = s.scalar(select(InstrumentUnit).where(InstrumentUnit.manufacturer == key[0],
                                                     InstrumentUnit.model == key[1],
                                                     InstrumentUnit.serial == key[2]))
        if unit is None:
            unit = InstrumentUnit(manufacturer=key[0], model=key[1], serial=key[2])
            s.add(unit)
            s.flush()
        return unit

    def _add_test(self, s: Session, run: Run, seq: int, test: dict[str, Any], duts: dict[str, RunDut],
                  ) -> tuple[int, int]:
        TestRecord.from_dict(test)  # a malformed record raises here (TypeError/ValueError), before any row
        # Bulk inserts, not ORM objects: a test can carry thousands of verdicts and the sink
        # writes each test inside the run's critical path.
        # SQLAlchemy's stubs type scalar()'s parameters as one row's mapping; a list of one row runs as well.
        test_pk = s.scalar(insert(TestResult).returning(TestResult.id), [{  # type: ignore[call-overload]
            "run_pk": run.id, "seq": seq, **{name: test.get(name) for name in TEST_FIELDS},
            "message": test.get("message") or "", "markers": list(test.get("markers") or [])}])
        verdicts = test.get("verdicts") or []
        if not verdicts:
            return test_pk, 0
        rows = [{"test_pk": test_pk, "run_pk": run.id, "dut": test.get("dut"), "seq": index,
                 **{name: v.get(name) for name in MEASUREMENT_FIELDS},
                 "detail": v.get("detail") or "", "extra": v.get("extra") or {}} for index, v in enumerate(verdicts)]
        ids = s.scalars(insert(Measurement).returning(Measurement.id, sort_by_parameter_order=True), rows).all()
        raw = [{"measurement_pk": pk, "path": path} for pk, v in zip(ids, verdicts) for path in v.get("raw") or []]
        if raw:
            s.execute(insert(RawRef), raw)
        for v in verdicts:
            if v["name"] in FINGERPRINT_NAMES and test.get("dut") in duts:
                duts[test["dut"]].fingerprint = v.get("extra") or {}
        return test_pk, len(rows)

    def running_runs(self) -> list[RunningRun]:
        """Runs stored as "running": being recorded, or left so by a process that was killed."""
        try:
            with self.engine.connect() as conn:
                rows = conn.execute(select(Run.run_id, Run.run_dir, Run.recorder_host, Run.recorder_pid, Run.updated)
                                    .where(Run.status == "running", current_runs())).all()
        except DBAPIError as exc:
            raise db.database_error(exc, self.url) from None
        return [RunningRun(logical_run_id(row[0]), *row[1:]) for row in rows]

    def set_status(self, run_id: str, status: str) -> None:
        try:
            with Session(db.writer(self.engine)) as s, s.begin():
                run = self._current(s, run_id)
                if run is not None and run.status != status:
                    run.status, run.updated = status, _now()
                    s.flush()
                    self._chain_run(s, run, "state", {})
        except DBAPIError as exc:
            raise db.database_error(exc, self.url) from None

    def run_owner(self, run_id: str) -> tuple[str | None, int | None] | None:
        """(host, pid) of the recorder of a stored run, None if the store has no such run."""
        row = self._run_row(run_id)
        return None if row is None else (row[0], row[1])

    def other_run(self, data: dict[str, Any]) -> str | None:
        """A description of the stored run with `data`'s run id if it is another run (started at
        another time: the identity that survives moving a folder), else None."""
        row = self._run_row(data["run_id"])
        try:
            started = utc(data.get("started"))
        except (TypeError, ValueError):
            started = None
        if row is None or row[2] == started:
            return None
        return f"another run {data['run_id']!r} (started {iso(row[2])}, folder {row[3] or 'not recorded'})"

    def _run_row(self, run_id: str) -> Row[str | None, int | None, dt.datetime | None, str | None] | None:
        try:
            with self.engine.connect() as conn:
                return conn.execute(select(Run.recorder_host, Run.recorder_pid, Run.started, Run.run_dir)
                                    .where(versions_of(run_id), current_runs())).first()
        except DBAPIError as exc:
            raise db.database_error(exc, self.url) from None

    def import_folder(self, folder: str | Path, amend: tuple[str, str] | None = None) -> list[SyncResult]:
        """Import a run folder (with results.json), or every run folder inside a folder (`bench
        store-import`: runs made while the store was unreachable). A run the store has is only
        completed (tests it lacks added); one that differs is refused (ChangedRun) unless `amend`
        is (by, reason): then it is stored as an amendment (one run folder only)."""
        results = []
        folders = run_folders(Path(folder))
        if amend is not None and len(folders) != 1:
            raise db.StoreError(f"{folder} holds {len(folders)} runs: an amendment is of one run",
                                hint="give the one run folder (reports/<run-id>) to amend")
        for run_dir in folders:
            data = read_results(run_dir / "results.json")
            other = self.other_run(data)
            if other is not None:  # the same id, another run: never mix them
                raise db.StoreError(f"{run_dir / 'results.json'}: the store already has {other}; nothing of this "
                                    f"one was stored",
                                    hint="run ids are never reused; keep this folder's results.json as it is")
            if data.get("status") == "running":  # no recorder feeds an imported run: it was killed (or still
                data = {**data, "status": "incomplete"}  # runs, and its own sink will set the status again)
            try:
                results.append(self.sync_run(data, run_dir=run_dir, amend=amend))
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise db.StoreError(f"{run_dir / 'results.json'}: malformed record ({type(exc).__name__}: {exc}); "
                                    f"nothing of it was stored") from None
            log.info("imported %s: %d tests (%d new)", data["run_id"], results[-1].tests_stored,
                     results[-1].tests_added)
        return results

    # --- reading ----------------------------------------------------------------------------
    def list_runs(self, limit: int | None = 50, station: str | None = None) -> list[RunInfo]:
        with Session(self.engine) as s:
            query = select(Run).options(selectinload(Run.duts), selectinload(Run.station)) \
                .where(current_runs()).order_by(Run.started.desc(), Run.id.desc())
            if station:
                query = query.join(Station).where(Station.name == station)
            if limit:
                query = query.limit(limit)
            try:
                runs = list(s.scalars(query))
            except DBAPIError as exc:
                raise db.database_error(exc, self.url) from None
            now = _now()
            return [RunInfo(run_id=logical_run_id(r.run_id), station=r.station.name if r.station else None,
                            status=effective_status(r.status, r.recorder_host, r.recorder_pid, r.updated, now),
                            started=iso(r.started), finished=iso(r.finished), duts=[d.name for d in r.duts],
                            summary=dict(r.summary or {}), run_dir=r.run_dir) for r in runs]

    def load_run(self, run_id: str, version: int | None = None) -> StoredRun:
        """A stored run in the results.json shape; run_id "latest" is the newest run. Its current
        version (the newest amendment, if any); `version` 0 is the original, n its n-th amendment."""
        with Session(self.engine) as s:
            query = select(Run).options(
                selectinload(Run.duts), selectinload(Run.instruments),
                selectinload(Run.tests).selectinload(TestResult.measurements).selectinload(Measurement.raw_refs))
            if version is not None:
                query = query.where(Run.run_id == (run_id if version == 0 else f"{run_id}{AMENDED}{version}"))
            elif run_id == "latest":
                query = query.where(current_runs()).order_by(Run.started.desc(), Run.id.desc()).limit(1)
            else:
                query = query.where(versions_of(run_id), current_runs()).order_by(Run.id.desc()).limit(1)
            try:
                run = s.scalar(query)
            except DBAPIError as exc:
                raise db.database_error(exc, self.url) from None
            if run is None:
                raise db.StoreError(f"no run {run_id!r}{f' version {version}' if version else ''} in results store {db.describe(self.url)}",
                                    hint="`bench runs` lists the stored runs; `bench store-import FOLDER` adds a "
                                         "run recorded while the store was unreachable")
            return StoredRun(data=_run_record(run), run_dir=Path(run.run_dir) if run.run_dir else None)

    def dut_sightings(self, before: dt.datetime | None = None) -> list[DutSighting]:
        query = select(Run.run_id, Run.started, RunDut.name, RunDut.serial, RunDut.soc_manufacturer,
                       RunDut.soc_model, RunDut.microcode).join(Run, RunDut.run_pk == Run.id) \
            .where(RunDut.error.is_(None), current_runs()).order_by(Run.started, Run.id)
        if before is not None:
            query = query.where(Run.started < before)
        rows = self._rows(query)
        return [DutSighting(run_id=logical_run_id(r[0]), started=r[1], dut=r[2], serial=r[3], soc=_soc(r[4], r[5]), microcode=r[6])
                for r in rows]

    def lab_time_facts(self, dut: str, runs: int = 5) -> tuple[str | None, list[LabTimeFact]]:
        """The phone model of the latest stored sighting of `dut` (name or serial), and the lab time
        of every test on that model in its last `runs` complete runs (docs/labtime.md)."""
        latest = self._rows(select(RunDut.soc_manufacturer, RunDut.soc_model).join(Run, RunDut.run_pk == Run.id)
                            .where(or_(RunDut.name == dut, RunDut.serial == dut), RunDut.error.is_(None), current_runs())
                            .order_by(Run.started.desc(), Run.id.desc()).limit(1))
        if not latest:
            return None, []
        manufacturer, model = latest[0]
        on_model = (RunDut.soc_model == model) if model is not None else (RunDut.name == dut)
        run_pks = [r[0] for r in self._rows(
            select(Run.id).join(RunDut, RunDut.run_pk == Run.id).where(on_model, Run.status == "complete", current_runs())
            .distinct().order_by(Run.id.desc()).limit(runs))]
        if not run_pks:
            return _soc(manufacturer, model), []
        tests = self._rows(
            select(TestResult.id, Run.run_id, TestResult.nodeid, TestResult.dut, TestResult.lab_time_s)
            .join(Run, TestResult.run_pk == Run.id)
            .join(RunDut, (RunDut.run_pk == TestResult.run_pk) & (RunDut.name == TestResult.dut))
            .where(TestResult.run_pk.in_(run_pks), TestResult.lab_time_s.is_not(None), on_model,
                   TestResult.outcome.in_(("passed", "failed"))))
        samples: dict[int, list[tuple[str, int]]] = {}
        for test_pk, name, n_required in self._rows(
                select(Measurement.test_pk, Measurement.name, Measurement.n_required)
                .where(Measurement.test_pk.in_([t[0] for t in tests]), Measurement.n_required.is_not(None))):
            samples.setdefault(test_pk, []).append((name, int(n_required)))
        facts = [LabTimeFact(run_id=logical_run_id(t[1]), nodeid=t[2], dut=t[3], lab_time_s=float(t[4]),
                             samples=tuple(samples.get(t[0], ()))) for t in tests]
        return _soc(manufacturer, model), facts

    def verdict_facts(self, exact: Iterable[str], prefixes: Iterable[str],
                      before: dt.datetime | None = None) -> list[VerdictFact]:
        """Verdicts named exactly one of `exact` or starting with one of `prefixes`, oldest run first."""
        names = [Measurement.name.in_(list(exact))] + [Measurement.name.startswith(p, autoescape=True)
                                                        for p in prefixes]
        query = select(Run.run_id, Run.started, Measurement.dut, Measurement.name, Measurement.outcome,
                       Measurement.extra).join(Run, Measurement.run_pk == Run.id) \
            .where(Measurement.dut.is_not(None), or_(*names), current_runs()).order_by(Run.started, Run.id)
        if before is not None:
            query = query.where(Run.started < before)
        return [VerdictFact(run_id=logical_run_id(r[0]), started=r[1], dut=r[2], name=r[3], outcome=r[4], extra=r[5] or {})
                for r in self._rows(query)]

    def _rows(self, query: Executable) -> list[Row[Unpack[tuple[Any, ...]]]]:
        # Rows of any select, their columns untyped: the queries' filters (is_not(None)) narrow what the models declare
        try:
            with self.engine.connect() as conn:
                return list(conn.execute(query))
        except DBAPIError as exc:
            raise db.database_error(exc, self.url) from None


def _soc(manufacturer: str | None, model: str | None) -> str:
    return " ".join(p for p in (manufacturer, model) if p) or "(unknown SoC)"


def _run_record(run: Run, raw_status: bool = False) -> dict[str, Any]:
    from phonebench.core.records import SCHEMA

    status = run.status if raw_status else effective_status(run.status, run.recorder_host, run.recorder_pid,
                                                            run.updated)
    record = {
        "schema": SCHEMA, "run_id": logical_run_id(run.run_id),
        "status": status,
        "started": iso(run.started), "finished": iso(run.finished), "code_version": run.code_version,
        "station": dict(run.station_record or {}),
        "duts": {d.name: dict(d.identity or {}) for d in run.duts},
        "instruments": {i.role: {"family": i.family, "address": i.address, "attached_to": i.attached_to,
                                 "identity": dict(i.identity or {}),
                                 **({"calibration": i.calibration} if i.calibration is not None else {})}
                        for i in run.instruments},
        "tests": [{**{name: getattr(t, name) for name in TEST_FIELDS}, "message": t.message or "",
                   "markers": list(t.markers or []), "verdicts": [_verdict_record(m) for m in t.measurements]}
                  for t in run.tests],
        "summary": dict(run.summary or {}),
        "lab_time_s": {d.name: d.lab_time_s for d in run.duts if d.lab_time_s is not None},
    }
    if run.supersedes is not None:  # an amendment says so (an original's record is results.json's shape)
        record["amendment"] = {"version": run.run_id, "supersedes": run.supersedes, "by": run.amended_by,
                               "reason": run.amend_reason}
    return record


def _verdict_record(m: Measurement) -> dict[str, Any]:
    record = {name: getattr(m, name) for name in MEASUREMENT_FIELDS}
    record.update(detail=m.detail or "", description=m.description or "", raw=[r.path for r in m.raw_refs],
                  extra=dict(m.extra or {}))
    return {name: record[name] for name in VERDICT_FIELDS}  # results.json's order


def station_row(s: Session, name: str) -> Station:
    """The stations row named `name`, created if new (shared by runs, calibrations and attempts)."""
    station = s.scalar(select(Station).where(Station.name == name))
    if station is None:
        station = Station(name=name)
        s.add(station)
        s.flush()
    return station


def station_id(s: Session, name: str | None) -> int | None:
    return station_row(s, name).id if name else None
