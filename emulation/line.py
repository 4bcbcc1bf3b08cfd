"""An emulated production line station: one fixture (a simulated world with the scope, battery
emulator, DAQ970A thermocouple scanner and stimulus attached) and a queue of phones that enter
it one after the other through the same ADB address, as units do on a real line's fixture.

    with EmulatedLine(count=20, faulty=2, seed=7) as line:
        station_file = line.write_station(tmp / "line.toml")     # what `bench accept` points at
        for unit in line.units:
            line.load(unit)                                       # swap the unit into the fixture
            ... bench accept --station station_file --serial unit.serial ...

Faulty units are chosen by the seed; each gets one fault kind (FAULT_KINDS) that a check of the
acceptance profile must catch. `remove_phone()` pulls the phone mid-test (its adbd dies) and
`stop_instrument(role)` takes an instrument off the network, for the fault tests.
"""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from phonebench.core.station import DutConfig, InstrumentConfig, StationConfig
from phonebench.core.station_writer import write_station
from .device import EmulatedPhone, PhoneSpec
from .phones import emulated_phone
from .world import World

log = logging.getLogger(__name__)

# What makes a faulty unit faulty: PhoneSpec overrides, and the check that must catch it.
FAULT_KINDS: dict[str, tuple[dict[str, Any], str]] = {
    "no-redundancy": ({"sla_persona": "no-redundancy"}, "redundancy never engages under supply ripple"),
    "skin-sensor-drift": ({"faults": ["skin-sensor-drift"]}, "skin temperature sensor reads 6 °C high"),
    "corrupt-weights": ({"sla_persona": "corrupt-weights"}, "a weight page is corrupted on flash"),
    "slow": ({"sla_persona": "slow"}, "answers too slowly"),
    "npu-erratic": ({"faults": ["npu-erratic"]}, "NPU results are off by one now and then"),
}
DEFAULT_FAULTS = ("no-redundancy", "skin-sensor-drift")
ROLES = ("scope", "supply", "thermal", "stimulus", "fixture")
SERIAL_FORMAT = "LN{seed:02d}{n:04d}"


_FIXTURE_COMMENT = "The emulated production line's fixture (emulation/line.py); valid while it runs."


@dataclass(frozen=True)
class LineUnit:
    index: int
    serial: str
    spec: PhoneSpec
    fault: str | None = None  # a FAULT_KINDS key; None for a good unit

    @property
    def expected(self) -> str:
        return "FAIL" if self.fault else "PASS"


def plan_units(count: int, faulty: int, seed: int = 7, faults: tuple[str, ...] = DEFAULT_FAULTS,
               serial_format: str = SERIAL_FORMAT) -> list[LineUnit]:
    """`count` units, `faulty` of them (chosen by the seed) with the fault kinds in turn; unit n
    (from 1) gets serial_format.format(seed=seed, n=n)."""
    if not 0 <= faulty <= count:
        raise ValueError(f"faulty must be between 0 and count ({count}), got {faulty}")
    unknown = [f for f in faults if f not in FAULT_KINDS]
    if unknown or not faults:
        raise ValueError(f"unknown fault kind(s) {unknown or faults}; known: {', '.join(FAULT_KINDS)}")
    rng = np.random.default_rng([seed, 0x11E])
    bad = sorted(int(i) for i in rng.choice(count, size=faulty, replace=False)) if faulty else []
    units = []
    for index in range(count):
        serial = serial_format.format(seed=seed, n=index + 1)
        fault = faults[bad.index(index) % len(faults)] if index in bad else None
        overrides: dict[str, Any] = {"serial": serial, "seed": seed * 1000 + index + 1}
        if fault:
            changes = FAULT_KINDS[fault][0]
            overrides.update({k: list(v) if isinstance(v, list) else v for k, v in changes.items()})
        units.append(LineUnit(index, serial, dataclasses.replace(PhoneSpec(), **overrides), fault))
    return units


