"""`bench emulate`: run the emulated station in the foreground so people and other benches can
reach it (`adb connect`, pyvisa, or `bench run --station` with the file it writes)."""
from __future__ import annotations

import argparse
import dataclasses
import signal
import sys
import threading
from types import FrameType

from ..station.backend import running_emulated
from phonebench.core.station import EMULATED_FAMILIES, EmulatedConfig, StationConfig, emulated_family, load_station
from phonebench.core.station_writer import write_station
from . import Subcommands


def register(subparsers: Subcommands) -> None:
    p = subparsers.add_parser("emulate", help="run the emulated station in the foreground and print its addresses")
    p.add_argument("--station", help="station file with an [emulated] table (default: the default fleet)")
    p.add_argument("--write-station", metavar="FILE",
                   help="write a station file pointing at the running emulators, for `bench run --station FILE`")
    p.add_argument("--seconds", type=float, default=None, help="stop after this long (default: until Ctrl-C)")
    p.add_argument("--with-parent", action="store_true",
                   help="stop when standard input closes: the process that started it is gone (`bench run` "
                        "starts its emulated station so, and a killed run leaves no station behind)")
    p.add_argument("--instrument", action="append", default=[], metavar="ROLE=FAMILY",
                   help="emulate this family for a role, e.g. scope=rigol-ds1000z, thermal=fluke-1529 "
                        f"(roles: {', '.join(EMULATED_FAMILIES)}); overrides the station file's [emulated] table")
    p.set_defaults(func=emulate)


def _stop_on_term(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # SIGTERM stops the servers the way Ctrl-C does


def _stop_when_stdin_closes() -> None:
    # The parent holds our stdin's other end; the OS closes it however the parent ends (even
    # SIGKILL), so end of input is its death notice on every platform.
    while sys.stdin.buffer.read(4096):
        pass
    # To the main thread itself: a signal sent to the process may land on this thread, which leaves
    # the main thread asleep in its wait (the handler runs only when the main thread wakes), and the
    # station outlives its run (seen once under load in test_killed_runs).
    signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGTERM)


def emulate(args: argparse.Namespace) -> int:
    base = load_station(args.station) if args.station else StationConfig(name="emulated", source=None)
    emulated = base.emulated or EmulatedConfig()
    for choice in args.instrument:
        role, _, family = choice.partition("=")
        emulated.families[role.strip()] = emulated_family(role.strip(), family.strip(), f"--instrument {choice}")
    signal.signal(signal.SIGTERM, _stop_on_term)
    if args.with_parent:
        threading.Thread(target=_stop_when_stdin_closes, name="parent-watch", daemon=True).start()
    try:
        with running_emulated(emulated, base) as (config, phones):
            print(f"emulated station {config.name!r} running (Ctrl-C to stop); the night's noise seed is "
                  f"{config.emulated_seed} (`[emulated] seed = {config.emulated_seed}` replays it)", flush=True)
            for bay, phone in zip(config.bays, phones):
                print(f"  {bay.name:6} phone {phone.serial:10} {phone.soc_manufacturer} {phone.soc_model} "
                      f"({phone.npu_persona})   adb connect {phone.address}")
                for role, ref in bay.wiring.items():
                    inst = config.inventory[ref.instrument]
                    print(f"         {role:8} {inst.family:24} {inst.address}{'  (shared)' if inst.shared else ''}")
            if args.write_station:
                comment = "Written by `bench emulate`: valid while that process runs."
                # Its phones' updates are development-signed: the file opts in to that key by name.
                write_station(args.write_station, dataclasses.replace(config, trust_development_key=True), comment)
                print(f"station file: {args.write_station}  (next: bench run --station {args.write_station})",
                      flush=True)
            threading.Event().wait(args.seconds)
    except KeyboardInterrupt:
        pass
    return 0
