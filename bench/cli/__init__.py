"""The `bench` command: run suites, start the emulated station, and the tools built on them."""
from __future__ import annotations

import argparse
import importlib
import logging
import sys
from typing import Any, Protocol, Sequence

from phonebench.core.errors import BenchError, UsageError
from phonebench.core.exits import USAGE
from phonebench.core.threads import one_blas_thread
from phonebench.core.version import code_version

log = logging.getLogger("bench")

class Subcommands(Protocol):
    """What register() is given: add_subparsers()'s result (argparse names no public type for it)."""

    def add_parser(self, name: str, **options: Any) -> argparse.ArgumentParser: ...


# Modules adding their own subcommands: each has register(subparsers).
SUBCOMMAND_MODULES = ["phonebench.bench.cli.run", "phonebench.bench.cli.emulate", "phonebench.bench.cli.numerics", "phonebench.bench.cli.results", "phonebench.bench.cli.store", "phonebench.bench.cli.line",
                      "phonebench.bench.cli.station", "phonebench.bench.cli.plan", "phonebench.bench.cli.compare", "phonebench.bench.lab.cli"]
SUBCOMMAND_MODULES.append("phonebench.bench.cli.install")  # runtime builds from a catalogue (docs/builds.md)
SUBCOMMAND_MODULES.append("phonebench.bench.cli.ab")  # A/B of two catalogue builds (docs/ab-and-bisect.md)
SUBCOMMAND_MODULES.append("phonebench.bench.cli.bisect")  # the build that changed a gate (docs/ab-and-bisect.md)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench", description="phonebench: HIL test bench for on-device LLM phones")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    parser.add_argument("--version", action="version", version=f"phonebench {code_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    one_blas_thread()
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=[logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)],
                        format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except UsageError as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return USAGE
    except BenchError as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr)
        return 130
