"""`bench install BUILD --catalogue PATH --dut SERIAL`: install a catalogue build on a phone over
ADB (docs/builds.md). Exit codes: docs/faults.md."""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from phonebench.core.errors import DeviceError, UsageError
from phonebench.core.exits import PHONE_BUSY, PHONES_UNREACHABLE
from phonebench.drivers.clock import StationClock
from phonebench.drivers.device import Device
from ..catalogue.catalogue import CatalogueBuild, load_catalogue
from ..catalogue.install import InstallFailed, InstallRecord, install_build, read_artefact
from ..catalogue.records import write_install_record
from . import Subcommands

# A failure's exit code: the phone refused or failed the build (1); the catalogue or its artefact
# is wrong, found before the phone is touched (2); the phone could not be reached (11).
BENCH_SIDE = ("digest-mismatch", "missing-artefact")
# Which code a command over several phones ends with: the one needing attention first.
_SEVERITY = (0, 1, 2, PHONE_BUSY, PHONES_UNREACHABLE)


def register(subparsers: Subcommands) -> None:
    p = subparsers.add_parser("install", help="install a build of a build catalogue on a phone over ADB")
    p.add_argument("build", help="the build's id in the catalogue")
    p.add_argument("--catalogue", required=True, help="catalogue.toml, or the folder holding it (docs/builds.md)")
    p.add_argument("--dut", action="append", required=True, metavar="SERIAL",
                   help="the phone (a DUT name of the station; repeatable: one after the other)")
    p.add_argument("--station", help="station file (TOML); default: the embedded emulated station (gone when "
                                     "the command ends: `bench emulate --write-station FILE` keeps one running)")
    p.add_argument("--record-dir", help="where installs/<time>-<phone>-<build>.json goes (default: the station's "
                                        "results folder)")
    p.set_defaults(func=install)


def install(args: argparse.Namespace) -> int:
    from ..station.backend import open_station
    from ..station.owner import StationOwner
    from phonebench.core.station import EmulatedConfig
    from phonebench.drivers.locks import PhoneBusy

    build = load_catalogue(args.catalogue).get(args.build)
    read_artefact(build)  # missing or not the catalogue's: said before any phone is touched (exit 2)
    codes = []
    with open_station(args.station, emulated=None if args.station else EmulatedConfig(instruments=False)) as station, \
            StationOwner(station) as owner:
        known = [d.name for d in station.duts]
        unknown = [d for d in args.dut if d not in known]
        if unknown:
            raise UsageError(f"--dut {', '.join(unknown)}: not a phone of {args.station or 'the emulated station'}; "
                             f"known: {', '.join(known) or 'none'}")
        record_dir = Path(args.record_dir) if args.record_dir else station.results_dir
        for dut in args.dut:
            try:
                device = owner.phone(dut).opened()
            except PhoneBusy as exc:
                print(f"bench install: {exc}", file=sys.stderr)
                codes.append(PHONE_BUSY)
                continue
            except DeviceError as exc:
                print(f"bench install: {dut}: unreachable: {exc}", file=sys.stderr)
                codes.append(PHONES_UNREACHABLE)
                continue
            codes.append(_install_one(device, build, owner.clock(dut), record_dir))
    return max(codes, key=_SEVERITY.index)


def _install_one(device: Device, build: CatalogueBuild, clock: StationClock, record_dir: Path) -> int:
    """Install on one phone, keep the record of the attempt, print it; the phone's exit code."""
    try:
        record = install_build(device, build, station_clock=clock)
        code = 0
    except InstallFailed as exc:
        if exc.record is None:
            raise
        record = exc.record
        code = PHONES_UNREACHABLE if exc.kind == "unreachable" else 2 if exc.kind in BENCH_SIDE else 1
        print(f"bench install: {exc}", file=sys.stderr)
    path = write_install_record(record_dir, record)
    print(f"{describe(record)}\n  record: {path}")
    return code


def describe(record: InstallRecord) -> str:
    """Two lines: what the bench did and measured, then what the phone says (marked as its word)."""
    phone = "-" if math.isnan(record.phone_seconds) else f"{record.phone_seconds:.1f} s"
    said = f'the runtime reports "{record.reported_version or "?"}"'
    if record.reported_sha256:
        said += f" from artefact {record.reported_sha256[:16]}…"
    return (f"{record.device}: build {record.build_id} {record.outcome}: pushed artefact sha256 "
            f"{record.pushed_sha256[:16]}…, {record.station_seconds:.1f} s on the station clock ({phone} on the "
            f"phone's)\n  {said} (reported: the phone's word)")
