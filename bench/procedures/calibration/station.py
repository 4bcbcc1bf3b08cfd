"""Calibration state of a running station: the store it reads records from, the equipment
identity of each instrument, the corrections each instrument fixture applies."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .book import CalibrationBook
from .records import Equipment
from .settings import CalibrationSettings
from .state import (
    RoleCalibration,
    StationCalibration,
    role_calibration,
    station_calibration,
)
from phonebench.core.errors import BenchError
from phonebench.drivers.visa import InstrumentIdentity

log = logging.getLogger(__name__)


def instrument_equipment(role: str, identity: InstrumentIdentity, settings: CalibrationSettings,
                         location: str = "") -> Equipment:
    return Equipment.instrument(identity, role, settings.asset_tag(role), location or None)


def fixture_equipment(station_name: str, settings: CalibrationSettings, location: str = "") -> Equipment:
    return Equipment.fixture(station_name, settings.asset_tag("fixture"), location or None)


def open_book(database: str | None, results_dir: str | Path) -> CalibrationBook:
    """The calibration book in the station's results store (same resolution as the results)."""
    from ...store import open_store, resolve_database_url

    return CalibrationBook(open_store(resolve_database_url(database, results_dir)))


@dataclass
class StationCalibrationView:
    """Per-session cache: each role's calibration, evaluated once, from one store."""

    station_name: str
    location: str
    settings: CalibrationSettings
    book: CalibrationBook | None
    book_error: BenchError | None = None
    # (role, the instrument's identity) -> its calibration: bays of one station have a unit each
    # per role, and a unit's corrections must never be applied to another bay's unit.
    units: dict[tuple[str, tuple[str, ...]], RoleCalibration] = field(default_factory=dict)

    def role(self, role: str, identity: InstrumentIdentity) -> RoleCalibration:
        key = (role, _unit_key(identity))
        if key not in self.units:
            equipment = instrument_equipment(role, identity, self.settings, self.location)
            # No store, no records: nothing can be shown calibrated.
            self.units[key] = role_calibration(self.book or _EmptyBook(), role, equipment, self.fixture)
        return self.units[key]

    @property
    def roles(self) -> dict[str, RoleCalibration]:
        """Each role's first unit by the role's name, further units (other bays') as `role@serial`."""
        named: dict[str, RoleCalibration] = {}
        for (role, unit), calibration in self.units.items():
            named[role if role not in named else f"{role}@{unit[-1]}"] = calibration
        return named

    @property
    def fixture(self) -> Equipment:
        return fixture_equipment(self.station_name, self.settings, self.location)

    def station(self) -> StationCalibration:
        from .records import utcnow

        return StationCalibration(dict(self.roles), utcnow())

    def close(self) -> None:
        if self.book is not None:
            self.book.store.close()


def _unit_key(identity: InstrumentIdentity) -> tuple[str, ...]:
    return tuple(str(getattr(identity, part, "")) for part in ("manufacturer", "model", "serial"))


class _EmptyBook:
    """Stands in for an unreachable store: nothing is on record."""

    def latest(self, equipment: Equipment, procedure: str) -> None:
        return None


def evaluate(book: CalibrationBook, station_name: str, identities: dict[str, Any], settings: CalibrationSettings,
             location: str = "") -> StationCalibration:
    """State of every instrument (role -> InstrumentIdentity) of a station, without a pytest session."""
    instruments = {role: instrument_equipment(role, ident, settings, location) for role, ident in identities.items()}
    return station_calibration(book, instruments, fixture_equipment(station_name, settings, location))
