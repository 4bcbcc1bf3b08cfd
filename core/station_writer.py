"""Station files written by the bench: the addresses of a running station (what `bench emulate
--write-station` hands to `bench run --station`), and an `[emulated]` table for a station to be
started. The format is docs/station-file.md; `load_station` reads back what is written here.
Every station file the bench writes goes through `write_station` or `write_emulated_station`:
atomically, so a run (or a reader polling for the file) never sees half a station.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from .dburl import without_password
from .files import write_atomically
from .station import LEGACY_BAY, EmulatedConfig, Rooms, StationConfig

_q = json.dumps  # a JSON string is a valid TOML basic string
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _key(name: str) -> str:
    """A table key as a person writes it: bare when TOML allows, quoted otherwise."""
    return name if _BARE_KEY.fullmatch(name) else _q(name)


def _toml_value(value: object) -> str:
    """An inline TOML value for a driver option: strings, numbers, booleans, arrays, tables."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_q(str(k))} = {_toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return _q(str(value))


def _station_table(config: StationConfig) -> list[str]:
    # A top-level key, so before the first table: the station opts in to the development key by name.
    trust = ["trust_development_key = true"] if config.trusts_development_key else []
    lines = [*trust, "[station]", f"name = {_q(config.name)}", f"sla_profile = {_q(config.sla_profile)}"]
    if config.results_dir_given:  # else the run goes where the bench runs (docs/station-file.md)
        lines.append(f"results_dir = {_q(str(Path(config.results_dir).resolve()))}")
    if config.location:
        lines.append(f"location = {_q(config.location)}")
    if config.database:  # never the password: the process reaching the store has it in its environment
        lines.append(f"database = {_q(without_password(config.database))}")
    if config.payloads:
        lines.append(f"payloads = {_q(str(config.payloads))}")
    if config.emulated_seed is not None:  # the night the emulated station behind this file runs
        lines.append(f"emulated_seed = {config.emulated_seed}")
    return lines + [""]


def _room_tables(config: StationConfig) -> list[str]:
    """[room] and each bay's [room.bay.NAME] overrides (docs/station-file.md, "The room"); a
    station narrowed to one bay states that bay's room as the station's."""
    rooms = config.rooms
    if rooms is None:
        return []
    if config.bay is not None:
        rooms = Rooms(rooms.for_bay(config.bay))
    lines = ["[room]", *(f"{key} = {_toml_value(value)}" for key, value in rooms.station.keys().items()), ""]
    for bay, keys in rooms.bays.items():
        lines += [f"[room.bay.{_key(bay)}]", *(f"{key} = {_toml_value(value)}" for key, value in keys.items()), ""]
    return lines


def station_toml(config: StationConfig, comment: str) -> str:
    """A station file that reaches this station's DUTs and instruments, bay by bay."""
    lines = [f"# {line}" for line in comment.splitlines()] + _station_table(config)
    for dut in config.duts:
        # A USB phone is its serial (the parser names it "usb:SERIAL"); a network phone its host:port.
        where = f"usb = {_q(dut.address[4:])}" if dut.address.startswith("usb:") else f"adb = {_q(dut.address)}"
        lines += ["[[dut]]", f"name = {_q(dut.name)}", where, f"transport = {_q(dut.transport)}"]
        if dut.key:
            lines.append(f"key = {_q(dut.key)}")
        if dut.expected_serial:
            lines.append(f"expected_serial = {_q(dut.expected_serial)}")
        if dut.recovery_timeout_s is not None:
            lines.append(f"recovery_timeout_s = {dut.recovery_timeout_s:g}")
        if dut.expected_soc:
            lines.append(f"expected_soc = {_q(dut.expected_soc)}")
        if dut.shield_channel:
            lines.append(f"shield_channel = {_q(dut.shield_channel)}")
        lines.append("")
    for name, inst in config.inventory.items():
        lines += [f"[instruments.{_key(name)}]", f"role = {_q(inst.role)}", f"family = {_q(inst.family)}",
                  f"address = {_q(inst.address)}"]
        if inst.shared:
            lines.append("shared = true")
        if inst.options:  # the wiring the driver needs (a DAQ970A's channel map)
            lines.append(f"options = {_toml_value(inst.options)}")
        lines.append("")
    for bay in config.bays:
        if bay.name == LEGACY_BAY and len(config.bays) == 1:
            break  # one bay of everything: the legacy form says it without [[bay]]
        lines += ["[[bay]]", f"name = {_q(bay.name)}", f"dut = {_q(bay.duts[0])}"]
        lines += [f"{role} = {_q(str(ref))}" for role, ref in bay.wiring.items()]
        lines.append("")
    return "\n".join(lines + _room_tables(config))


def emulated_station_toml(config: StationConfig, emulated: EmulatedConfig) -> str:
    """A station file with an [emulated] table: the station `bench emulate` starts."""
    lines = ["# The emulated station to start (written by the bench for `bench emulate`)."] + _station_table(config)
    lines += ["[emulated]", f"instruments = {str(emulated.instruments).lower()}", f"bays = {emulated.bays}",
              f"auth = {_q(emulated.auth)}", f"transport = {_q(emulated.transport)}",
              f"allowed_keys = {_q(list(emulated.allowed_keys))}",
              *(f"{role} = {_q(family)}" for role, family in emulated.families.items()),
              *([f"cross_wired = {_q(list(emulated.cross_wired))}"] if emulated.cross_wired else []),
              *([f"chamber_bays = {_q(list(emulated.chamber_bays))}"] if emulated.chamber_bays else []),
              *([f"chamber_door_open_at_s = {emulated.chamber_door_open_at_s!r}",
                 f"chamber_door_open_for_s = {emulated.chamber_door_open_for_s!r}"]
                if emulated.chamber_door_open_at_s is not None else []),
              *([f"seed = {emulated.seed}"] if emulated.seed is not None else []), ""]
    for phone in emulated.phones:
        lines += ["[[emulated.phone]]", f"serial = {_q(phone.serial)}", f"seed = {phone.seed}",
                  f"sla_persona = {_q(phone.sla_persona)}", f"faults = {_q(list(phone.faults))}"]
        if phone.npu_persona:
            lines.append(f"npu_persona = {_q(phone.npu_persona)}")
        if phone.expected_soc:
            lines.append(f"expected_soc = {_q(phone.expected_soc)}")
        if phone.build:
            lines.append(f"build = {_q(phone.build)}")
        lines.append("")
    return "\n".join(lines + _room_tables(config))


def write_station(path: str | Path, config: StationConfig, comment: str) -> Path:
    """Write `station_toml(config, comment)` to `path` atomically; WriteFailed names the folder and what to do."""
    path = Path(path)
    write_atomically(path, station_toml(config, comment))
    return path


def write_emulated_station(path: str | Path, config: StationConfig, emulated: EmulatedConfig) -> Path:
    """Write `emulated_station_toml(config, emulated)` to `path` atomically."""
    path = Path(path)
    write_atomically(path, emulated_station_toml(config, emulated))
    return path
