"""Running calibrations on a station and keeping their records: the instrument and fixture
procedures in a sensible order (deskew before the fixture delay it depends on), then, per unit,
the DUT calibration with the station's corrected instruments."""
from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import dut as dut_procedures
from . import procedures
from .book import CalibrationBook
from .fixture import FixtureControl
from .procedures import Context
from .records import CalibrationRecord
from phonebench.core.errors import ConfigError
from phonebench.core.station import StationConfig
from phonebench.drivers.device import Device
from phonebench.drivers.thermal import ThermalProbe
from .settings import CalibrationSettings

if TYPE_CHECKING:
    from ...phone.identity import DutIdentity
    from ...station.owner import StationOwner

log = logging.getLogger(__name__)

# name -> instrument roles it needs, in the order they run.
INSTRUMENT_PROCEDURES: dict[str, tuple[str, ...]] = {
    "scope-deskew": ("scope", "stimulus"),
    "fixture-delay": ("scope", "stimulus"),
    "supply-zero": ("supply",),
    "thermocouple-offsets": ("thermal",),
}
DUT_PROCEDURES: dict[str, tuple[str, ...]] = {
    "dut-ripple-onset": ("supply",),
    "dut-skin-offset": ("thermal",),
}
GROUPS = {"instruments": tuple(INSTRUMENT_PROCEDURES), "dut": tuple(DUT_PROCEDURES),
          "all": (*INSTRUMENT_PROCEDURES, *DUT_PROCEDURES)}


def expand(names: Iterable[str]) -> list[str]:
    """Procedure names (or group names: instruments, dut, all) in running order."""
    wanted: set[str] = set()
    for name in names:
        if name in GROUPS:
            wanted.update(GROUPS[name])
        elif name in INSTRUMENT_PROCEDURES or name in DUT_PROCEDURES:
            wanted.add(name)
        else:
            known = ", ".join([*GROUPS, *INSTRUMENT_PROCEDURES, *DUT_PROCEDURES])
            raise ConfigError(f"unknown calibration procedure {name!r}", hint=f"known: {known}")
    return [n for n in GROUPS["all"] if n in wanted]


@dataclass
class Outcome:
    records: list[CalibrationRecord] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # procedure -> why

    @property
    def ok(self) -> bool:
        return all(r.passed for r in self.records)


def calibrate_instruments(instruments: dict[str, Any], fixture: FixtureControl, book: CalibrationBook,
                          ctx: Context, names: Iterable[str] = INSTRUMENT_PROCEDURES,
                          reference: ThermalProbe | None = None) -> Outcome:
    """Run the instrument/fixture procedures the station has instruments for; store each record."""
    deskew: CalibrationRecord | None = None

    def run(name: str) -> CalibrationRecord:
        nonlocal deskew
        if name == "scope-deskew":
            deskew = procedures.deskew_scope(instruments["scope"], instruments["stimulus"], fixture, ctx)
            return deskew
        if name == "fixture-delay":
            return procedures.measure_fixture_delay(instruments["scope"], instruments["stimulus"], fixture, ctx, deskew)
        if name == "supply-zero":
            return procedures.supply_zero(instruments["supply"], ctx)
        return procedures.thermocouple_offsets(instruments["thermal"], fixture, ctx, reference)

    return _run_procedures(INSTRUMENT_PROCEDURES, names, instruments, book, run)


def calibrate_dut(device: Device, identity: DutIdentity, instruments: dict[str, Any], book: CalibrationBook,
                  ctx: Context, names: Iterable[str] = DUT_PROCEDURES) -> Outcome:
    """DUT calibration of one unit with the station's (corrected) instruments; store each record."""
    equipment = dut_procedures.unit_equipment(identity, ctx.location)

    def run(name: str) -> CalibrationRecord:
        if name == "dut-ripple-onset":
            return dut_procedures.ripple_onset(device, instruments["supply"], equipment, ctx)
        return dut_procedures.skin_offset(device, instruments["thermal"], equipment, ctx)

    return _run_procedures(DUT_PROCEDURES, names, instruments, book, run)


def _run_procedures(table: dict[str, tuple[str, ...]], names: Iterable[str], instruments: dict[str, Any],
                    book: CalibrationBook, run: Callable[[str], CalibrationRecord]) -> Outcome:
    """Each named procedure of `table` whose instruments the station has, in order; the others
    skipped with the instruments they lack. Every record is stored as soon as it is made."""
    out = Outcome()
    for name in names:
        if name not in table:
            continue
        missing = [r for r in table[name] if r not in instruments]
        if missing:
            out.skipped[name] = f"the station has no {', '.join(missing)}"
            continue
        record = run(name)
        _keep(book, record)
        out.records.append(record)
    return out


def _keep(book: CalibrationBook, record: CalibrationRecord) -> None:
    """Every record is kept, passed or failed (a store that refuses it raises StoreError)."""
    book.save(record)


def calibrate_station(station: StationConfig, fixture: FixtureControl | None, settings: CalibrationSettings, *,
                      operator: str = "", results_dir: Path | None = None,
                      names: Iterable[str] = INSTRUMENT_PROCEDURES, reference: ThermalProbe | None = None) -> Outcome:
    """Open a station's instruments (phonebench.core.station.StationConfig, one bay's view) through its
    owner, run the instrument and fixture procedures with them and keep every record in the
    station's store. `fixture` None: the station's fixture controller does the fixture's steps."""
    from .procedures import ambient_conditions
    from .station import open_book
    from ...station.owner import StationOwner

    book = open_book(station.database, results_dir if results_dir is not None else station.results_dir)
    try:
        with StationOwner(station) as owner, measuring_instruments(owner) as instruments:
            fixture = fixture or station_fixture(owner)
            ctx = Context(station=station.name, settings=settings, location=station.location,
                          operator=operator or settings.operator_name(),
                          ambient=ambient_conditions(instruments.get("thermal"), settings))
            return calibrate_instruments(instruments, fixture, book, ctx, names, reference)
    finally:
        book.store.close()


def measuring_instruments(owner: StationOwner) -> contextlib.AbstractContextManager[dict[str, Any]]:
    """Every instrument of the owner's station that measures or stimulates (not its clock or
    fixture), role -> driver, held for the calibration (a shared one until it ends)."""
    return owner.using(role for role in owner.station.instruments if role not in ("clock", "fixture"))


def station_fixture(owner: StationOwner, confirm: Callable[[str], None] | None = None) -> FixtureControl:
    """The station's fixture controller, else an operator asked through `confirm` for each step."""
    from .fixture import OperatorFixture

    control = owner.fixture()
    if control is not None:
        return control
    if confirm is None:
        raise ConfigError(f"station {owner.station.name!r} has no fixture controller ([instruments.fixture]) "
                          "and no operator was asked", hint="run `bench calibrate`, which asks the operator for each step")
    return OperatorFixture(confirm)
