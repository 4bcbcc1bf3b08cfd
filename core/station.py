"""Station files (TOML): which DUTs and instruments a bench station has, how they are wired into
bays, and where results go.

This module only reads and validates the file format (docs/station-file.md). Opening a station
(starting the embedded emulated one when the file asks for it, or no file is given) is
phonebench.bench.station.backend's job.
"""
from __future__ import annotations

import logging
import math
import secrets
import socket
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar, overload

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from .decoding import read_text
from .dburl import PASSWORD_HINT, password_of
from .errors import ConfigError

log = logging.getLogger(__name__)
_told_password: set[str] = set()  # station files already warned about (a run loads its file often)

_T = TypeVar("_T")
_U = TypeVar("_U")
_D = TypeVar("_D")

# clock: default host (drivers/clock.py); fixture: the fixture's controller, else an operator does its steps;
# chamber: a thermal chamber holding the bay's ambient (docs/chamber.md), optional
INSTRUMENT_ROLES = ("scope", "supply", "thermal", "stimulus", "clock", "fixture", "chamber")
ADB_TRANSPORTS = ("server", "direct")
MAX_EMULATED_BAYS = 4  # the emulated N6705C mainframe has four module slots
MAX_SEED = (1 << 63) - 1  # a run's noise seed: a TOML integer of at least 0


@dataclass
class DutConfig:
    name: str
    address: str  # "host:port" for ADB over TCP, "usb:SERIAL" for USB
    key: str | None = None  # ADB RSA private key path; None = ~/.android/adbkey
    expected_serial: str | None = None
    transport: str = "server"  # "server": the host's adb server; "direct": adb-shell, no server
    recovery_timeout_s: float | None = None  # how long a lost or rebooted phone gets to come back
    expected_soc: str | None = None  # inventory: the SoC the lab put in this position (e.g. "SM8650")
    shield_channel: str | None = None  # the thermal instrument's channel taped to the SoC's shield (e.g. "T4")


@dataclass
class InstrumentConfig:
    role: str
    family: str
    address: str  # VISA resource string or serial URL
    attached_to: str | None = None  # the DUT this instrument is wired to (default: the first)
    options: dict[str, Any] = field(default_factory=dict)
    name: str = ""  # the station's name for it ([instruments.NAME]); a legacy file's is the role
    channel: str | None = None  # the bay's channel of a multi-channel instrument ("1" for @1)
    shared: bool = False  # wired to more than one bay: used under a lock, one bay at a time


@dataclass(frozen=True)
class InstrumentRef:
    """A bay's wiring to one instrument: `supply = "n6705c@2"` is instrument n6705c, channel 2."""

    instrument: str
    channel: str | None = None

    @classmethod
    def parse(cls, text: str) -> InstrumentRef:
        name, sep, channel = text.partition("@")
        return cls(name.strip(), channel.strip() if sep else None)

    def __str__(self) -> str:
        return self.instrument if self.channel is None else f"{self.instrument}@{self.channel}"


@dataclass
class BayConfig:
    """One test position: its phone(s) and the instrument channels wired to it."""

    name: str
    duts: list[str]
    wiring: dict[str, InstrumentRef] = field(default_factory=dict)  # role -> instrument[@channel]


@dataclass
class EmulatedPhoneConfig:
    serial: str
    npu_persona: str | None = None
    sla_persona: str = "nominal"
    faults: list[str] = field(default_factory=list)
    seed: int = 0
    expected_soc: str | None = None  # what the lab's inventory says is in the bay (the DUT's expected_soc)
    build: str = ""  # the runtime build the emulated phone runs ("" the release; a planted regression)


