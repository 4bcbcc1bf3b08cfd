"""Calibration state of a station's instruments: which records are current, which corrections
apply, and the policy that follows from it.

Policy:
- a role is *calibrated* when the newest record of every procedure it needs passed and is not
  past its due date; *expired* when one is past due; *failed* when the newest record of one
  failed; *uncalibrated* when one was never done; *not-required* when the role needs none;
- corrections come only from passed records (an expired one still corrects a lab run, which is
  marked expired); a failed record is never applied, and hides older passed ones: the equipment
  was found out of tolerance, so its older corrections are no longer known to hold;
- acceptance runs refuse to start unless every role is calibrated or not-required
  (`StationCalibration.require()`); lab runs warn and carry the state with every result.
"""
from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

from .records import CalibrationRecord, Equipment, utcnow
from phonebench.core.errors import BenchError

log = logging.getLogger(__name__)


class CalibrationRecords(Protocol):
    """Where a unit's calibration records are read: the store's book, or none (nothing on record)."""

    def latest(self, equipment: Equipment, procedure: str) -> CalibrationRecord | None: ...

CALIBRATED, EXPIRED, FAILED, UNCALIBRATED, NOT_REQUIRED = \
    "calibrated", "expired", "failed", "uncalibrated", "not-required"
_SEVERITY = {NOT_REQUIRED: 0, CALIBRATED: 0, EXPIRED: 1, UNCALIBRATED: 2, FAILED: 3}

# What each instrument role needs: (equipment kind, procedure). The scope's measurements also
# depend on the fixture's delay, so the fixture's record is part of the scope's state.
REQUIRED: dict[str, tuple[tuple[str, str], ...]] = {
    "scope": (("instrument", "scope-deskew"), ("fixture", "fixture-delay")),
    "supply": (("instrument", "supply-zero"),),
    "thermal": (("instrument", "thermocouple-offsets"),),
    "stimulus": (),  # its timing is referenced by scope channel 1 itself: nothing to correct
}


REFUSED_EXIT = 6  # status of a pytest run that --require-calibration refused (0-5 are pytest's own)
UNREADABLE_EXIT = 7  # --require-calibration could not read the calibration records: the unit is held, not refused


class CalibrationRequired(BenchError):
    """An acceptance run refused to start: a required calibration is missing, expired or failed."""


@dataclass
class ProcedureState:
    procedure: str
    equipment: Equipment
    state: str
    record: CalibrationRecord | None

    def problem(self) -> str | None:
        where = self.equipment.label()
        if self.state == UNCALIBRATED:
            return f"{where}: never calibrated ({self.procedure})"
        if self.state == EXPIRED:
            assert self.record is not None and self.record.due is not None
            return (f"{where}: {self.procedure} calibration {self.record.certificate} expired on "
                    f"{self.record.due:%Y-%m-%d %H:%M} UTC")
        if self.state == FAILED:
            assert self.record is not None
            return (f"{where}: last {self.procedure} calibration {self.record.certificate} failed "
                    f"({self.record.reason})")
        return None


@dataclass
class RoleCalibration:
    """One instrument role's calibration: its state, the records behind it, the corrections applied."""

    role: str
    state: str
    procedures: list[ProcedureState] = field(default_factory=list)
    corrections: dict[str, float] = field(default_factory=dict)

    @property
    def problems(self) -> list[str]:
        return [p for p in (s.problem() for s in self.procedures) if p]

    @property
    def due(self) -> dt.datetime | None:
        dues = [s.record.due for s in self.procedures if s.record is not None and s.record.due is not None]
        return min(dues) if dues else None

    def to_dict(self) -> dict[str, Any]:
        """The `calibration` entry of an instrument in results.json."""
        records = [s.record for s in self.procedures if s.record is not None]
        return {
            "state": self.state,
            "record_ids": [r.id for r in records],
            "certificates": [r.certificate for r in records],
            "due": self.due.isoformat(timespec="seconds") if self.due else None,
            "corrections": dict(self.corrections),
            **({"problems": self.problems} if self.problems else {}),
        }


@dataclass
class StationCalibration:
    roles: dict[str, RoleCalibration]
    checked: dt.datetime

    @property
    def fixture_delay_s(self) -> float | None:
        """The fixture's acoustic/electrical delay the voice-latency check subtracts (None: not known)."""
        scope = self.roles.get("scope")
        return None if scope is None else scope.corrections.get("fixture_delay_s")

    @property
    def ok(self) -> bool:
        return all(r.state in (CALIBRATED, NOT_REQUIRED) for r in self.roles.values())

    @property
    def state(self) -> str:
        """The worst state of any role."""
        states = [r.state for r in self.roles.values()] or [NOT_REQUIRED]
        return max(states, key=_SEVERITY.__getitem__)

    def problems(self) -> list[str]:
        return [p for r in self.roles.values() for p in r.problems]

    def require(self) -> None:
        """Raise CalibrationRequired (acceptance runs) unless every instrument is calibrated."""
        if not self.ok:
            raise CalibrationRequired(
                "acceptance refused: the station is not calibrated:\n    " + "\n    ".join(self.problems()),
                hint="run `bench calibrate` (with the loopback fixture and the reference thermometer in place)")

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "checked": self.checked.isoformat(timespec="seconds"),
                "roles": {role: r.to_dict() for role, r in self.roles.items()}}


def procedure_state(book: CalibrationRecords, equipment: Equipment, procedure: str,
                    now: dt.datetime) -> ProcedureState:
    record = book.latest(equipment, procedure)
    if record is None:
        state = UNCALIBRATED
    elif not record.passed:
        state = FAILED
    elif record.expired(now):
        state = EXPIRED
    else:
        state = CALIBRATED
    return ProcedureState(procedure, equipment, state, record)


def role_calibration(book: CalibrationRecords, role: str, instrument: Equipment, fixture: Equipment,
                     now: dt.datetime | None = None) -> RoleCalibration:
    now = now or utcnow()
    needed = REQUIRED.get(role, ())
    if not needed:
        return RoleCalibration(role, NOT_REQUIRED)
    states = [procedure_state(book, instrument if kind == "instrument" else fixture, procedure, now)
              for kind, procedure in needed]
    corrections: dict[str, float] = {}
    for s in states:
        if s.record is not None and s.record.passed:
            corrections.update(s.record.adjustments)
    worst = max((s.state for s in states), key=_SEVERITY.__getitem__)
    return RoleCalibration(role, worst, states, corrections)


def station_calibration(book: CalibrationRecords, instruments: dict[str, Equipment], fixture: Equipment,
                        now: dt.datetime | None = None) -> StationCalibration:
    """State of every instrument role of a station (instruments: role -> its identity)."""
    now = now or utcnow()
    roles = {role: role_calibration(book, role, equipment, fixture, now) for role, equipment in instruments.items()}
    return StationCalibration(roles, now)
