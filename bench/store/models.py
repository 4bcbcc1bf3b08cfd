"""The results store's tables (SQLAlchemy 2.x declarative). Change them only with a migration in
migrations/versions/ (tests/test_store.py checks the two agree).

Physical things (stations, DUT units, instruments) are rows of their own; what they were in one run
(build, microcode, firmware, calibration, fingerprint) is kept per run, because it changes.
"""
from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import JSON, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import DateTime

from phonebench.core.records import TestRecord
from phonebench.core.verdict import VERDICT_FIELDS

# JSONB on PostgreSQL (indexable, compact), JSON text elsewhere.
Json = JSON().with_variant(JSONB(), "postgresql")


class Base(DeclarativeBase):
    pass


class Station(Base):
    __tablename__ = "stations"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(Text, unique=True)
    host: Mapped[str | None] = mapped_column(Text)
    location: Mapped[str | None] = mapped_column(Text)


class DutUnit(Base):
    """One physical phone, known by its serial number."""

    __tablename__ = "dut_units"

    id: Mapped[int] = mapped_column(primary_key=True)
    serial: Mapped[str] = mapped_column(Text, unique=True)
    soc_manufacturer: Mapped[str | None] = mapped_column(Text)
    soc_model: Mapped[str | None] = mapped_column(Text)
    product_model: Mapped[str | None] = mapped_column(Text)