@dataclass
class EmulatedConfig:
    phones: list[EmulatedPhoneConfig] = field(default_factory=list)  # empty = the default fleet
    instruments: bool = True
    bays: int = 0  # 0: a bay per phone, each with its own instruments; N: the shared rack of N bays
    # "any": the phones trust every host; "prompt": a new key gets the first-connection dialogue
    # (accepted); "none" skips AUTH; "listed" needs allowed_keys
    auth: str = "any"
    allowed_keys: list[str] = field(default_factory=list)
    transport: str = "server"  # how the bench reaches the phones: the adb server, as on hardware
    # Role -> emulated family (`scope = "rigol-ds1000z"`); a role not named gets its default.
    families: dict[str, str] = field(default_factory=dict)
    # A negative control: two bays whose supply and probe cables are swapped (each bay's supply and
    # thermal probes are on the other bay's phone), as a technician's slip would leave them.
    cross_wired: list[str] = field(default_factory=list)
    # With a chamber family named: the bays that get a chamber (empty: every bay), and a scenario
    # of its door opened once (seconds from the station's start, on the bay's clock; None: shut).
    chamber_bays: list[str] = field(default_factory=list)
    chamber_door_open_at_s: float | None = None
    chamber_door_open_for_s: float = 300.0
    # The night's noise (measurement noise, timing jitter, the room's cycle): None draws a fresh
    # seed when the station starts, as every real night differs; a seed replays one night.
    seed: int | None = None

    def for_night(self, seed: int | None) -> EmulatedConfig:
        """This station with a run's seed: `seed` (--seed), else the file's, else a fresh one."""
        chosen = seed if seed is not None else self.seed if self.seed is not None else fresh_seed()
        return replace(self, seed=chosen)


def fresh_seed() -> int:
    """A seed for a night nobody asked to replay (recorded with the run, so it can be)."""
    return secrets.randbelow(1 << 32)


# The families the emulated station can build per role (emulation/instruments/registry.py builds them).
EMULATED_FAMILIES = {"scope": ("keysight-infiniivision", "rigol-ds1000z"), "supply": ("keysight-n6705c", "qoitech-otii"),
                     "thermal": ("keysight-daq970a", "fluke-1529", "fluke-1521", "generic-ascii"),
                     "stimulus": ("keysight-33500b",),
                     "chamber": ("watlow-f4t",)}  # named: every bay's phone sits in a chamber of its own


def emulated_family(role: str, family: str, origin: str = "[emulated]") -> str:
    """`family` if the emulated station can build it for `role`; a ConfigError naming the valid ones otherwise."""
    if role not in EMULATED_FAMILIES:
        raise ConfigError(f"{origin}: no emulated instrument role {role!r}",
                          hint=f"roles: {', '.join(EMULATED_FAMILIES)}")
    if family not in EMULATED_FAMILIES[role]:
        raise ConfigError(f"{origin}: {family!r} is not an emulated {role} family",
                          hint=f"emulated {role} families: {', '.join(EMULATED_FAMILIES[role])}")
    return family


