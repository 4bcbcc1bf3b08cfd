"""A bay as labgrid resources and back: the exporter's resource file for a station's bays, and the
station a bench builds from the resources of the place it acquired."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from phonebench.core.errors import ConfigError
from phonebench.core.station import StationConfig

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
    """A one-bay station file from a place's acquired resources (name -> {cls, params})."""
    phones = [r["params"] for r in resources.values() if r.get("cls") == PHONE]
    if len(phones) != 1:
        raise ConfigError(f"place {place}: {len(phones)} {PHONE} resources, expected one",
                          hint=f"the place's match should select one bay group: `labgrid-client -p {place} show`")
    phone = phones[0]
    lines = ["[station]", f"name = {json.dumps(place)}", f"location = {json.dumps('labgrid place ' + place)}"]
    if database:
        lines.append(f"database = {json.dumps(database)}")
    lines += ["[[dut]]", f"name = {json.dumps(phone['name'])}"]
    lines.append(f"adb = {json.dumps(phone['adb'])}" if phone.get("adb") else f"usb = {json.dumps(phone['usb'])}")
    if phone.get("expected_serial"):
        lines.append(f"expected_serial = {json.dumps(phone['expected_serial'])}")
    wiring = []
    for name, res in sorted(resources.items()):
        if res.get("cls") != INSTRUMENT:
            continue
        p = res["params"]
        key = f"{p['name']}-{p['role']}"
        lines += [f"[instruments.{json.dumps(key)}]", f"role = {json.dumps(p['role'])}",
                  f"family = {json.dumps(p['family'])}", f"address = {json.dumps(p['address'])}"]
        if p.get("shared"):  # other places' bays use it too: lock it per use
            lines.append("shared = true")
        wiring.append(f"{p['role']} = {json.dumps(key + ('@' + p['channel'] if p.get('channel') else ''))}")
    lines += ["[[bay]]", f"name = {json.dumps(place)}", f"dut = {json.dumps(phone['name'])}", *wiring]
    return "\n".join(lines) + "\n"