class InstrumentUnit(Base):
    """One physical instrument, known by manufacturer, model and serial (*IDN?)."""

    __tablename__ = "instrument_units"
    __table_args__ = (UniqueConstraint("manufacturer", "model", "serial", name="uq_instrument_units_idn"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    manufacturer: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(Text)
    serial: Mapped[str] = mapped_column(Text)


class Run(Base):
    __tablename__ = "runs"

    id: Mapped[int] = mapped_column(primary_key=True)
    # Unique: an amendment is a new row "<run_id>/amended-<n>" (AMENDED), the original kept (migration 0007)
    run_id: Mapped[str] = mapped_column(Text, unique=True)
    station_id: Mapped[int | None] = mapped_column(ForeignKey("stations.id"))
    status: Mapped[str] = mapped_column(String(40))  # running (or killed: incomplete) | complete | incomplete
    started: Mapped[dt.datetime | None] = mapped_column(DateTime, index=True)  # naive UTC
    finished: Mapped[dt.datetime | None] = mapped_column(DateTime)
    updated: Mapped[dt.datetime] = mapped_column(DateTime)
    code_version: Mapped[str | None] = mapped_column(Text)
    run_dir: Mapped[str | None] = mapped_column(Text)  # where results.json and raw data live
    recorder_host: Mapped[str | None] = mapped_column(Text)
    recorder_pid: Mapped[int | None] = mapped_column(Integer)
    station_record: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    summary: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    supersedes: Mapped[int | None] = mapped_column(Integer, index=True)  # runs.id of the version it amends (0007)
    amended_by: Mapped[str | None] = mapped_column(Text)
    amend_reason: Mapped[str | None] = mapped_column(Text)

    station: Mapped[Station | None] = relationship()
    duts: Mapped[list[RunDut]] = relationship(back_populates="run", cascade="all, delete-orphan",
                                              order_by="RunDut.id")
    instruments: Mapped[list[RunInstrument]] = relationship(back_populates="run", cascade="all, delete-orphan",
                                                            order_by="RunInstrument.id")
    tests: Mapped[list[TestResult]] = relationship(back_populates="run", cascade="all, delete-orphan",
                                                   order_by="TestResult.seq")


class RunDut(Base):
    """A DUT as it was in one run: identity read at the edge, fingerprint measured by the run."""

    __tablename__ = "run_duts"
    __table_args__ = (UniqueConstraint("run_pk", "name", name="uq_run_duts_name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    run_pk: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    unit_id: Mapped[int | None] = mapped_column(ForeignKey("dut_units.id"), index=True)
    name: Mapped[str] = mapped_column(Text)
    address: Mapped[str | None] = mapped_column(Text)
    serial: Mapped[str | None] = mapped_column(Text)
    soc_manufacturer: Mapped[str | None] = mapped_column(Text)
    soc_model: Mapped[str | None] = mapped_column(Text)
    build_fingerprint: Mapped[str | None] = mapped_column(Text)
    runtime_version: Mapped[str | None] = mapped_column(Text)
    microcode: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    identity: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)  # the whole record, as read
    fingerprint: Mapped[dict[str, Any] | None] = mapped_column(Json)  # the "fingerprint" verdict's extra
    lab_time_s: Mapped[float | None] = mapped_column(Float)  # station-clock seconds of its tests in the run

    run: Mapped[Run] = relationship(back_populates="duts")


class RunInstrument(Base):
    """An instrument as it was in one run: role, address, firmware, calibration state."""

    __tablename__ = "run_instruments"
    __table_args__ = (UniqueConstraint("run_pk", "role", name="uq_run_instruments_role"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    run_pk: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    unit_id: Mapped[int | None] = mapped_column(ForeignKey("instrument_units.id"), index=True)
    role: Mapped[str] = mapped_column(String(40))
    family: Mapped[str | None] = mapped_column(Text)
    address: Mapped[str | None] = mapped_column(Text)
    attached_to: Mapped[str | None] = mapped_column(Text)
    firmware: Mapped[str | None] = mapped_column(Text)
    identity: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    calibration: Mapped[dict[str, Any] | None] = mapped_column(Json)

    run: Mapped[Run] = relationship(back_populates="instruments")


class TestResult(Base):
    __tablename__ = "tests"
    __table_args__ = (UniqueConstraint("run_pk", "seq", name="uq_tests_seq"),)
    __test__ = False  # not a pytest test class

    id: Mapped[int] = mapped_column(primary_key=True)
    run_pk: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(Integer)  # position in results.json "tests"
    nodeid: Mapped[str] = mapped_column(Text)
    dut: Mapped[str | None] = mapped_column(Text)
    outcome: Mapped[str] = mapped_column(String(20))
    duration_s: Mapped[float | None] = mapped_column(Float)
    message: Mapped[str | None] = mapped_column(Text)
    markers: Mapped[list[str]] = mapped_column(Json, default=list)
    acceptance_check: Mapped[str | None] = mapped_column(Text)
    started: Mapped[str | None] = mapped_column(Text)  # ISO text as recorded (a test's own clock reading)
    bay: Mapped[str | None] = mapped_column(Text)
    lab_time_s: Mapped[float | None] = mapped_column(Float)  # station-clock seconds, setup start to teardown end

    run: Mapped[Run] = relationship(back_populates="tests")
    measurements: Mapped[list[Measurement]] = relationship(back_populates="test", cascade="all, delete-orphan",
                                                           order_by="Measurement.seq")


class Measurement(Base):
    """One verdict: value, unit, limit, bound, confidence, n, outcome, and its raw-data files."""

    __tablename__ = "measurements"
    __table_args__ = (Index("ix_measurements_run_name", "run_pk", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    test_pk: Mapped[int] = mapped_column(ForeignKey("tests.id", ondelete="CASCADE"), index=True)
    run_pk: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))  # for cross-run queries
    dut: Mapped[str | None] = mapped_column(Text)
    seq: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(Text, index=True)
    value: Mapped[float | None] = mapped_column(Float)
    unit: Mapped[str | None] = mapped_column(Text)
    outcome: Mapped[str] = mapped_column(String(40))
    limit: Mapped[float | None] = mapped_column("limit_value", Float)
    comparator: Mapped[str | None] = mapped_column(String(4))
    statistic: Mapped[str | None] = mapped_column(Text)
    bound: Mapped[float | None] = mapped_column(Float)
    confidence: Mapped[float | None] = mapped_column(Float)
    n: Mapped[int | None] = mapped_column(Integer)
    n_required: Mapped[int | None] = mapped_column(Integer)
    detail: Mapped[str | None] = mapped_column(Text)
    metric: Mapped[str | None] = mapped_column(Text)
    claim: Mapped[int | None] = mapped_column(Integer)
    profile: Mapped[str | None] = mapped_column(Text)
    description: Mapped[str | None] = mapped_column(Text)
    evidence: Mapped[str | None] = mapped_column(String(20))
    decision_rule: Mapped[str | None] = mapped_column(String(20))
    uncertainty: Mapped[dict[str, Any] | None] = mapped_column(Json)
    calibration: Mapped[dict[str, Any] | None] = mapped_column(Json)
    plot: Mapped[dict[str, Any] | None] = mapped_column(Json)
    extra: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    basis: Mapped[str | None] = mapped_column(String(40))  # core/judge.py's record (migration 0006)
    findings: Mapped[list[dict[str, str]] | None] = mapped_column(Json)
    evidence_required: Mapped[str | None] = mapped_column(String(20))
    ruling: Mapped[list[str] | None] = mapped_column(Json)

    test: Mapped[TestResult] = relationship(back_populates="measurements")
    raw_refs: Mapped[list[RawRef]] = relationship(cascade="all, delete-orphan", order_by="RawRef.id")


# A test record's scalar fields map one to one onto columns of the tests table (verdicts: their own).
TEST_FIELDS = tuple(f for f in TestRecord.__dataclass_fields__ if f not in ("verdicts",))
# A verdict's fields map one to one onto measurement columns of the same name, except its raw
# files (their own table) and the free-text fields, which are normalised to "" when read back.
MEASUREMENT_FIELDS = tuple(f for f in VERDICT_FIELDS if f not in ("raw", "detail", "description", "extra"))


class RawRef(Base):
    """A raw-data file (relative to the run folder); the file itself stays on disk."""

    __tablename__ = "raw_refs"

    id: Mapped[int] = mapped_column(primary_key=True)
    measurement_pk: Mapped[int] = mapped_column(ForeignKey("measurements.id", ondelete="CASCADE"), index=True)
    path: Mapped[str] = mapped_column(Text)


# --- calibration and production acceptance (migration 0002) ----------------------------------
class CalibrationRecord(Base):
    """One calibration of one piece of equipment, as ISO/IEC 17025 §6.4.13 asks to keep it.

    Equipment is an instrument (identity from *IDN?), the station's fixture, or a DUT unit.
    `adjustments` are the corrections a passed record makes current; a failed record keeps what
    was measured and why it failed, and is never applied.
    """

    __tablename__ = "calibration_records"
    __table_args__ = (Index("ix_calibration_records_equipment", "kind", "manufacturer", "model", "serial",
                            "procedure"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    certificate: Mapped[str] = mapped_column(Text, unique=True)
    kind: Mapped[str] = mapped_column(String(20))  # instrument | fixture | dut
    procedure: Mapped[str] = mapped_column(Text)
    procedure_version: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(20))  # passed | failed
    reason: Mapped[str | None] = mapped_column(Text)  # why it failed
    role: Mapped[str | None] = mapped_column(Text)
    manufacturer: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(Text)
    serial: Mapped[str] = mapped_column(Text)
    firmware: Mapped[str | None] = mapped_column(Text)
    asset_tag: Mapped[str | None] = mapped_column(Text)
    location: Mapped[str | None] = mapped_column(Text)
    station_id: Mapped[int | None] = mapped_column(ForeignKey("stations.id"))
    instrument_unit_id: Mapped[int | None] = mapped_column(ForeignKey("instrument_units.id"), index=True)
    dut_unit_id: Mapped[int | None] = mapped_column(ForeignKey("dut_units.id"), index=True)
    performed: Mapped[dt.datetime] = mapped_column(DateTime, index=True)  # naive UTC
    due: Mapped[dt.datetime | None] = mapped_column(DateTime)
    operator: Mapped[str | None] = mapped_column(Text)
    run_id: Mapped[str | None] = mapped_column(Text)  # the bench run that performed it, if any
    ambient: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    results: Mapped[list[Any]] = mapped_column(Json, default=list)
    adjustments: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    acceptance: Mapped[list[Any]] = mapped_column(Json, default=list)  # the criteria, each a dict
    reference: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)  # reference standards used
    supersedes: Mapped[int | None] = mapped_column(Integer, index=True)  # the record this one amends (0007)
    amended_by: Mapped[str | None] = mapped_column(Text)
    amend_reason: Mapped[str | None] = mapped_column(Text)


class AcceptanceAttempt(Base):
    """One production acceptance attempt of one unit (by scanned serial and attempt number)."""

    __tablename__ = "acceptance_attempts"
    __table_args__ = (UniqueConstraint("serial", "attempt", name="uq_acceptance_attempts_serial_attempt"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    serial: Mapped[str] = mapped_column(Text, index=True)  # as scanned
    attempt: Mapped[int] = mapped_column(Integer)
    read_serial: Mapped[str | None] = mapped_column(Text)  # as read from the phone
    station_id: Mapped[int | None] = mapped_column(ForeignKey("stations.id"))
    run_id: Mapped[str | None] = mapped_column(Text, index=True)  # results run (reports/<run_id>)
    batch: Mapped[str | None] = mapped_column(Text, index=True)  # a line batch, when run by `bench line`
    outcome: Mapped[str] = mapped_column(String(20))  # running | pass | fail | incomplete | wrong-unit | refused
    reason: Mapped[str | None] = mapped_column(Text)
    failing: Mapped[list[Any]] = mapped_column(Json, default=list)  # [{check, reason}]
    retest_of: Mapped[int | None] = mapped_column(Integer)  # the attempt number this one retests
    started: Mapped[dt.datetime] = mapped_column(DateTime, index=True)  # naive UTC
    finished: Mapped[dt.datetime | None] = mapped_column(DateTime)
    cycle_s: Mapped[float | None] = mapped_column(Float)
    overhead_s: Mapped[float | None] = mapped_column(Float)
    operator: Mapped[str | None] = mapped_column(Text)
    recorder_host: Mapped[str | None] = mapped_column(Text)
    recorder_pid: Mapped[int | None] = mapped_column(Integer)
    details: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)


# --- the hash chain (migration 0007, chain.py) -------------------------------------------------
class RecordChain(Base):
    """One entry of the store's append-only ledger: a record's content and the chained digest."""

    __tablename__ = "record_chain"
    __table_args__ = (Index("ix_record_chain_record", "record_table", "record_pk"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)  # set under the chain lock
    record_table: Mapped[str] = mapped_column(String(40))
    record_pk: Mapped[int] = mapped_column(Integer)
    run_id: Mapped[str | None] = mapped_column(Text)
    label: Mapped[str | None] = mapped_column(Text)
    action: Mapped[str] = mapped_column(String(20))  # insert | state | amend | migrate
    supersedes: Mapped[int | None] = mapped_column(Integer)
    by: Mapped[str | None] = mapped_column(Text)
    reason: Mapped[str | None] = mapped_column(Text)
    recorded: Mapped[dt.datetime] = mapped_column(DateTime)  # naive UTC
    content: Mapped[str] = mapped_column(Text)  # canonical JSON of the record as stored
    content_digest: Mapped[str] = mapped_column(String(64))
    prev_digest: Mapped[str] = mapped_column(String(64))
    digest: Mapped[str] = mapped_column(String(64), unique=True)


# --- nightly baselines (migration 0005) ------------------------------------------------------
class AcceptedBuild(Base):
    """A run's build accepted as a phone model's baseline (the newest acceptance of a model wins)."""

    __tablename__ = "accepted_builds"
    __table_args__ = (Index("ix_accepted_builds_model", "model", "accepted"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    model: Mapped[str] = mapped_column(Text)
    run_id: Mapped[str] = mapped_column(Text)
    build: Mapped[str | None] = mapped_column(Text)  # the runtime version the model's phones ran
    accepted: Mapped[dt.datetime] = mapped_column(DateTime)  # naive UTC
    accepted_by: Mapped[str | None] = mapped_column(Text)
    note: Mapped[str | None] = mapped_column(Text)
