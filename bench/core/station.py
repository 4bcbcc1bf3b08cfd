"""Station files (TOML): which DUTs and instruments a bench station has, and where results go.

This module only reads and validates the file format (docs/station-file.md). Opening a station
(starting the embedded emulated one when the file asks for it, or no file is given) is
bench.backend's job.
"""
from __future__ import annotations

import logging
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from bench.core.decoding import read_text
from bench.core.errors import ConfigError

log = logging.getLogger(__name__)

INSTRUMENT_ROLES = ("scope", "supply", "thermal", "stimulus", "clock")  # clock: default host (drivers/clock.py)
ADB_TRANSPORTS = ("server", "direct")


@dataclass
class DutConfig:
    name: str
    address: str  # "host:port" for ADB over TCP, "usb:SERIAL" for USB
    key: str | None = None  # ADB RSA private key path; None = ~/.android/adbkey
    expected_serial: str | None = None
    transport: str = "server"  # "server": the host's adb server; "direct": adb-shell, no server


@dataclass
class InstrumentConfig:
    role: str
    family: str
    address: str  # VISA resource string or serial URL
    attached_to: str | None = None  # the DUT this instrument is wired to (default: the first)
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class EmulatedPhoneConfig:
    serial: str
    npu_persona: str | None = None
    sla_persona: str = "nominal"
    faults: list[str] = field(default_factory=list)
    seed: int = 0


@dataclass
class EmulatedConfig:
    phones: list[EmulatedPhoneConfig] = field(default_factory=list)  # empty = the default fleet
    instruments: bool = True
    # "any": the phones trust every host; "prompt": a new key gets the first-connection dialogue
    # (accepted); "none" skips AUTH; "listed" needs allowed_keys
    auth: str = "any"
    allowed_keys: list[str] = field(default_factory=list)


@dataclass
class StationConfig:
    name: str
    source: Path | None  # the station file, None for the embedded emulated station
    results_dir: Path = Path("reports")
    sla_profile: str = "default"
    location: str = ""
    database: str | None = None  # results store URL; None = <results_dir>/results.sqlite
    payloads: Path | None = None  # folder of OTA weight payloads (the repair check re-sends pages from them)
    duts: list[DutConfig] = field(default_factory=list)
    instruments: dict[str, InstrumentConfig] = field(default_factory=dict)
    emulated: EmulatedConfig | None = None
    # The running emulated station behind this config (tests reach its worlds through it).
    emulated_station: Any = field(default=None, repr=False, compare=False)

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


# --- parsing --------------------------------------------------------------------------------
class _Reader:
    """Typed access to one TOML table; every error names the file, the key and what was expected."""

    def __init__(self, path: str, table: dict[str, Any], where: str) -> None:
        self.path, self.table, self.where = path, table, where

    def _err(self, key: str, expected: str, got: Any = None) -> ConfigError:
        got_text = "" if got is None else f", got {type(got).__name__} {got!r}"
        return ConfigError(f"{self.path}: {self.where}{key}: expected {expected}{got_text}",
                           hint="see docs/station-file.md for the station file format")

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = ..., expected: str = "") -> Any:
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
    top.check_unknown({"station", "dut", "instruments", "emulated"})
    st = _Reader(origin, top.get("station", dict, {}), "[station].")
    st.check_unknown({"name", "results_dir", "sla_profile", "location", "database", "payloads"})
    base = source.parent if source else Path.cwd()
    results = Path(st.get("results_dir", str, "reports"))
    config = StationConfig(
        name=st.get("name", str, socket.gethostname()),
        source=source,
        results_dir=results if results.is_absolute() else (base / results),
        sla_profile=st.get("sla_profile", str, "default"),
        location=st.get("location", str, ""),
        database=_database_url(st.get("database", str, None), base),
        payloads=_relative_to(st.get("payloads", str, None), base),
    )
    for index, table in enumerate(top.get("dut", list, [], expected="an array of [[dut]] tables")):
        if not isinstance(table, dict):
            raise ConfigError(f"{origin}: dut[{index}]: expected a [[dut]] table")
        config.duts.append(_parse_dut(_Reader(origin, table, f"[[dut]] #{index + 1}."), base))
    names = [d.name for d in config.duts]
    if len(set(names)) != len(names):
        raise ConfigError(f"{origin}: [[dut]]: duplicate DUT names {sorted(n for n in set(names) if names.count(n) > 1)}",
                          hint="give every DUT a unique name")
    instruments = top.get("instruments", dict, {})
    for role, table in instruments.items():
        if role not in INSTRUMENT_ROLES:
            raise ConfigError(f"{origin}: [instruments.{role}]: unknown instrument role",
                              hint=f"roles: {', '.join(INSTRUMENT_ROLES)}")
        if not isinstance(table, dict):
            raise ConfigError(f"{origin}: [instruments.{role}]: expected a table")
        config.instruments[role] = _parse_instrument(_Reader(origin, table, f"[instruments.{role}]."), role, names)
    if "emulated" in data:
        config.emulated = _parse_emulated(_Reader(origin, top.get("emulated", dict), "[emulated]."))
    elif not config.duts:
        raise ConfigError(f"{origin}: no [[dut]] and no [emulated] table",
                          hint="add a [[dut]] with adb = \"host:port\", or an [emulated] table")
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
    r.check_unknown({"name", "adb", "usb", "key", "expected_serial", "transport"})
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
    return DutConfig(name=name, address=address, key=key, expected_serial=r.get("expected_serial", str, None),
                     transport=transport)


def _parse_instrument(r: _Reader, role: str, dut_names: list[str]) -> InstrumentConfig:
    r.check_unknown({"family", "address", "attached_to", "options"})
    attached = r.get("attached_to", str, None)
    if attached is not None and dut_names and attached not in dut_names:
        raise r._err("attached_to", f"one of the DUT names {dut_names}", attached)
    return InstrumentConfig(role=role, family=r.get("family", str), address=r.get("address", str),
                            attached_to=attached, options=r.get("options", dict, {}))


def _parse_emulated(r: _Reader) -> EmulatedConfig:
    r.check_unknown({"phone", "instruments", "auth", "allowed_keys"})
    auth = r.get("auth", str, "any")
    if auth not in ("any", "prompt", "none", "listed"):
        raise r._err("auth", '"any", "prompt", "none" or "listed"', auth)
    config = EmulatedConfig(instruments=r.get("instruments", bool, True), auth=auth,
                            allowed_keys=_strings(r, "allowed_keys"))
    for index, table in enumerate(r.get("phone", list, [], expected="an array of [[emulated.phone]] tables")):
        if not isinstance(table, dict):
            raise ConfigError(f"{r.path}: emulated.phone[{index}]: expected a [[emulated.phone]] table",
                              hint="see docs/station-file.md for the station file format")
        p = _Reader(r.path, table, f"[[emulated.phone]] #{index + 1}.")
        p.check_unknown({"serial", "npu_persona", "sla_persona", "faults", "seed"})
        config.phones.append(EmulatedPhoneConfig(
            serial=p.get("serial", str), npu_persona=p.get("npu_persona", str, None),
            sla_persona=p.get("sla_persona", str, "nominal"), faults=_strings(p, "faults"),
            seed=p.get("seed", int, index)))
    return config


def _strings(r: _Reader, key: str) -> list[str]:
    values = r.get(key, list, [], expected="an array of strings")
    if not all(isinstance(v, str) for v in values):
        raise r._err(key, "an array of strings", values)
    return list(values)
