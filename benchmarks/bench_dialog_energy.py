"""Energy per dialog on the emulated fleet: how much of its scatter the dialog's length explains, and
the `energy_per_dialog` gate's block spread before and after the length adjustment, printed from one run.

1. Dialogs on one emulated phone (bench.checks.power.measure_dialog_energy, as a segment measures
   them): each dialog's energy E and window W (stimulus until idle, on the power analyzer's
   digitizer); the scatter of E, of W and of E / W, and the correlation of E and W.
2. An A/A on real installs (two catalogue builds that behave alike) through bench/ab/run.py, with the
   gates energy_per_dialog and dialog_length, all blocks run (no early stop): per unit the spread of
   one block's log-ratio of the raw mean energy per dialog (the old statistic, from each segment's
   raw record), of the length-adjusted one (the gate's) and of the mean window (dialog_length);
   the dialogs' lab seconds and the A/B's lab minutes (station clock).

Usage: python benchmarks/bench_dialog_energy.py [--dialogs 30] [--blocks 6] [--per-segment 1 2] [--seed 1]
"""
from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PAIR = ("EMU0001", "EMU0002")  # the Snapdragon 8 Gen 3 pair: one model, two phones
GATES = ("energy_per_dialog", "dialog_length")


def _cv(x: np.ndarray) -> float:
    return float(np.std(x, ddof=1) / np.mean(x))


def dialogs_on_one_phone(n: int, seed: int) -> list[str]:
    from phonebench.bench.ab.measure import SWEEP_CHUNK_S, open_bench
    from phonebench.bench.ab.session import station_config
    from phonebench.bench.checks import power
    from phonebench.bench.station.backend import open_station

    config, _ = station_config(None, seed)
    with open_station(config) as station, \
            open_bench(station, [PAIR[0]], ["energy_per_dialog"], lambda *a: None) as bench:  # no install: none asked
        bay = bench._bays[PAIR[0]]  # noqa: SLF001 - the benchmark reads the bay's own instruments
        t0 = bench.now(PAIR[0])
        got = power.measure_dialog_energy(bay.supply, bay.stimulus, n, capacity_wh=bench.capacity_wh,
                                          chunk_s=SWEEP_CHUNK_S, keep_traces=0)
        lab = bench.now(PAIR[0]) - t0
    e, w = np.asarray(got.energy_j), np.asarray(got.window_s)
    return [f"   {n} dialogs on {PAIR[0]} (seed {seed}), {lab:.0f} lab s ({lab / n:.1f} a dialog): "
            f"E {e.mean():.2f} J scatter {100 * _cv(e):.1f} %; W {w.mean():.3f} s scatter {100 * _cv(w):.1f} %; "
            f"E/W {np.mean(e / w):.3f} W scatter {100 * _cv(e / w):.2f} %; corr(E, W) {np.corrcoef(e, w)[0, 1]:.5f}; "
            f"W explains {100 * np.corrcoef(e, w)[0, 1] ** 2:.2f} % of E's variance"]


def aa_spreads(blocks: int, per_segment: int, seed: int) -> tuple[list[str], dict[str, Any]]:
    from phonebench.bench.ab.dialogs import ENERGY_J
    from phonebench.bench.ab.install import CatalogueInstaller
    from phonebench.bench.ab.measure import Workload, open_bench
    from phonebench.bench.ab.run import run_ab
    from phonebench.bench.ab.schedule import block_log_ratio
    from phonebench.bench.ab.sequential import AbPlan
    from phonebench.bench.ab.session import station_config
    from phonebench.bench.catalogue.catalogue import load_catalogue
    from phonebench.bench.station.backend import open_station
    from phonebench.emulation.catalogue_factory import write_catalogue

    with tempfile.TemporaryDirectory(prefix="bench-dialog-energy-") as tmp:
        catalogue = load_catalogue(write_catalogue(Path(tmp) / "cat", n_builds=2))
        a, b = (x.id for x in catalogue.builds)
        config, _ = station_config(None, seed)
        with open_station(config) as station, \
                open_bench(station, PAIR, GATES, CatalogueInstaller(catalogue, Path(tmp) / "res"),
                           Workload(dialogs=per_segment)) as bench:
            result = run_ab(bench, a, b, metrics=GATES, plan=AbPlan((blocks,), family=2), seed=seed)
    spreads: dict[str, dict[str, float]] = {}
    for (_, metric), by_unit in result.blocks().items():
        spreads[metric] = {u: float(np.std(d, ddof=1)) for u, d in by_unit.items()}
    spreads["raw energy per dialog"] = {u: float(np.std(_raw_blocks(result, u, ENERGY_J, block_log_ratio), ddof=1))
                                        for u in PAIR}
    dialog_s = [s.end_s - s.start_s - (s.install.station_s if s.install else 0.0) for s in result.segments]
    line = (f"   A/A, {per_segment} dialog(s) a segment, {blocks} blocks on {', '.join(PAIR)} (seed {seed}): "
            f"W_ref {', '.join(f'{u} {w:.3f} s' for u, w in result.reference_s.items())}; a segment's dialogs "
            f"{np.mean(dialog_s):.1f} lab s; {result.lab_minutes:.1f} lab min a phone")
    lines = [line] + [f"     {metric:22} block spread " + ", ".join(f"{u} {100 * s:.3f} %" for u, s in units.items())
                      + f"; rms {100 * _rms(units.values()):.3f} %" for metric, units in spreads.items()]
    lines += [f"     {g.metric:22} {100 * (g.change or 0):+.3f} % {g.call}" for g in result.gates]
    return lines, {"spreads": spreads, "segment_s": float(np.mean(dialog_s))}


def _raw_blocks(result: Any, unit: str, key: str, ratio: Any) -> list[float]:
    """One unit's block log-ratios of a raw field (the statistic before the adjustment)."""
    out = []
    for block in sorted({s.block for s in result.segments if s.unit == unit}):
        segs = [s for s in result.segments if s.unit == unit and s.block == block and key in s.raw]
        av = [s.raw[key] for s in segs if s.side == "A"]
        bv = [s.raw[key] for s in segs if s.side == "B"]
        if len(av) == 2 and len(bv) == 2:
            out.append(ratio((av[0], av[1]), (bv[0], bv[1])))
    return out


def _rms(values: Sequence[float] | Any) -> float:
    v = np.asarray(list(values), dtype=float)
    return float(np.sqrt(np.mean(v * v)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dialogs", type=int, default=30, help="dialogs of step 1")
    parser.add_argument("--blocks", type=int, default=6, help="A/A blocks of step 2")
    parser.add_argument("--per-segment", type=int, nargs="+", default=[1, 2], help="dialogs a segment, step 2")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    start = time.perf_counter()
    print("1. dialogs on one emulated phone")
    print("\n".join(dialogs_on_one_phone(args.dialogs, args.seed)))
    print("2. A/A of two builds alike, real installs, energy_per_dialog (length-adjusted) and dialog_length")
    for n in args.per_segment:
        lines, _ = aa_spreads(args.blocks, n, args.seed + n)
        print("\n".join(lines), flush=True)
    print(f"({time.perf_counter() - start:.0f} s wall)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
