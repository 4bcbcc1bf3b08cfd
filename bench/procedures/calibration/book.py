"""The calibration book: calibration records kept in the results store, so every station of a
line that shares a PostgreSQL store sees the same records (a lone station uses its SQLite store)."""
from __future__ import annotations

import datetime as dt
import logging

from sqlalchemy import ColumnElement, Select, exists, func, select
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import Session, aliased

from .records import CalibrationRecord, Criterion, Equipment, Reading
from ...store import chain, db
from ...store.models import CalibrationRecord as Row
from ...store.models import DutUnit, InstrumentUnit, Station
from ...store.store import Store, station_id

log = logging.getLogger(__name__)

AMENDMENT = "/A"  # an amendment's certificate: "<certificate>/A<n>"


def current_records() -> ColumnElement[bool]:
    """Records no amendment supersedes: the ones corrections and due dates come from."""
    newer = aliased(Row)
    return ~exists(select(newer.id).where(newer.supersedes == Row.id))


def _naive(stamp: dt.datetime | None) -> dt.datetime | None:
    """The store keeps naive UTC on every database."""
    if stamp is None:
        return None
    if stamp.tzinfo is not None:
        stamp = stamp.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return stamp


def _aware(stamp: dt.datetime | None) -> dt.datetime | None:
    return None if stamp is None else stamp.replace(tzinfo=dt.timezone.utc)


class CalibrationBook:
    """Reads and writes calibration records in one results store (a phonebench.bench.store.Store)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    # --- writing ----------------------------------------------------------------------------
    def save(self, record: CalibrationRecord) -> CalibrationRecord:
        """Store a concluded record (passed or failed); sets record.id."""
        for attempt in (1, 2):
            try:
                with Session(db.writer(self.store.engine), expire_on_commit=False) as s, s.begin():
                    row = self._row(s, record)
                    s.add(row)
                    s.flush()
                    chain.chain_records(s.connection(), "calibration_records", [row.id], run_id=record.run_id,
                                        labels={row.id: record.certificate})
                    record.id = row.id
                    log.info("calibration %s of %s: %s%s", record.certificate, record.equipment.label(),
                             record.status, f" ({record.reason})" if record.reason else "")
                    return record
            except IntegrityError as exc:
                if attempt == 2:
                    raise db.database_error(exc, self.store.url) from None
                log.debug("concurrent insert of a shared row (station, unit); retrying")
            except DBAPIError as exc:
                raise db.database_error(exc, self.store.url) from None
        raise AssertionError("unreachable")

    def _row(self, s: Session, r: CalibrationRecord) -> Row:
        e = r.equipment
        return Row(
            certificate=r.certificate, kind=e.kind, procedure=r.procedure, procedure_version=r.procedure_version,
            status=r.status, reason=r.reason, role=e.role, manufacturer=e.manufacturer, model=e.model,
            serial=e.serial, firmware=e.firmware, asset_tag=e.asset_tag, location=e.location,
            station_id=station_id(s, r.station), instrument_unit_id=_instrument_unit_id(s, e),
            dut_unit_id=_dut_unit_id(s, e), performed=_naive(r.performed), due=_naive(r.due),
            operator=r.operator, run_id=r.run_id, ambient=dict(r.ambient),
            results=[vars(x) for x in r.results], adjustments=dict(r.adjustments),
            acceptance=[vars(c) for c in r.acceptance], reference=dict(r.reference))

    def set_due(self, record_id: int, due: dt.datetime | None, *, by: str, reason: str) -> CalibrationRecord:
        """A new due date (a lab shortening an interval; tests ageing a record): an amendment, never
        an edit (ISO/IEC 17025 §7.5.2). Returns the amended record."""
        return self.amend(record_id, by=by, reason=reason, due=_naive(due))

    def amend(self, record_id: int, *, by: str, reason: str, **changes: object) -> CalibrationRecord:
        """A new record superseding `record_id`, with `changes` (column: value), naming who and why;
        the original stays readable (get()) and is no longer applied."""
        if not by.strip() or not reason.strip():
            raise db.StoreError(f"calibration record {record_id}: an amendment names who makes it and why",
                                hint="give by= (an operator or user name) and reason=")
        unknown = set(changes) - {c.key for c in Row.__table__.columns} | ({"id", "certificate"} & set(changes))
        if unknown:
            raise ValueError(f"cannot amend {', '.join(sorted(unknown))} of a calibration record")
        try:
            with Session(db.writer(self.store.engine), expire_on_commit=False) as s, s.begin():
                old = s.get(Row, record_id)
                if old is None:
                    raise db.StoreError(f"no calibration record {record_id} in results store "
                                        f"{db.describe(self.store.url)}", hint="`bench calibrate --list` shows them")
                newer = s.scalar(select(Row.id).where(Row.supersedes == old.id))
                if newer is not None:
                    raise db.StoreError(f"calibration record {record_id} ({old.certificate}) was already amended by "
                                        f"record {newer}", hint=f"amend the current one, record {newer}")
                base = old.certificate.split(AMENDMENT, 1)[0]
                count = s.scalar(select(func.count()).select_from(Row).where(
                    Row.certificate.startswith(base + AMENDMENT, autoescape=True))) or 0
                values = {c.key: getattr(old, c.key) for c in Row.__table__.columns if c.key != "id"}
                values.update(changes, certificate=f"{base}{AMENDMENT}{count + 1}", supersedes=old.id,
                              amended_by=by.strip(), amend_reason=reason.strip())
                row = Row(**values)
                s.add(row)
                s.flush()
                chain.chain_records(s.connection(), "calibration_records", [row.id], action="amend",
                                    run_id=row.run_id, labels={row.id: row.certificate}, supersedes=old.id,
                                    by=by.strip(), reason=reason.strip())
                log.warning("calibration %s amended by %s (%s): now %s", old.certificate, by, reason, row.certificate)
                found = self._select_in(s, select(Row).where(Row.id == row.id))
        except DBAPIError as exc:
            raise db.database_error(exc, self.store.url) from None
        return _record(found[0])

    # --- reading ----------------------------------------------------------------------------
    def latest(self, equipment: Equipment, procedure: str) -> CalibrationRecord | None:
        """The newest record (passed or failed) of this procedure on this equipment."""
        kind, manufacturer, model, serial = equipment.key
        query = select(Row).where(Row.kind == kind, Row.manufacturer == manufacturer, Row.model == model,
                                  Row.serial == serial, Row.procedure == procedure, current_records()) \
            .order_by(Row.performed.desc(), Row.id.desc()).limit(1)
        rows = self._select(query)
        return _record(rows[0]) if rows else None

    def history(self, equipment: Equipment | None = None, procedure: str | None = None,
                limit: int | None = 100, superseded: bool = False) -> list[CalibrationRecord]:
        """Newest first; records an amendment replaced only with superseded=True."""
        query = select(Row).order_by(Row.performed.desc(), Row.id.desc())
        if not superseded:
            query = query.where(current_records())
        if equipment is not None:
            kind, manufacturer, model, serial = equipment.key
            query = query.where(Row.kind == kind, Row.manufacturer == manufacturer, Row.model == model,
                                Row.serial == serial)
        if procedure is not None:
            query = query.where(Row.procedure == procedure)
        if limit:
            query = query.limit(limit)
        return [_record(row) for row in self._select(query)]

    def get(self, record_id: int) -> CalibrationRecord | None:
        rows = self._select(select(Row).where(Row.id == record_id))
        return _record(rows[0]) if rows else None

    def _select(self, query: Select[Row]) -> list[tuple[Row, str | None]]:
        """Rows of a select(Row) query, each with its station's name."""
        try:
            with Session(self.store.engine) as s:
                return self._select_in(s, query)
        except DBAPIError as exc:
            raise db.database_error(exc, self.store.url) from None

    @staticmethod
    def _select_in(s: Session, query: Select[Row]) -> list[tuple[Row, str | None]]:
        named = query.add_columns(Station.name).outerjoin(Station, Row.station_id == Station.id)
        return [(row, name) for row, name in s.execute(named)]


