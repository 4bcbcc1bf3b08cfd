"""The emulated station: phones behind real ADB daemons, and per bay the instruments behind real
SCPI/serial servers, all on ephemeral loopback ports, each phone in its own simulated world.

What the bench gets is addresses (`merge_into`), a station file's worth: it reaches the phones
through the adb server (unless `[emulated] transport = "direct"`) and the instruments over VISA
and serial, exactly as on hardware. `bench emulate --write-station` writes those addresses out.
"""
from __future__ import annotations

import dataclasses
import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from phonebench.core.errors import ConfigError
from phonebench.core.station import (DutConfig, EmulatedConfig, RoomConfig, Rooms, StationConfig, emulated_bay_names,
                                     fresh_seed)
from .device import EmulatedPhone, PhoneSpec
from .phones import emulated_phone
from .room import rack_room
from .npu_personas import default_fleet
from .runtime_builds import runtime_build
from .unit_variation import spec_night_seed
from .world import World

log = logging.getLogger(__name__)

EMULATED_ROLES = ("scope", "supply", "thermal", "stimulus", "clock", "fixture")  # every bay has each
NOT_STARTED = "(started with the run)"
# An emulated phone that comes back at all does so within a second of real time.
RECOVERY_TIMEOUT_S = 10.0


def bay_serials(config: EmulatedConfig) -> dict[str, str]:
    """Bay name -> the serial of the phone the emulated station puts in it: one bay per phone, or
    the shared rack's `bays` bays."""
    serials = [p.serial for p in config.phones] or [s.serial for s in default_fleet()]
    return dict(zip(emulated_bay_names(config.bays or len(serials)), serials))


def sla_personas() -> set[str]:
    """Every behaviour persona some part of the emulated phone understands."""
    from .runtime_personas import SLA_PERSONAS_RUNTIME
    from .world import SLA_PERSONAS_WORLD

    return SLA_PERSONAS_WORLD | SLA_PERSONAS_RUNTIME


def known_faults() -> set[str]:
    from .phone_spec import DEVICE_FAULTS
    from .runtime import RUNTIME_FAULTS

    return DEVICE_FAULTS | set(RUNTIME_FAULTS)


@dataclass
class EmulatedDut:
    phone: EmulatedPhone
    daemon: Any  # phonebench.emulation.adbd.AdbDaemon

    @property
    def name(self) -> str:
        return self.phone.spec.serial


@dataclass(frozen=True)
class EmulatedPhoneInfo:
    """What `bench emulate` shows of a running phone."""

    serial: str
    soc_manufacturer: str
    soc_model: str
    npu_persona: str
    address: str


