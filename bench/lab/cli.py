"""`bench lab`: an exporter host's side of a labgrid lab (docs/lab.md)."""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from .places import ENV_COORDINATOR, Lab
from .resources import write_exporter_config

if TYPE_CHECKING:  # the face above this floor defines it; annotations only
    from phonebench.bench.cli import Subcommands


def register(subparsers: Subcommands) -> None:
    p = subparsers.add_parser("lab", help="labgrid: exporter resources and places for a station's bays")
    sub = p.add_subparsers(dest="lab_command", metavar="LAB_COMMAND", required=True)
    export = sub.add_parser("export", help="write the labgrid-exporter resource file for a station's bays")
    export.add_argument("--station", required=True, help="station file (TOML) with [[bay]] tables")
    export.add_argument("-o", "--output", required=True, help="resource file to write (YAML)")
    export.set_defaults(func=export_cmd)
    emulate = sub.add_parser("emulate", help="an emulated multi-bay fleet in the foreground, with its resource file")
    emulate.add_argument("--bays", type=int, default=2, help="bays (1-4)")
    emulate.add_argument("-o", "--output", required=True, help="resource file to write (YAML)")
    emulate.set_defaults(func=emulate_cmd)
    places = sub.add_parser("places", help="create one place per bay of an exporter (idempotent)")
    places.add_argument("--exporter", required=True, help="the exporter's --name")
    places.add_argument("--bay", action="append", required=True, help="bay (resource group) name, repeatable")
    places.add_argument("--coordinator", default=os.environ.get(ENV_COORDINATOR), help="HOST:PORT")
    places.set_defaults(func=places_cmd)


def export_cmd(args: argparse.Namespace) -> int:
    from phonebench.core.station import load_station

    path = write_exporter_config(load_station(args.station), Path(args.output))
    print(f"wrote {path}: run `labgrid-exporter -c COORDINATOR --name HOST {path}`")
    return 0


def emulate_cmd(args: argparse.Namespace) -> int:
    from ..station.backend import open_station
    from phonebench.core.station import EmulatedConfig

    with open_station(emulated=EmulatedConfig(bays=args.bays)) as station:
        path = write_exporter_config(station, Path(args.output))
        print(f"emulated {args.bays} bays; resources in {path}\n"
              f"next (another terminal): labgrid-exporter -c $LG_COORDINATOR --name emulated {path}; then "
              f"bench lab places --exporter emulated {' '.join(f'--bay {b}' for b in station.bay_names())}; "
              f"Ctrl-C stops the fleet", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            return 0


def places_cmd(args: argparse.Namespace) -> int:
    names = Lab(args.coordinator).create_bay_places(args.exporter, args.bay)
    for name in names:
        print(f"place {name}")
    if names:
        print(f"next: bench run --place {names[0]}  (or --places '{args.exporter}-*' for all of them)")
    return 0
