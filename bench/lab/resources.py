"""A bay as labgrid resources and back: the exporter's resource file for a station's bays, and the
station a bench builds from the resources of the place it acquired."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from phonebench.core.errors import ConfigError
from phonebench.core.station import BayConfig, DutConfig, InstrumentConfig, InstrumentRef, StationConfig
from phonebench.core.station_writer import station_toml as write_station

PHONE, INSTRUMENT = "PhonebenchPhone", "PhonebenchInstrument"


def exporter_groups(station: StationConfig) -> dict[str, dict[str, Any]]:
    """labgrid exporter resources: one group per bay with its phone and its instrument channels."""
    groups: dict[str, dict[str, Any]] = {}
    for bay in station.bays:
        view = station.for_bay(bay.name)
        group: dict[str, Any] = {}
        for dut in view.duts:
            kind, _, where = dut.address.partition(":") if dut.address.startswith("usb:") else ("adb", "", dut.address)
            group["phone"] = {"cls": PHONE, "name": dut.name, kind: where, "expected_serial": dut.expected_serial or ""}
        for role, inst in view.instruments.items():
            group[role] = {"cls": INSTRUMENT, "role": role, "name": inst.name, "family": inst.family,
                           "address": inst.address, "channel": inst.channel or "", "shared": inst.shared}
        groups[bay.name] = group
    return groups


def write_exporter_config(station: StationConfig, path: Path) -> Path:
    """The exporter's resource file (JSON, which is YAML) for every bay of `station`."""
    path.write_text(json.dumps(exporter_groups(station), indent=1) + "\n")
    return path


def station_toml(place: str, resources: dict[str, dict[str, Any]], database: str | None = None) -> str:
    """A one-bay station file from a place's acquired resources (name -> {cls, params}), written by
    the bench's one station writer (core/station_writer.py)."""
    phones = [r["params"] for r in resources.values() if r.get("cls") == PHONE]
    if len(phones) != 1:
        raise ConfigError(f"place {place}: {len(phones)} {PHONE} resources, expected one",
                          hint=f"the place's match should select one bay group: `labgrid-client -p {place} show`")
    phone = phones[0]
    dut = DutConfig(name=phone["name"], address=phone["adb"] if phone.get("adb") else f"usb:{phone['usb']}",
                    expected_serial=phone.get("expected_serial") or None)
    inventory: dict[str, InstrumentConfig] = {}
    wiring: dict[str, InstrumentRef] = {}
    for res in (resources[name] for name in sorted(resources)):
        if res.get("cls") != INSTRUMENT:
            continue
        p = res["params"]
        key = f"{p['name']}-{p['role']}"
        # shared: other places' bays use it too, so it is locked per use
        inventory[key] = InstrumentConfig(role=p["role"], family=p["family"], address=p["address"], name=key,
                                          shared=bool(p.get("shared")))
        wiring[p["role"]] = InstrumentRef(key, p.get("channel") or None)
    config = StationConfig(name=place, source=None, location=f"labgrid place {place}", database=database,
                           duts=[dut], inventory=inventory, bays=[BayConfig(place, [dut.name], wiring)])
    return write_station(config, f"labgrid place {place}: the bay its reservation holds")