@dataclass
class EmulatedStation:
    """The emulated station's phones and its bays' instrument servers."""

    config: EmulatedConfig
    duts: list[EmulatedDut] = field(default_factory=list)
    only_bay: str | None = None  # start this bay only (a worker testing it)
    fleet: Any = None  # phonebench.emulation.bays.BayFleet: the bays' instrument servers
    _payloads: Any = None  # tempfile.TemporaryDirectory holding the installed update's weight file
    # The station file's [room] (None: the default rack, each bay steady at its own ambient, rack_room).
    rooms: Rooms | None = None
    bay_rooms: dict[str, RoomConfig] = field(default_factory=dict)  # the room each started bay sits in
    seed: int | None = None  # the night's noise seed, once started: the config's, else a fresh one

    def _specs(self, run_seed: int | None = None) -> list[PhoneSpec]:
        from . import npu_personas

        personas, faults = sla_personas(), known_faults()
        for phone in self.config.phones:
            if phone.sla_persona not in personas:
                raise ConfigError(f"emulated phone {phone.serial}: unknown sla_persona {phone.sla_persona!r}",
                                  hint=f"known personas: {', '.join(sorted(personas))}")
            runtime_build(phone.build)  # an unknown build: said before anything starts
            unknown = [f for f in phone.faults if f not in faults and not f.startswith("kill-on:")]
            if unknown:
                raise ConfigError(f"emulated phone {phone.serial}: unknown fault(s) {unknown}",
                                  hint=f"known faults: {', '.join(sorted(faults))}, kill-on:<command>")

        if not self.config.phones:
            return [dataclasses.replace(s, run_seed=run_seed) for s in npu_personas.default_fleet()]
        specs = []
        for phone in self.config.phones:
            overrides = dict(sla_persona=phone.sla_persona, faults=list(phone.faults), seed=phone.seed,
                             runtime_build=phone.build, run_seed=run_seed)
            if phone.npu_persona:
                specs.append(npu_personas.phone_spec(phone.npu_persona, phone.serial, **overrides))
            else:
                specs.append(dataclasses.replace(PhoneSpec(), serial=phone.serial, **overrides))
        return specs

    def start(self) -> EmulatedStation:
        from .adbd import AdbDaemon, AuthPolicy
        from .bays import BayFleet

        auth = None if self.config.auth == "none" else AuthPolicy(
            accept_any=self.config.auth in ("any", "prompt"), prompt=self.config.auth == "prompt",
            allowed_keys=list(self.config.allowed_keys))
        self.seed = self.config.seed if self.config.seed is not None else fresh_seed()
        log.info("emulated station: the night's noise seed is %d (replay it with bench run --seed %d)",
                 self.seed, self.seed)
        specs = self._specs(self.seed)
        bays = emulated_bay_names(self.config.bays or len(specs))
        if self.only_bay is not None and self.only_bay not in bays:
            raise ConfigError(f"emulated station: no bay named {self.only_bay!r}", hint=f"bays: {', '.join(bays)}")
        for key in ("cross_wired", "chamber_bays"):
            unknown = [b for b in getattr(self.config, key) if b not in bays]
            if unknown:
                raise ConfigError(f"emulated station: {key} names no bay {', '.join(unknown)}",
                                  hint=f"bays: {', '.join(bays)}")
        if len(specs) < len(bays):
            raise ConfigError(f"emulated station: {len(bays)} bays but {len(specs)} [[emulated.phone]] tables",
                              hint="list one phone per bay, or none for the default fleet")
        self.fleet = BayFleet({bay: k for k, bay in enumerate(bays, start=1)}, shared=self.config.bays > 0,
                              families=dict(self.config.families), cross_wired=tuple(self.config.cross_wired),
                              chamber_bays=tuple(self.config.chamber_bays),
                              chamber_door=None if self.config.chamber_door_open_at_s is None else
                              (self.config.chamber_door_open_at_s, self.config.chamber_door_open_for_s))
        worlds = {}
        try:
            for k, (bay, spec) in enumerate(zip(bays, specs), start=1):
                if self.only_bay not in (None, bay):
                    continue
                room = self.rooms.for_bay(bay) if self.rooms is not None else rack_room(k)
                self.bay_rooms[bay] = room
                phone = emulated_phone(spec, World(seed=spec_night_seed(spec), persona=spec.sla_persona, room=room))
                daemon = AdbDaemon(phone, auth=auth)
                daemon.start()
                self.duts.append(EmulatedDut(phone, daemon))
                worlds[bay] = phone.world
                log.info("bay %s: emulated phone %s (%s %s) at %s", bay, spec.serial, spec.soc_manufacturer,
                         spec.soc_model, daemon.address)
            self.fleet.start(worlds, self.config.instruments)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.fleet is not None:
            self.fleet.stop()
        for dut in self.duts:
            dut.daemon.stop()
        self.duts.clear()
        self.bay_rooms.clear()
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
            from .weights import update_package

            self._payloads = tempfile.TemporaryDirectory(prefix="phonebench-payloads-")
            (Path(self._payloads.name) / "model.bin").write_bytes(update_package().data)
        return Path(self._payloads.name)

    def phones(self) -> list[EmulatedPhoneInfo]:
        return [EmulatedPhoneInfo(d.name, d.phone.spec.soc_manufacturer, d.phone.spec.soc_model,
                                  d.phone.spec.npu_persona or "", d.daemon.address) for d in self.duts]

    def rooms_stated(self) -> Rooms:
        """The rooms of the running bays as a station file states them: the given [room], else the
        rack's (a steady 25 degC room, each bay's own ambient as its override)."""
        if self.rooms is not None:
            return self.rooms
        station = RoomConfig()
        return Rooms(station, {bay: {key: value for key, value in room.keys().items()
                                     if station.keys().get(key) != value}
                               for bay, room in self.bay_rooms.items()})

    def merge_into(self, config: StationConfig) -> StationConfig:
        """The station config a bench uses to reach this station: addresses only, as a station
        file gives them on hardware."""
        running = [bay for bay in self.fleet.slots if self.only_bay in (None, bay)]
        declared = {p.serial: p.expected_soc for p in self.config.phones}
        shield = self.fleet.shield_channel()
        duts = {bay: DutConfig(name=d.name, address=d.daemon.address, expected_serial=d.name,
                               transport=self.config.transport, recovery_timeout_s=RECOVERY_TIMEOUT_S,
                               expected_soc=declared.get(d.name), shield_channel=shield)
                for bay, d in zip(running, self.duts)}
        bays, inventory = self.fleet.config(duts)
        merged = dataclasses.replace(config, duts=list(duts.values()), instruments={}, bays=bays, inventory=inventory,
                                     payloads=config.payloads or self.payloads_folder(), rooms=self.rooms_stated(),
                                     emulated_seed=self.seed)
        return merged.for_bay(bays[0].name) if len(bays) == 1 else merged  # one bay: its view, as a file gives