def _record(found: tuple[Row, str | None]) -> CalibrationRecord:
    row, station = found
    equipment = Equipment(row.kind, row.manufacturer, row.model, row.serial, row.firmware, row.role, row.asset_tag,
                          row.location)
    return CalibrationRecord(
        equipment=equipment, procedure=row.procedure, procedure_version=row.procedure_version,
        performed=row.performed.replace(tzinfo=dt.timezone.utc), due=_aware(row.due), status=row.status,
        results=[Reading(**r) for r in row.results or []], adjustments=dict(row.adjustments or {}),
        acceptance=[Criterion(**c) for c in row.acceptance or []], certificate=row.certificate, reason=row.reason,
        ambient=dict(row.ambient or {}), reference=dict(row.reference or {}), operator=row.operator,
        station=station, run_id=row.run_id, id=row.id, supersedes=row.supersedes, amended_by=row.amended_by,
        amend_reason=row.amend_reason)


def _instrument_unit_id(s: Session, e: Equipment) -> int | None:
    if e.kind != "instrument" or not (e.manufacturer and e.model and e.serial):
        return None
    unit = s.scalar(select(InstrumentUnit).where(InstrumentUnit.manufacturer == e.manufacturer,
                                                 InstrumentUnit.model == e.model,
                                                 InstrumentUnit.serial == e.serial))
    if unit is None:
        unit = InstrumentUnit(manufacturer=e.manufacturer, model=e.model, serial=e.serial)
        s.add(unit)
        s.flush()
    return unit.id


def _dut_unit_id(s: Session, e: Equipment) -> int | None:
    if e.kind != "dut":
        return None
    unit = s.scalar(select(DutUnit).where(DutUnit.serial == e.serial))
    if unit is None:
        unit = DutUnit(serial=e.serial, soc_manufacturer=e.manufacturer if e.manufacturer != "unknown" else None,
                       product_model=e.model if e.model != "unknown" else None)
        s.add(unit)
        s.flush()
    return unit.id

