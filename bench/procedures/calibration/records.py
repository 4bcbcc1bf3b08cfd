"""Calibration records as ISO/IEC 17025 §6.4.13 asks a lab to keep them, one per calibration of
one piece of equipment: identity (incl. firmware), serial, asset tag, location, date, results,
adjustments, acceptance criteria, due date, certificate, ambient conditions, operator, procedure.

A record is concluded once, from what a procedure measured: every criterion met → "passed" (its
adjustments become the equipment's current corrections), any criterion missed → "failed" (kept,
with the reason, and never applied).
"""
from __future__ import annotations

import datetime as dt
import math
import secrets
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from phonebench.core.errors import InvalidMeasurement

if TYPE_CHECKING:  # annotations only
    from phonebench.core.verdict import Verdict
    from phonebench.drivers.visa import InstrumentIdentity

PASSED, FAILED = "passed", "failed"
KINDS = ("instrument", "fixture", "dut")


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


@dataclass(frozen=True)
class Equipment:
    """What was calibrated. Instruments are known by *IDN? (manufacturer, model, serial)."""

    kind: str  # instrument | fixture | dut
    manufacturer: str
    model: str
    serial: str
    firmware: str | None = None
    role: str | None = None  # scope, supply, thermal, stimulus, fixture, dut
    asset_tag: str | None = None
    location: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"equipment kind {self.kind!r}: expected one of {KINDS}")

    @property
    def key(self) -> tuple[str, str, str, str]:
        """The identity records are filed under (firmware, tag and place may change)."""
        return (self.kind, self.manufacturer, self.model, self.serial)

    @classmethod
    def instrument(cls, identity: InstrumentIdentity, role: str, asset_tag: str | None = None,
                   location: str | None = None) -> Equipment:
        """From a driver's InstrumentIdentity (phonebench.drivers.visa)."""
        return cls("instrument", identity.manufacturer, identity.model, identity.serial, identity.firmware or None,
                   role, asset_tag, location)

    @classmethod
    def fixture(cls, station: str, asset_tag: str | None = None, location: str | None = None) -> Equipment:
        """The station's audio fixture (speaker, measurement mic, cabling): equipment of its own."""
        return cls("fixture", "phonebench", "audio-fixture", asset_tag or f"{station}/fixture", None, "fixture",
                   asset_tag, location)

    @classmethod
    def dut(cls, serial: str, soc_manufacturer: str = "", product_model: str = "",
            build: str | None = None, location: str | None = None) -> Equipment:
        return cls("dut", soc_manufacturer or "unknown", product_model or "unknown", serial, build, "dut", None,
                   location)

    def label(self) -> str:
        tag = f" [{self.asset_tag}]" if self.asset_tag else ""
        return f"{self.role or self.kind} {self.manufacturer} {self.model} s/n {self.serial}{tag}"


@dataclass(frozen=True)
class Reading:
    """One result of a calibration: the value found, its unit and how well it is known."""

    name: str
    value: float | None
    unit: str
    uncertainty: float | None = None  # standard uncertainty of the value, same unit
    n: int | None = None
    detail: str = ""


@dataclass(frozen=True)
class Criterion:
    """An acceptance criterion on one reading: |value| <= max_abs and/or low <= value <= high."""

    reading: str
    unit: str
    max_abs: float | None = None
    low: float | None = None
    high: float | None = None

    def problem(self, readings: dict[str, Reading]) -> str | None:
        """None when the criterion is met, else what is wrong, in words."""
        found = readings.get(self.reading)
        if found is None or found.value is None or not math.isfinite(found.value):
            return f"{self.reading} was not measured"
        v = found.value
        if self.max_abs is not None and abs(v) > self.max_abs:
            return f"{self.reading} = {v:.4g} {self.unit} is beyond ±{self.max_abs:g} {self.unit}"
        if self.low is not None and v < self.low:
            return f"{self.reading} = {v:.4g} {self.unit} is below {self.low:g} {self.unit}"
        if self.high is not None and v > self.high:
            return f"{self.reading} = {v:.4g} {self.unit} is above {self.high:g} {self.unit}"
        return None

    def text(self) -> str:
        parts = []
        if self.max_abs is not None:
            parts.append(f"|{self.reading}| <= {self.max_abs:g} {self.unit}")
        if self.low is not None or self.high is not None:
            lo = "-inf" if self.low is None else f"{self.low:g}"
            hi = "inf" if self.high is None else f"{self.high:g}"
            parts.append(f"{lo} <= {self.reading} <= {hi} {self.unit}")
        return " and ".join(parts)