@dataclass
class StationConfig:
    name: str
    source: Path | None  # the station file, None for the embedded emulated station
    results_dir: Path = Path("reports")
    # Whether the file itself names results_dir: a file a tool wrote (`bench emulate
    # --write-station`) leaves it out, so the run goes where the bench runs, not where the file is.
    results_dir_given: bool = False
    sla_profile: str = "default"
    location: str = ""
    database: str | None = None  # results store URL; None = <results_dir>/results.sqlite
    payloads: Path | None = None  # folder of OTA weight payloads (the repair check re-sends pages from them)
    duts: list[DutConfig] = field(default_factory=list)
    instruments: dict[str, InstrumentConfig] = field(default_factory=dict)
    emulated: EmulatedConfig | None = None
    # Bays: a legacy file (no [[bay]]) is one bay holding every DUT and instrument. `instruments`
    # above is by role for the bay this config is narrowed to (for_bay); `inventory` by name.
    bays: list[BayConfig] = field(default_factory=list)
    inventory: dict[str, InstrumentConfig] = field(default_factory=dict)
    bay: str | None = None  # the bay this config is narrowed to (None: the whole station)
    rooms: Rooms | None = None  # [room]: the air around the bays (None: not stated)
    # The repository's DEVELOPMENT signing key (its private half is public) is trusted only on a
    # station that says so by name: `trust_development_key = true` at the top of its file.
    trust_development_key: bool = False
    # The noise seed of the emulated station this file reaches ([station] emulated_seed, written by
    # `bench emulate`): kept in the run record so the night can be replayed (bench run --seed).
    emulated_seed: int | None = None

    @property
    def trusts_development_key(self) -> bool:
        """Whether what the development key signed is trusted here: opted in, or emulated (its
        phones carry development-signed updates by design)."""
        return self.trust_development_key or self.emulated is not None

    def dut(self, name: str) -> DutConfig:
        for dut in self.duts:
            if dut.name == name:
                return dut
        raise ConfigError(f"station {self.name!r}: no DUT named {name!r}",
                          hint=f"known DUTs: {', '.join(d.name for d in self.duts) or 'none'}")

    def instrument_dut(self, role: str) -> str | None:
        inst = self.instruments.get(role)
        if inst is None:
            return None
        return inst.attached_to or (self.duts[0].name if self.duts else None)

    def bay_names(self) -> list[str]:
        if self.bays:
            return [b.name for b in self.bays]
        if self.emulated is not None and self.emulated.bays:
            return emulated_bay_names(self.emulated.bays)
        return [LEGACY_BAY]

    @property
    def multi_bay(self) -> bool:
        return len(self.bay_names()) > 1

    def for_bay(self, name: str) -> StationConfig:
        """This station as one bay sees it: its DUTs, and its instruments by role with the channel
        in the driver's options (a supply's channel is the driver's `channel=`)."""
        bay = next((b for b in self.bays if b.name == name), None)
        if bay is None:
            raise ConfigError(f"station {self.name!r}: no bay named {name!r}",
                              hint=f"bays: {', '.join(self.bay_names())}")
        instruments = {}
        for role, ref in bay.wiring.items():
            base = self.inventory[ref.instrument]
            options = dict(base.options)
            if ref.channel is not None and role == "supply":
                options["channel"] = int(ref.channel)
            instruments[role] = replace(base, role=role, options=options, channel=ref.channel,
                                        attached_to=base.attached_to or bay.duts[0])
        return replace(self, duts=[self.dut(n) for n in bay.duts], instruments=instruments, bays=[bay], bay=name)


LEGACY_BAY = "bay"  # the one bay of a station file without [[bay]] tables

# The room around a bay ([room], docs/station-file.md): its air temperature and how it moves over
# a night. The emulated station builds each bay's air from it; on hardware it states the lab's room.
ROOM_PROFILES = ("steady", "hvac", "warm-night")
ROOM_AIR_C = (-20.0, 60.0)  # air a phone can be tested in; anything else is a typo
# Keys each profile takes besides ambient_c and the door's (a key of another profile is a mistake).
ROOM_PROFILE_KEYS = {"steady": (), "hvac": ("hvac_amplitude_c", "hvac_period_s"),
                     "warm-night": ("ramp_c", "ramp_s")}
DOOR_KEYS = ("door_open_at_s", "door_open_for_s", "door_delta_c")


@dataclass(frozen=True)
class RoomConfig:
    """A bay's air: `ambient_c` moved by its `profile` (seconds counted from the station's start on
    its clock), and a door opened once for a while (`door_open_at_s` None: it stays shut)."""

    ambient_c: float = 25.0
    profile: str = "steady"
    hvac_amplitude_c: float = 0.5  # hvac: the air cycles +-amplitude around ambient_c ...
    hvac_period_s: float = 1200.0  # ... once per period (a thermostat's cycle)
    ramp_c: float = 2.0  # warm-night: the air rises by ramp_c ...
    ramp_s: float = 7200.0  # ... linearly over ramp_s, then stays there
    door_open_at_s: float | None = None
    door_open_for_s: float = 300.0
    door_delta_c: float = -2.0  # the corridor's air while the door is open, relative to the room's

    def keys(self) -> dict[str, Any]:
        """The keys a station file states for this room (its profile's parameters, the door's if open)."""
        out: dict[str, Any] = {"ambient_c": self.ambient_c, "profile": self.profile}
        out.update({key: getattr(self, key) for key in ROOM_PROFILE_KEYS[self.profile]})
        if self.door_open_at_s is not None:
            out.update({key: getattr(self, key) for key in DOOR_KEYS})
        return out


