"""`bench emulate`: run the emulated station in the foreground so people and other benches can
reach it (`adb connect`, pyvisa, or `bench run --station` with the file it writes)."""
from __future__ import annotations

import argparse
import json
import threading
from pathlib import Path

from bench.backend import open_station
from bench.core.station import EMULATED_FAMILIES, EmulatedConfig, StationConfig, emulated_family, load_station


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("emulate", help="run the emulated station in the foreground and print its addresses")
    p.add_argument("--station", help="station file with an [emulated] table (default: the default fleet)")
    p.add_argument("--write-station", metavar="FILE",
                   help="write a station file pointing at the running emulators, for `bench run --station FILE`")
    p.add_argument("--seconds", type=float, default=None, help="stop after this long (default: until Ctrl-C)")
    p.add_argument("--instrument", action="append", default=[], metavar="ROLE=FAMILY",
                   help="emulate this family for a role, e.g. scope=rigol-ds1000z, thermal=fluke-1529 "
                        f"(roles: {', '.join(EMULATED_FAMILIES)}); overrides the station file's [emulated] table")
    p.set_defaults(func=emulate)


def station_toml(config: StationConfig) -> str:
    """A station file (TOML) that reaches this station's DUTs and instruments."""
    q = json.dumps  # a JSON string is a valid TOML basic string
    lines = ["# Written by `bench emulate`: valid while that process runs.", "[station]",
             f"name = {q(config.name)}", f"sla_profile = {q(config.sla_profile)}", ""]
    for dut in config.duts:
        lines += ["[[dut]]", f"name = {q(dut.name)}", f"adb = {q(dut.address)}"]
        if dut.expected_serial:
            lines.append(f"expected_serial = {q(dut.expected_serial)}")
        lines.append("")
    for role, inst in config.instruments.items():
        lines += [f"[instruments.{role}]", f"family = {q(inst.family)}", f"address = {q(inst.address)}"]
        if inst.attached_to:
            lines.append(f"attached_to = {q(inst.attached_to)}")
        lines.append("")
    return "\n".join(lines)


def emulate(args: argparse.Namespace) -> int:
    emulated = load_station(args.station).emulated if args.station else EmulatedConfig()
    if emulated is None:
        emulated = EmulatedConfig()
    for choice in args.instrument:
        role, _, family = choice.partition("=")
        emulated.families[role.strip()] = emulated_family(role.strip(), family.strip(), f"--instrument {choice}")
    with open_station(None, emulated=emulated) as config:
        print(f"emulated station {config.name!r} running (Ctrl-C to stop)")
        for dut, running in zip(config.duts, config.emulated_station.duts):
            spec = running.phone.spec
            print(f"  phone {dut.name:10} {spec.soc_manufacturer} {spec.soc_model} ({spec.npu_persona})"
                  f"   adb connect {dut.address}")
        for role, inst in config.instruments.items():
            print(f"  {role:8} {inst.family:24} {inst.address}")
        if args.write_station:
            Path(args.write_station).write_text(station_toml(config))
            print(f"station file: {args.write_station}  (bench run --station {args.write_station})")
        stop = threading.Event()
        try:
            stop.wait(args.seconds)
        except KeyboardInterrupt:
            pass
    return 0