@dataclass
class CalibrationRecord:
    equipment: Equipment
    procedure: str
    procedure_version: str
    performed: dt.datetime  # aware UTC
    due: dt.datetime | None
    status: str  # passed | failed
    results: list[Reading]
    adjustments: dict[str, float]  # corrections this record makes current (if passed)
    acceptance: list[Criterion]
    certificate: str
    reason: str | None = None
    ambient: dict[str, Any] = field(default_factory=dict)
    reference: dict[str, Any] = field(default_factory=dict)  # reference standards used
    operator: str | None = None
    station: str | None = None
    run_id: str | None = None
    id: int | None = None  # the store's row id, once saved
    supersedes: int | None = None  # an amendment: the id of the record it replaces, who and why
    amended_by: str | None = None
    amend_reason: str | None = None

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    def expired(self, now: dt.datetime | None = None) -> bool:
        return self.due is not None and (now or utcnow()) >= self.due

    def reading(self, name: str) -> Reading | None:
        return next((r for r in self.results if r.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["performed"] = self.performed.isoformat(timespec="seconds")
        data["due"] = self.due.isoformat(timespec="seconds") if self.due else None
        return data

    def summary(self) -> dict[str, Any]:
        """What a result carries about the calibration behind it."""
        return {"record_id": self.id, "certificate": self.certificate, "procedure": self.procedure,
                "performed": self.performed.isoformat(timespec="seconds"),
                "due": self.due.isoformat(timespec="seconds") if self.due else None, "status": self.status}


def new_certificate(procedure: str, when: dt.datetime) -> str:
    return f"PB-{procedure.upper()}-{when.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3).upper()}"


AMBIENT_AIR_C = (-20.0, 60.0)  # air a calibration can be done in; anything else is a broken reading


def check_ambient(ambient: dict[str, Any]) -> None:
    """A record never carries an ambient temperature that is not one (9.9E37, NaN, -500 °C, ...)."""
    value = ambient.get("temperature_c")
    if value is None:
        return
    low, high = AMBIENT_AIR_C
    if not isinstance(value, (int, float)) or not math.isfinite(value) or not low <= value <= high:
        raise InvalidMeasurement(f"ambient temperature {value!r} °C from {ambient.get('source', 'the probe')} "
                                 f"is not lab air ({low:g} to {high:g} °C); no calibration record is kept with it",
                                 hint="check the ambient probe (open or unplugged thermocouple, wrong channel in "
                                      "ambient_channel) and calibrate again")


def conclude(equipment: Equipment, procedure: str, version: str, results: list[Reading],
             adjustments: dict[str, float], acceptance: list[Criterion], interval: dt.timedelta,
             *, ambient: dict[str, Any] | None = None, reference: dict[str, Any] | None = None,
             operator: str | None = None, station: str | None = None, run_id: str | None = None,
             performed: dt.datetime | None = None, extra_problems: list[str] | None = None) -> CalibrationRecord:
    """The record of one calibration: passed when every criterion holds (and nothing else went
    wrong), failed otherwise; a failed record has no due date (it never becomes current)."""
    check_ambient(ambient or {})
    when = performed or utcnow()
    readings = {r.name: r for r in results}
    problems = [p for p in (c.problem(readings) for c in acceptance) if p] + list(extra_problems or [])
    status = FAILED if problems else PASSED
    return CalibrationRecord(
        equipment=equipment, procedure=procedure, procedure_version=version, performed=when,
        due=None if problems else when + interval, status=status, results=list(results),
        adjustments={k: float(v) for k, v in adjustments.items()}, acceptance=list(acceptance),
        certificate=new_certificate(procedure, when), reason="; ".join(problems) or None,
        ambient=dict(ambient or {}), reference=dict(reference or {}), operator=operator, station=station,
        run_id=run_id)


def record_verdict(record: CalibrationRecord) -> Verdict:
    """A calibration as a bench verdict (pass/fail), so runs and reports show it like any check."""
    from phonebench.core.judge import census
    from phonebench.core.verdict import Verdict

    main = record.results[0] if record.results else None
    # The procedure's own acceptance criteria decided it: the judge's census of that.
    return Verdict(f"calibration_{record.procedure.replace('-', '_')}", main.value if main is not None else None,
                   main.unit if main is not None else "", census(record.passed),
                   statistic=main.name if main else "value",
                   n=main.n if main is not None else None,
                   detail=record.reason or ", ".join(f"{k} = {v:.6g}" for k, v in record.adjustments.items()),
                   extra={"calibration": {**record.summary(), "equipment": record.equipment.label(),
                                          "adjustments": dict(record.adjustments),
                                          "applied": record.passed,
                                          "criteria": [c.text() for c in record.acceptance]}})
