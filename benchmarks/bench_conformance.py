"""Conformance of each emulated model to its programming manual: documented commands of the
modelled subsystems that the emulator implements (and how many of those it only stores and
answers back, their setting acting on nothing it models), and the manual dialogues that replay,
from the tables in tests/data/conformance (see emulation/instruments/conformance.py for the rules).

Usage: python benchmarks/bench_conformance.py [--missing]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--missing", action="store_true", help="list the commands not implemented")
    args = parser.parse_args()

    from phonebench.emulation.instruments.conformance import implemented, load_tables, replay, stored_only

    print(f"{'model':24} {'commands implemented':>22} {'share':>7} {'stored only':>12} {'dialogues':>10}")
    for table in load_tables(REPO / "tests" / "data" / "conformance"):
        done, missing = implemented(table)
        stored = stored_only(table, done)
        replayed = sum(not replay(table, d) for d in table.dialogues)
        share = len(done) / len(table.commands)
        print(f"{table.family:24} {len(done):>10} / {len(table.commands):<9} {share:>7.0%} {len(stored):>12} "
              f"{replayed:>6} / {len(table.dialogues):<4}")
        if args.missing and missing:
            print("    not implemented: " + ", ".join(missing))
    return 0


if __name__ == "__main__":
    sys.exit(main())
