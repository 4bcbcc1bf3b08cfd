"""`bench station check`: the station preflight (phonebench.bench.procedures.preflight) — every phone and instrument
reached, identified, its calibration state shown; exit 1 with a list of what to fix."""
from __future__ import annotations

import argparse

from . import Subcommands


def register(subparsers: Subcommands) -> None:
    p = subparsers.add_parser("station", help="station tools: check that every phone and instrument is ready")
    sub = p.add_subparsers(dest="station_command", metavar="ACTION", required=True)
    check = sub.add_parser("check", help="reach every phone and instrument, show identities and calibration")
    check.add_argument("--station", help="station file (TOML); default: the embedded emulated station")
    check.add_argument("--calibration-config", help="calibration settings (TOML; default $PHONEBENCH_CALIBRATION)")
    check.add_argument("--no-phones", action="store_true", help="check the instruments only")
    check.add_argument("--connect-timeout", type=float, default=5.0, metavar="S",
                       help="seconds to reach each phone (default 5)")
    check.set_defaults(func=station_check)


def station_check(args: argparse.Namespace) -> int:
    from ..procedures.calibration.settings import load_settings
    from ..procedures.preflight import preflight_file

    report = preflight_file(args.station, load_settings(args.calibration_config), phones=not args.no_phones,
                            connect_timeout_s=args.connect_timeout)
    print(report.render(args.station))
    return 0 if report.ok else 1
