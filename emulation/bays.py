"""The emulated station's bays: one phone per bay, each in its own simulated world, with the
instruments a station file would wire to it.

- Every bay has its own scope, audio source, station clock (its world's time server) and fixture
  controller; and, when the [emulated] table names a chamber family, a thermal chamber of its own
  around its phone (its air is the world's ambient).
- The power analyzer and the thermocouples are the bay's own (an N6705C and a DAQ970A per bay),
  unless the station is the shared rack (`[emulated] bays = N`): one N6705C mainframe with a module
  per bay (`@1`..`@4`) and one thermocouple board (channels `<k>.T1` .. `<k>.T4` for bay k),
  used by one bay at a time.

Bays couple only through what they share: the instruments, which the bench uses one bay at a
time. Nothing physical links the worlds (separate fixtures, separate airflow), so a bay's
results do not depend on what its neighbours run or when.

A worker that tests one bay starts only that bay (`only="bay2"`): its phone, its module of the
mainframe, its channels of the board, its scope and source. The addresses differ from the whole
fleet's, the physics of the bay does not.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from phonebench.core.station import (
    BayConfig,
    DutConfig,
    InstrumentConfig,
    InstrumentRef,
    emulated_bay_names,
)
from .instruments.thermal_probe import GENERIC_CHANNELS, ThermalProbeServer
from .world import World

log = logging.getLogger(__name__)

SUPPLY, PROBES = "n6705c", "probes"
SHIELD_CHANNEL = "T4"  # the thermocouple on the SoC's shield (docs/station-file.md: shield_channel)
SHIELD_FAMILIES = ("keysight-daq970a", "generic-ascii")  # the emulated thermal instruments wired to the shield
# The per-bay DAQ970A as a lab wires it: the driver's default scan plus the shield on channel 105.
DAQ_OPTIONS = {"channels": {"T1": 101, "T2": 102, "T3": 103, SHIELD_CHANNEL: 105}}
BOARD_POINTS = ("T1", "T2", "T3", "T4")  # per bay: cover over the SoC, over the battery, ambient, SoC shield


class ProbeBoardServer(ThermalProbeServer):
    """The generic thermocouple board with one group of channels per bay, each taped to that
    bay's phone. Streams are paced by the first group's world (the bench reads the board by
    polling; only the single-world board's streams are exercised by tests)."""

    def __init__(self, worlds: dict[int, World], port: int = 0) -> None:
        first = worlds[min(worlds)]
        channels = {f"{k}.{name}": GENERIC_CHANNELS[name] for k in sorted(worlds) for name in BOARD_POINTS}
        super().__init__(first, "generic", port, channels)
        self.worlds = {f"{k}.{name}": worlds[k] for k in worlds for name in BOARD_POINTS}

    def _sample(self) -> dict[str, float | str]:
        points = {k: w.surface_temperatures() for k, w in {id(w): w for w in self.worlds.values()}.items()}
        out: dict[str, float | str] = {}
        for name, ch in self.channels.items():
            if name in self.probe_faults:
                out[name] = self.probe_faults[name]
                continue
            value = points[id(self.worlds[name])][ch.point] + ch.offset_c + self.rng.normal(0.0, ch.noise_c)
            out[name] = round(value / ch.resolution_c) * ch.resolution_c
        return out


# Instrument name prefix -> role, for the inventory a station file would hold.
ROLES = {SUPPLY: "supply", PROBES: "thermal", "supply": "supply", "thermal": "thermal", "scope": "scope",
         "awg": "stimulus", "clock": "clock", "fixture": "fixture", "chamber": "chamber"}


@dataclass
class BayFleet:
    """The shared and per-bay instrument servers of the station's running bays."""

    slots: dict[str, int]  # bay name -> slot / channel group
    shared: bool = False  # the rack: one mainframe and one probe board for every bay
    families: dict[str, str] = field(default_factory=dict)  # role -> emulated family ([emulated] scope = ...)
    servers: dict[str, Any] = field(default_factory=dict)  # instrument name -> server
    cross_wired: tuple[str, ...] = ()  # two bays whose supply and probes sit on each other's phone
    chamber_bays: tuple[str, ...] = ()  # the bays in a chamber, with a chamber family named (empty: every bay)
    chamber_door: tuple[float, float] | None = None  # the chambers' door opens at s, for s (station clock)

    def start(self, worlds: dict[str, World], with_instruments: bool) -> None:
        from .instruments.mainframe import MainframeServer
        from .instruments.registry import make_server

        if not worlds:
            return
        if with_instruments and self.shared:
            by_slot = {self.slots[bay]: world for bay, world in worlds.items()}
            self.servers[SUPPLY] = MainframeServer(by_slot)
            self.servers[PROBES] = ProbeBoardServer(by_slot)
        for bay, world in worlds.items():
            self.servers[f"clock-{bay}"] = make_server("clock", None, world)  # the station clock: the bay's world's
            if not with_instruments:
                continue
            if not self.shared:  # a cross-wired bay's cables reach the other bay's phone
                wired = worlds[self._other(bay)] if bay in self.cross_wired else world
                self.servers[f"supply-{bay}"] = make_server("supply", self.families.get("supply"), wired)
                self.servers[f"thermal-{bay}"] = make_server("thermal", self.families.get("thermal"), wired)
            self.servers[f"scope-{bay}"] = make_server("scope", self.families.get("scope"), world)
            self.servers[f"awg-{bay}"] = make_server("stimulus", self.families.get("stimulus"), world)
            self.servers[f"fixture-{bay}"] = make_server("fixture", None, world)
            if "chamber" in self.families and (not self.chamber_bays or bay in self.chamber_bays):
                chamber = make_server("chamber", self.families["chamber"], world)  # the phone's ambient is its air
                if self.chamber_door is not None:
                    chamber.chamber.schedule_door(*self.chamber_door)
                self.servers[f"chamber-{bay}"] = chamber
        for name, server in self.servers.items():
            if name not in (SUPPLY, PROBES):  # a bay's own unit: a serial of its own, as in a real rack
                server.idn = unit_idn(server.idn, self.slots[name.split("-", 1)[1]])
            server.start()
            log.info("emulated %s (%s) at %s", name, server.family, server.address)

    def _other(self, bay: str) -> str:
        first, second = self.cross_wired
        return second if bay == first else first

    def stop(self) -> None:
        for server in self.servers.values():
            server.stop()
        self.servers.clear()

    def shield_channel(self) -> str | None:
        """The thermal channel on the SoC's shield, if this fleet's thermal instrument has one."""
        if self.shared:
            return SHIELD_CHANNEL if PROBES in self.servers else None
        thermal = [s.family for name, s in self.servers.items() if name.startswith("thermal-")]
        return SHIELD_CHANNEL if thermal and thermal[0] in SHIELD_FAMILIES else None

    def config(self, duts: dict[str, DutConfig]) -> tuple[list[BayConfig], dict[str, InstrumentConfig]]:
        """The bays and the instrument inventory a station file would describe for these bays."""
        inventory = {name: InstrumentConfig(role=ROLES[name.split("-")[0]], family=s.family, address=s.address,
                                            name=name, attached_to=None if name in (SUPPLY, PROBES) else
                                            duts[name.split("-", 1)[1]].name,
                                            shared=name in (SUPPLY, PROBES) and len(duts) > 1,
                                            options=dict(DAQ_OPTIONS) if s.family == "keysight-daq970a" else {})
                     for name, s in self.servers.items()}
        bays = []
        for bay, dut in duts.items():
            k = str(self.slots[bay])
            wiring = {ROLES[name.split("-")[0]]: InstrumentRef(name) for name in self.servers
                      if name.endswith(f"-{bay}")}
            if SUPPLY in self.servers:
                wiring.update(supply=InstrumentRef(SUPPLY, k), thermal=InstrumentRef(PROBES, k))
            bays.append(BayConfig(bay, [dut.name], wiring))
        return bays, inventory


def unit_idn(idn: str, unit: int) -> str:
    """The *IDN? of the `unit`-th instrument of one model: its serial's number counted on, so each
    bay's unit has its own identity (calibration records and locks are kept per instrument)."""
    parts = idn.split(",")
    if len(parts) < 3 or unit <= 1:
        return idn
    serial = parts[2]
    digits = len(serial) - len(serial.rstrip("0123456789"))
    if digits:
        number = int(serial[-digits:]) + unit - 1
        parts[2] = serial[:-digits] + str(number).zfill(digits)
    else:
        parts[2] = f"{serial}-{unit}"
    return ",".join(parts)


def bay_slots(count: int) -> dict[str, int]:
    return {name: k for k, name in enumerate(emulated_bay_names(count), start=1)}
