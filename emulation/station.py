"""The embedded emulated station: phones behind real ADB daemons, instruments behind real
SCPI/serial servers, all on ephemeral loopback ports, each phone in its own simulated world."""
from __future__ import annotations

import dataclasses
import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.core.errors import ConfigError
from bench.core.station import (
    LEGACY_BAY,
    BayConfig,
    DutConfig,
    EmulatedConfig,
    InstrumentConfig,
    InstrumentRef,
    StationConfig,
)
from emulation.device import EmulatedPhone, PhoneSpec
from emulation.world import World

log = logging.getLogger(__name__)


EMULATED_ROLES = ("scope", "supply", "thermal", "stimulus", "clock")  # all on the first phone's world
NOT_STARTED = "(started with the run)"


def plan_emulated(config: StationConfig) -> StationConfig:
    """The DUTs and instrument roles an emulated station will have, before starting it (addresses
    are placeholders until merge_into gives the real ones)."""
    serials = [spec.serial for spec in EmulatedStation(config.emulated)._specs()]
    duts = [DutConfig(name=s, address=NOT_STARTED, expected_serial=s) for s in serials]
    instruments = {role: InstrumentConfig(role=role, family="emulated", address=NOT_STARTED,
                                          attached_to=serials[0] if serials else None)
                   for role in (EMULATED_ROLES if config.emulated.instruments and serials else ())}
    return dataclasses.replace(config, duts=duts, instruments=instruments)


def sla_personas() -> set[str]:
    """Every behaviour persona some part of the emulated phone understands."""
    from emulation.runtime_personas import SLA_PERSONAS_RUNTIME
    from emulation.world import SLA_PERSONAS_WORLD

    return SLA_PERSONAS_WORLD | SLA_PERSONAS_RUNTIME


def known_faults() -> set[str]:
    from emulation.phone_spec import DEVICE_FAULTS
    from emulation.runtime import RUNTIME_FAULTS

    return DEVICE_FAULTS | set(RUNTIME_FAULTS)


@dataclass
class EmulatedDut:
    phone: EmulatedPhone
    daemon: Any  # emulation.adbd.AdbDaemon

    @property
    def name(self) -> str:
        return self.phone.spec.serial