@dataclass(frozen=True)
class Rooms:
    """The station's room and the keys each bay overrides (`[room.bay.NAME]`)."""

    station: RoomConfig = RoomConfig()
    bays: dict[str, dict[str, Any]] = field(default_factory=dict)

    def for_bay(self, bay: str) -> RoomConfig:
        return replace(self.station, **self.bays.get(bay, {}))


def emulated_bay_names(count: int) -> list[str]:
    return [f"bay{i}" for i in range(1, count + 1)]


# --- parsing --------------------------------------------------------------------------------
class _Reader:
    """Typed access to one TOML table; every error names the file, the key and what was expected."""

    def __init__(self, path: str, table: dict[str, Any], where: str) -> None:
        self.path, self.table, self.where = path, table, where

    def _err(self, key: str, expected: str, got: object = None) -> ConfigError:
        got_text = "" if got is None else f", got {type(got).__name__} {got!r}"
        return ConfigError(f"{self.path}: {self.where}{key}: expected {expected}{got_text}",
                           hint="see docs/station-file.md for the station file format")

    # The value comes back as the type asked for (or the default's): `kind` is checked below.
    @overload
    def get(self, key: str, kind: type[_T], *, expected: str = "") -> _T: ...

    @overload
    def get(self, key: str, kind: type[_T], default: _D, expected: str = "") -> _T | _D: ...

    @overload
    def get(self, key: str, kind: tuple[type[_T], type[_U]], default: _D, expected: str = "") -> _T | _U | _D: ...

    def get(self, key: str, kind: type | tuple[type, ...], default: object = ..., expected: str = "") -> object:
        if key not in self.table:
            if default is ...:
                raise ConfigError(f"{self.path}: {self.where}{key}: missing (required)",
                                  hint="see docs/station-file.md for the station file format")
            return default
        value = self.table[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            raise self._err(key, expected or names, value)
        return value

    def check_unknown(self, known: set[str]) -> None:
        for key in self.table:
            if key not in known:
                raise ConfigError(f"{self.path}: {self.where}{key}: unknown key",
                                  hint=f"known keys here: {', '.join(sorted(known))}")


def load_station(path: str | Path) -> StationConfig:
    """Parse and validate a station file; raises ConfigError naming file, key and expectation."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"station file {path} does not exist",
                          hint="pass --station with an existing file, or omit it to use the emulated station")
    text = read_text(path, "station file", hint="a station file is UTF-8 TOML (docs/station-file.md)")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}", hint="check quoting and brackets on that line") from None
    except RecursionError:
        raise ConfigError(f"{path}: TOML nested too deeply to be a station file",
                          hint="see docs/station-file.md for the station file format") from None
    return parse_station(data, str(path), source=path)


def parse_station(data: dict[str, Any], origin: str = "<station>", source: Path | None = None) -> StationConfig:
    top = _Reader(origin, data, "")
    top.check_unknown({"station", "dut", "instruments", "bay", "emulated", "room", "trust_development_key"})
    st = _Reader(origin, top.get("station", dict, {}), "[station].")
    st.check_unknown({"name", "results_dir", "sla_profile", "location", "database", "payloads", "emulated_seed"})
    base = source.parent if source else Path.cwd()
    given = st.get("results_dir", str, None)
    results = Path(given) if given is not None else Path.cwd() / "reports"
    config = StationConfig(
        name=st.get("name", str, socket.gethostname()),
        source=source,
        results_dir=results if results.is_absolute() else (base / results),
        results_dir_given=given is not None,
        sla_profile=st.get("sla_profile", str, "default"),
        location=st.get("location", str, ""),
        database=_database_url(st.get("database", str, None), base),
        payloads=_relative_to(st.get("payloads", str, None), base),
        trust_development_key=top.get("trust_development_key", bool, False),
        emulated_seed=_seed(st, "emulated_seed"),
    )
    if password_of(config.database) and origin not in _told_password:  # still used, never copied on
        _told_password.add(origin)
        log.warning("%s: [station] database carries a password, which everyone who can read the file has; %s",
                    origin, PASSWORD_HINT)
    for index, table in enumerate(top.get("dut", list, [], expected="an array of [[dut]] tables")):
        if not isinstance(table, dict):
            raise ConfigError(f"{origin}: dut[{index}]: expected a [[dut]] table")
        config.duts.append(_parse_dut(_Reader(origin, table, f"[[dut]] #{index + 1}."), base))
    names = [d.name for d in config.duts]
    if len(set(names)) != len(names):
        raise ConfigError(f"{origin}: [[dut]]: duplicate DUT names {sorted(n for n in set(names) if names.count(n) > 1)}",
                          hint="give every DUT a unique name")
    for name, table in top.get("instruments", dict, {}).items():
        if not isinstance(table, dict):
            raise ConfigError(f"{origin}: [instruments.{name}]: expected a table")
        config.inventory[name] = _parse_instrument(_Reader(origin, table, f"[instruments.{name}]."), name, names)
    bay_tables = top.get("bay", list, [], expected="an array of [[bay]] tables")
    if bay_tables:
        config.bays = _parse_bays(origin, bay_tables, config)
    else:
        _legacy_bay(origin, config)
    if "emulated" in data:
        config.emulated = _parse_emulated(_Reader(origin, top.get("emulated", dict), "[emulated]."))
    elif not config.duts:
        raise ConfigError(f"{origin}: no [[dut]] and no [emulated] table",
                          hint="add a [[dut]] with adb = \"host:port\", or an [emulated] table")
    if "room" in data:
        config.rooms = _parse_rooms(_Reader(origin, top.get("room", dict), "[room]."), _room_bays(config))
    if bay_tables and len(config.bays) == 1:  # a station of one bay is that bay's view
        return config.for_bay(config.bays[0].name)
    return config


def _relative_to(path: str | None, base: Path) -> Path | None:
    if path is None:
        return None
    p = Path(path).expanduser()
    return p if p.is_absolute() else base / p


def _database_url(url: str | None, base: Path) -> str | None:
    """A relative SQLite path is relative to the station file, like results_dir."""
    prefix = "sqlite:///"
    if url and url.startswith(prefix) and not url[len(prefix):].startswith("/"):
        return prefix + str(base / url[len(prefix):])
    return url


def _parse_dut(r: _Reader, base: Path) -> DutConfig:
    r.check_unknown({"name", "adb", "usb", "key", "expected_serial", "transport", "recovery_timeout_s",
                     "expected_soc", "shield_channel"})
    name = r.get("name", str)
    adb, usb = r.get("adb", str, None), r.get("usb", str, None)
    if (adb is None) == (usb is None):
        raise ConfigError(f"{r.path}: {r.where}: give exactly one of adb = \"host:port\" or usb = \"SERIAL\"")
    if adb is not None:
        host, _, port = adb.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise r._err("adb", 'a "host:port" address such as "192.168.1.20:5555"', adb)
        address = adb
    else:
        address = f"usb:{usb}"
    key = r.get("key", str, None)
    if key is not None:
        key_path = Path(key).expanduser()
        key = str(key_path if key_path.is_absolute() else base / key_path)
    transport = r.get("transport", str, "server")
    if transport not in ADB_TRANSPORTS:
        raise r._err("transport", '"server" (the host\'s adb server, the default) or "direct" (no server)', transport)
    recovery = r.get("recovery_timeout_s", (int, float), None)
    if recovery is not None and not recovery > 0:
        raise r._err("recovery_timeout_s", "seconds > 0", recovery)
    return DutConfig(name=name, address=address, key=key, expected_serial=r.get("expected_serial", str, None),
                     transport=transport, recovery_timeout_s=None if recovery is None else float(recovery),
                     expected_soc=r.get("expected_soc", str, None), shield_channel=r.get("shield_channel", str, None))


def _parse_instrument(r: _Reader, name: str, dut_names: list[str]) -> InstrumentConfig:
    r.check_unknown({"role", "family", "address", "attached_to", "options", "shared"})
    # [instruments.supply] names its role; any other name says it: role = "supply"
    if "role" not in r.table and name not in INSTRUMENT_ROLES:
        raise ConfigError(f"{r.path}: [instruments.{name}]: unknown instrument role",
                          hint=f"roles: {', '.join(INSTRUMENT_ROLES)}; a named instrument says its role: "
                               'role = "supply"')
    role = r.get("role", str, name)
    if role not in INSTRUMENT_ROLES:
        raise r._err("role", f"one of {', '.join(INSTRUMENT_ROLES)}", role)
    attached = r.get("attached_to", str, None)
    if attached is not None and dut_names and attached not in dut_names:
        raise r._err("attached_to", f"one of the DUT names {dut_names}", attached)
    return InstrumentConfig(role=role, family=r.get("family", str), address=r.get("address", str),
                            attached_to=attached, options=r.get("options", dict, {}), name=name,
                            shared=r.get("shared", bool, False))  # also used by bays of other stations


def _legacy_bay(origin: str, config: StationConfig) -> None:
    """No [[bay]]: one bay with every DUT; each role names at most one instrument."""
    for name, inst in config.inventory.items():
        if inst.role in config.instruments:
            raise ConfigError(f"{origin}: [instruments.{name}]: a second {inst.role} without [[bay]] tables",
                              hint="several instruments of one role need [[bay]] tables saying which bay "
                                   "each is wired to (docs/station-file.md)")
        config.instruments[inst.role] = inst
    if config.duts:
        config.bays = [BayConfig(LEGACY_BAY, [d.name for d in config.duts],
                                 {role: InstrumentRef(inst.name) for role, inst in config.instruments.items()})]


def _parse_bays(origin: str, tables: list[Any], config: StationConfig) -> list[BayConfig]:
    dut_names = [d.name for d in config.duts]
    bays: list[BayConfig] = []
    users: dict[str, list[tuple[str, InstrumentRef]]] = {}  # instrument -> (bay, ref) wired to it
    for index, table in enumerate(tables):
        if not isinstance(table, dict):
            raise ConfigError(f"{origin}: bay[{index}]: expected a [[bay]] table")
        r = _Reader(origin, table, f"[[bay]] #{index + 1}.")
        r.check_unknown({"name", "dut", *INSTRUMENT_ROLES})
        name = r.get("name", str)
        dut = r.get("dut", str, name)
        if dut not in dut_names:
            raise r._err("dut", f"one of the DUT names {dut_names}", dut)
        if any(dut in b.duts for b in bays):
            raise r._err("dut", "a DUT no other bay holds (a phone sits in one bay)", dut)
        wiring = {}
        for role in INSTRUMENT_ROLES:
            text = r.get(role, str, None, expected='"instrument" or "instrument@channel"')
            if text is None:
                continue
            ref = InstrumentRef.parse(text)
            inst = config.inventory.get(ref.instrument)
            if inst is None:
                raise r._err(role, f"an instrument of [instruments.*] ({', '.join(config.inventory) or 'none'})", text)
            if inst.role != role:
                raise r._err(role, f"a {role}; {ref.instrument} is a {inst.role}", text)
            if role == "supply" and ref.channel is not None and not (ref.channel.isdigit() and 1 <= int(ref.channel) <= 4):
                raise r._err(role, 'a supply channel @1 to @4 (the mainframe\'s slot)', text)
            wiring[role] = ref
            users.setdefault(ref.instrument, []).append((name, ref))
        bays.append(BayConfig(name, [dut], wiring))
    names = [b.name for b in bays]
    if len(set(names)) != len(names):
        raise ConfigError(f"{origin}: [[bay]]: duplicate bay names {sorted(n for n in set(names) if names.count(n) > 1)}",
                          hint="give every bay a unique name")
    for instrument, wired in users.items():
        taken = [str(ref) for _, ref in wired]
        if len(set(taken)) != len(taken) and any(ref.channel is not None for _, ref in wired):
            raise ConfigError(f"{origin}: [[bay]]: channel {next(t for t in taken if taken.count(t) > 1)} is "
                              f"wired to more than one bay", hint="each bay has its own channel of a shared instrument")
        if len(wired) > 1:
            config.inventory[instrument] = replace(config.inventory[instrument], shared=True)
    return bays


def _parse_emulated(r: _Reader) -> EmulatedConfig:
    r.check_unknown({"phone", "instruments", "bays", "auth", "allowed_keys", "transport", "cross_wired", "seed",
                     *CHAMBER_SCENARIO_KEYS, *EMULATED_FAMILIES})
    auth = r.get("auth", str, "any")
    if auth not in ("any", "prompt", "none", "listed"):
        raise r._err("auth", '"any", "prompt", "none" or "listed"', auth)
    bays = r.get("bays", int, 0)
    if not 0 <= bays <= MAX_EMULATED_BAYS:
        raise r._err("bays", f"0 (a bay per phone) to {MAX_EMULATED_BAYS} (the shared rack)", bays)
    transport = r.get("transport", str, "server")
    if transport not in ADB_TRANSPORTS:
        raise r._err("transport", '"server" (the host\'s adb server, the default) or "direct" (no server)', transport)
    families = {role: emulated_family(role, r.get(role, str), f"{r.path}: {r.where}{role}")
                for role in EMULATED_FAMILIES if role in r.table}
    if bays and families.get("supply", "keysight-n6705c") != "keysight-n6705c":
        raise ConfigError(f"{r.path}: [emulated]: bays = {bays} is the shared rack, one N6705C mainframe with a module "
                          f"per bay; it cannot be built with supply = {families['supply']!r}",
                          hint="leave bays out (a bay per phone, each with its own supply) or the supply family out")
    cross_wired = _strings(r, "cross_wired")
    if cross_wired and (len(cross_wired) != 2 or len(set(cross_wired)) != 2):
        raise r._err("cross_wired", 'two different bay names, e.g. ["bay1", "bay2"]', cross_wired)
    config = EmulatedConfig(instruments=r.get("instruments", bool, True), auth=auth, bays=bays,
                            allowed_keys=_strings(r, "allowed_keys"), transport=transport, families=families,
                            cross_wired=cross_wired, seed=_seed(r, "seed"), **_chamber_scenario(r, "chamber" in families))
    for index, table in enumerate(r.get("phone", list, [], expected="an array of [[emulated.phone]] tables")):
        if not isinstance(table, dict):
            raise ConfigError(f"{r.path}: emulated.phone[{index}]: expected a [[emulated.phone]] table",
                              hint="see docs/station-file.md for the station file format")
        p = _Reader(r.path, table, f"[[emulated.phone]] #{index + 1}.")
        p.check_unknown({"serial", "npu_persona", "sla_persona", "faults", "seed", "expected_soc", "build"})
        config.phones.append(EmulatedPhoneConfig(
            serial=p.get("serial", str), npu_persona=p.get("npu_persona", str, None),
            sla_persona=p.get("sla_persona", str, "nominal"), faults=_strings(p, "faults"),
            seed=p.get("seed", int, index), expected_soc=p.get("expected_soc", str, None),
            build=p.get("build", str, "")))
    return config


CHAMBER_SCENARIO_KEYS = ("chamber_bays", "chamber_door_open_at_s", "chamber_door_open_for_s")


def _chamber_scenario(r: _Reader, chamber: bool) -> dict[str, Any]:
    """[emulated]'s chamber_bays and chamber door keys (only with a chamber family named)."""
    given = [key for key in CHAMBER_SCENARIO_KEYS if key in r.table]
    if given and not chamber:
        raise ConfigError(f"{r.path}: {r.where}{given[0]}: the emulated station has no chamber",
                          hint='name one: chamber = "watlow-f4t" (docs/station-file.md, "The emulated station")')
    out: dict[str, Any] = {"chamber_bays": _strings(r, "chamber_bays")}
    at = r.get("chamber_door_open_at_s", (int, float), None, expected="seconds >= 0 from the station's start")
    if at is not None and not 0 <= at < math.inf:
        raise r._err("chamber_door_open_at_s", "seconds >= 0 from the station's start", at)
    duration = r.get("chamber_door_open_for_s", (int, float), 300.0, expected="seconds > 0")
    if not 0 < duration < math.inf:
        raise r._err("chamber_door_open_for_s", "seconds > 0", duration)
    if "chamber_door_open_for_s" in r.table and at is None:
        raise ConfigError(f"{r.path}: {r.where}chamber_door_open_for_s: the door never opens",
                          hint="say when with chamber_door_open_at_s")
    out.update(chamber_door_open_at_s=None if at is None else float(at), chamber_door_open_for_s=float(duration))
    return out


def _room_bays(config: StationConfig) -> list[str]:
    """The bays a [room.bay.NAME] may name: the file's [[bay]] tables, else the emulated station's."""
    if config.emulated is not None and not any(b.name != LEGACY_BAY for b in config.bays):
        return emulated_bay_names(config.emulated.bays or len(config.emulated.phones) or MAX_EMULATED_BAYS)
    return config.bay_names()


def _parse_rooms(r: _Reader, bays: list[str]) -> Rooms:
    """[room] and its [room.bay.NAME] overrides, each bay's room checked whole."""
    overrides = r.get("bay", dict, {}, expected="[room.bay.NAME] tables")
    station = _parse_room(_Reader(r.path, {k: v for k, v in r.table.items() if k != "bay"}, r.where), RoomConfig())
    out: dict[str, dict[str, Any]] = {}
    for name, table in overrides.items():
        if name not in bays:
            raise ConfigError(f"{r.path}: [room.bay.{name}]: no bay named {name!r}",
                              hint=f"bays of this station: {', '.join(bays)}")
        if not isinstance(table, dict):
            raise ConfigError(f"{r.path}: [room.bay.{name}]: expected a table",
                              hint="see docs/station-file.md, \"The room\"")
        where = f"[room.bay.{name}]."
        room = _parse_room(_Reader(r.path, table, where), station)
        out[name] = {key: getattr(room, key) for key in table}
    return Rooms(station, out)


def _parse_room(r: _Reader, base: RoomConfig) -> RoomConfig:
    r.check_unknown({"ambient_c", "profile", *DOOR_KEYS, *(k for keys in ROOM_PROFILE_KEYS.values() for k in keys)})
    profile = r.get("profile", str, base.profile)
    if profile not in ROOM_PROFILES:
        raise r._err("profile", " or ".join(f'"{p}"' for p in ROOM_PROFILES), profile)
    others = [k for k in r.table if k not in ROOM_PROFILE_KEYS[profile] and k not in ("ambient_c", "profile", *DOOR_KEYS)]
    if others:
        raise ConfigError(f"{r.path}: {r.where}{others[0]}: not a parameter of profile {profile!r}",
                          hint=f"profile {profile!r} takes {', '.join(ROOM_PROFILE_KEYS[profile]) or 'no parameters'} "
                               "(docs/station-file.md, \"The room\")")
    values: dict[str, Any] = {"profile": profile}
    for key in ("ambient_c", *ROOM_PROFILE_KEYS[profile], *DOOR_KEYS):
        value = r.get(key, (int, float), None, expected="a number")
        if value is not None:
            values[key] = float(value)
    room = replace(base, **values)
    low, high = ROOM_AIR_C
    if not low <= room.ambient_c <= high:
        raise r._err("ambient_c", f"degC of air a phone is tested in ({low:g} to {high:g})", room.ambient_c)
    for key in ("hvac_period_s", "ramp_s", "door_open_for_s"):
        if key in values and not values[key] > 0:
            raise r._err(key, "seconds > 0", values[key])
    for key in ("hvac_amplitude_c", "ramp_c", "door_delta_c"):
        if key in values and not abs(values[key]) <= high - low:
            raise r._err(key, "a temperature change in degC", values[key])
    if room.door_open_at_s is not None and room.door_open_at_s < 0:
        raise r._err("door_open_at_s", "seconds >= 0 from the station's start", room.door_open_at_s)
    if room.hvac_amplitude_c < 0:
        raise r._err("hvac_amplitude_c", "degC >= 0 (the half swing)", room.hvac_amplitude_c)
    return room


def _seed(r: _Reader, key: str) -> int | None:
    seed = r.get(key, int, None)
    if seed is not None and not 0 <= seed <= MAX_SEED:
        raise r._err(key, f"a seed from 0 to {MAX_SEED}", seed)
    return seed


def _strings(r: _Reader, key: str) -> list[str]:
    values = r.get(key, list, [], expected="an array of strings")
    if not all(isinstance(v, str) for v in values):
        raise r._err(key, "an array of strings", values)
    return list(values)