class EmulatedLine:
    def __init__(self, count: int = 20, faulty: int = 0, seed: int = 7, faults: tuple[str, ...] = DEFAULT_FAULTS,
                 name: str = "emulated-line", serial_format: str = SERIAL_FORMAT,
                 units: list[LineUnit] | None = None) -> None:
        """`units`: this fixture's share of a station's plan (then count, faulty and faults are unused)."""
        self.name = name
        self.units = list(units) if units is not None else plan_units(count, faulty, seed, faults, serial_format)
        if not self.units:
            raise ValueError(f"line {name}: no units to test")
        self.world = World(seed=seed)
        self.instruments: dict[str, Any] = {}  # role -> InstrumentServer
        self.phone: EmulatedPhone | None = None
        self.daemon: Any = None  # phonebench.emulation.adbd.AdbDaemon of the unit in the fixture
        self.adb_port = 0  # the fixture's ADB address; kept from unit to unit

    # --- lifecycle ------------------------------------------------------------------------
    def start(self) -> EmulatedLine:
        from .instruments.awg import AwgServer
        from .instruments.daq970a import Daq970aServer
        from .instruments.fixture import FixtureServer
        from .instruments.power_analyzer import PowerAnalyzerServer
        from .instruments.scope import KeysightScopeServer

        # The emulated station's instrument models (emulation/station.py), so `bench calibrate` on
        # the emulated station calibrates the very instruments (same models and *IDN? identities)
        # that `bench accept` finds in this fixture: the documented flow needs no extra step.
        try:
            for role, server in (("scope", KeysightScopeServer(self.world)),
                                 ("supply", PowerAnalyzerServer(self.world)), ("thermal", Daq970aServer(self.world)),
                                 ("stimulus", AwgServer(self.world)), ("fixture", FixtureServer(self.world))):
                server.start()
                self.instruments[role] = server
            self.load(self.units[0])  # the fixture holds a unit (and has its ADB address) from the start
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        self.unload()
        for server in self.instruments.values():
            server.stop()
        self.instruments.clear()

    def __enter__(self) -> EmulatedLine:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- units ----------------------------------------------------------------------------
    def load(self, unit: LineUnit | PhoneSpec) -> EmulatedPhone:
        """Swap a unit into the fixture: the previous one leaves, the new one answers on the same port."""
        from .adbd import AdbDaemon, AuthPolicy

        spec = unit.spec if isinstance(unit, LineUnit) else unit
        self.unload()
        phone = emulated_phone(spec, world=self.world)
        self.world.load_phone(phone)
        daemon = AdbDaemon(phone, port=self.adb_port, auth=AuthPolicy(accept_any=True))
        daemon.start()
        self.phone, self.daemon, self.adb_port = phone, daemon, daemon.port
        log.info("line %s: unit %s in the fixture at %s", self.name, spec.serial, daemon.address)
        return phone

    def unload(self) -> None:
        if self.daemon is not None:
            self.daemon.stop()
        self.phone, self.daemon = None, None

    def remove_phone(self) -> None:
        """The phone is pulled out mid-test: its adbd dies, connections drop."""
        if self.daemon is not None:
            self.daemon.kill()

    def stop_instrument(self, role: str) -> None:
        """An instrument drops off the network mid-test."""
        self.instruments[role].stop()

    # --- how the bench reaches it ---------------------------------------------------------
    @property
    def adb_address(self) -> str:
        return f"127.0.0.1:{self.adb_port}"

    def station_config(self, results_dir: str | Path | None = None, database: str | None = None) -> StationConfig:
        # "direct": the emulated line runs in-process, with no adb server to share the phone with.
        return StationConfig(
            name=self.name, source=None, results_dir=Path(results_dir or "reports"),
            results_dir_given=results_dir is not None, location="emulated line, fixture 1", database=database,
            trust_development_key=True,  # its phone's update is development-signed: opted in by name
            duts=[DutConfig(name="fixture", address=self.adb_address, transport="direct")],
            inventory={role: InstrumentConfig(role=role, family=server.family, address=server.address, name=role)
                       for role, server in ((r, self.instruments[r]) for r in ROLES)})

    def write_station(self, path: str | Path, results_dir: str | Path | None = None,
                      database: str | None = None) -> Path:
        """The fixture's station file, written atomically by the one writer (core/station_writer.py)."""
        return write_station(path, self.station_config(results_dir, database), _FIXTURE_COMMENT)