@dataclass
class EmulatedStation:
    config: EmulatedConfig
    duts: list[EmulatedDut] = field(default_factory=list)
    instruments: dict[str, Any] = field(default_factory=dict)  # role -> InstrumentServer
    only_bay: str | None = None  # a multi-bay fleet: start this bay only (a worker testing it)
    fleet: Any = None  # emulation.bays.BayFleet of a multi-bay fleet
    _payloads: Any = None  # tempfile.TemporaryDirectory holding the installed update's weight file

    def _specs(self) -> list[PhoneSpec]:
        from emulation import npu_personas

        personas, faults = sla_personas(), known_faults()
        for phone in self.config.phones:
            if phone.sla_persona not in personas:
                raise ConfigError(f"emulated phone {phone.serial}: unknown sla_persona {phone.sla_persona!r}",
                                  hint=f"known personas: {', '.join(sorted(personas))}")
            unknown = [f for f in phone.faults if f not in faults and not f.startswith("kill-on:")]
            if unknown:
                raise ConfigError(f"emulated phone {phone.serial}: unknown fault(s) {unknown}",
                                  hint=f"known faults: {', '.join(sorted(faults))}, kill-on:<command>")

        if not self.config.phones:
            return npu_personas.default_fleet()
        specs = []
        for phone in self.config.phones:
            overrides = dict(sla_persona=phone.sla_persona, faults=list(phone.faults), seed=phone.seed)
            if phone.npu_persona:
                specs.append(npu_personas.phone_spec(phone.npu_persona, phone.serial, **overrides))
            else:
                specs.append(dataclasses.replace(PhoneSpec(), serial=phone.serial, **overrides))
        return specs

    def start(self) -> EmulatedStation:
        from emulation.adbd import AdbDaemon, AuthPolicy

        auth = None if self.config.auth == "none" else AuthPolicy(
            accept_any=self.config.auth in ("any", "prompt"), prompt=self.config.auth == "prompt",
            allowed_keys=list(self.config.allowed_keys))
        if self.config.bays:
            return self._start_bays(auth)
        try:
            for spec in self._specs():
                phone = EmulatedPhone(spec, World(seed=spec.seed, persona=spec.sla_persona))
                daemon = AdbDaemon(phone, auth=auth)
                daemon.start()
                self.duts.append(EmulatedDut(phone, daemon))
                log.info("emulated phone %s (%s %s) at %s", spec.serial, spec.soc_manufacturer,
                         spec.soc_model, daemon.address)
            if self.config.instruments and self.duts:
                self._start_instruments(self.duts[0].phone.world)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_instruments(self, world: World) -> None:
        from emulation.instruments.registry import make_server

        for role in EMULATED_ROLES:
            server = make_server(role, self.config.families.get(role), world)
            server.start()
            self.instruments[role] = server
            log.info("emulated %s (%s) at %s", role, server.family, server.address)

    # --- a multi-bay fleet (emulation/bays.py) ----------------------------------------------
    def _start_bays(self, auth: Any) -> EmulatedStation:
        from emulation.adbd import AdbDaemon
        from emulation.bays import BayFleet, bay_slots

        slots = bay_slots(self.config.bays)
        if self.only_bay is not None and self.only_bay not in slots:
            raise ConfigError(f"emulated fleet: no bay named {self.only_bay!r}", hint=f"bays: {', '.join(slots)}")
        specs = self._specs()
        if len(specs) < len(slots):
            raise ConfigError(f"emulated fleet: {len(slots)} bays but {len(specs)} [[emulated.phone]] tables",
                              hint="list one phone per bay, or none for the default fleet")
        self.fleet = BayFleet(slots)
        worlds = {}
        try:
            for bay, spec in zip(slots, specs):
                if self.only_bay not in (None, bay):
                    continue
                phone = EmulatedPhone(spec, World(seed=spec.seed, persona=spec.sla_persona))
                daemon = AdbDaemon(phone, auth=auth)
                daemon.start()
                self.duts.append(EmulatedDut(phone, daemon))
                worlds[bay] = phone.world
                log.info("bay %s: emulated phone %s at %s", bay, spec.serial, daemon.address)
            self.fleet.start(worlds, self.config.instruments)
        except BaseException:
            self.stop()
            raise
        return self

    def _merge_bays(self, config: StationConfig) -> StationConfig:
        duts = {bay: DutConfig(name=d.name, address=d.daemon.address, expected_serial=d.name, transport="direct")
                for bay, d in zip([b for b in self.fleet.slots if self.only_bay in (None, b)], self.duts)}
        bays, inventory = self.fleet.config(duts)
        return dataclasses.replace(config, duts=list(duts.values()), instruments={}, bays=bays, inventory=inventory,
                                   emulated_station=self, payloads=config.payloads or self.payloads_folder())

    def stop(self) -> None:
        if self.fleet is not None:
            self.fleet.stop()
        for server in self.instruments.values():
            server.stop()
        for dut in self.duts:
            dut.daemon.stop()
        self.instruments.clear()
        self.duts.clear()
        if self._payloads is not None:
            self._payloads.cleanup()
            self._payloads = None

    def __enter__(self) -> EmulatedStation:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def payloads_folder(self) -> Path:
        """The OTA payloads a lab would hold for these phones: the update they all have installed."""
        if self._payloads is None:
            from emulation.weights import update_package

            self._payloads = tempfile.TemporaryDirectory(prefix="phonebench-payloads-")
            (Path(self._payloads.name) / "model.bin").write_bytes(update_package().data)
        return Path(self._payloads.name)

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(self.instruments)

    def merge_into(self, config: StationConfig) -> StationConfig:
        """The station config a bench uses to reach this emulated station (DUTs and instruments)."""
        if self.fleet is not None:
            return self._merge_bays(config)
        # Reached directly: an in-process station needs no adb server (a station file written by
        # `bench emulate` goes through the server, as a lab's does).
        duts = [DutConfig(name=d.name, address=d.daemon.address, expected_serial=d.name, transport="direct")
                for d in self.duts]
        attached = duts[0].name if duts else None
        instruments = {role: InstrumentConfig(role=role, family=s.family, address=s.address, attached_to=attached)
                       for role, s in self.instruments.items()}
        bays = [BayConfig(LEGACY_BAY, [d.name for d in duts], {role: InstrumentRef(role) for role in instruments})]
        return dataclasses.replace(config, duts=duts, instruments=instruments, emulated_station=self, bays=bays,
                                   inventory={r: dataclasses.replace(i, name=r) for r, i in instruments.items()},
                                   payloads=config.payloads or self.payloads_folder())
