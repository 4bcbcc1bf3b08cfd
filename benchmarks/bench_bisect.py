"""`bench ab` and `bench bisect` over planted catalogues: steps, lab minutes and correctness of the
search, and each A/B gate's detectable change and false-alarm rate, printed from one run.

1. The emulated fleet, measured (real installs of catalogue builds, real segments through
   bench/ab/measure.py): an A/B of a build against the next one, which slows NPU work 6 % on the
   Dimensity 9300 only. The other models' blocks are an A/A (identical behaviour, two builds): the
   spread of one block's log-ratio per gate and unit; the Dimensity 9300's change per gate is what
   a 6 % slower NPU does to each gate; plus each workload part's and each install's lab seconds.
2. Those figures drive planted catalogues of 32 builds on a simulated fleet of the same shape
   (bench/ab/simulated.py), through the same runner, rule and search as `bench bisect`: one culprit
   at every position (each seeded several times), no change, two partial culprits, a noisy unit,
   builds that do not install, a culprit exactly at the threshold.
3. Each gate's false-alarm rate and the change it detects with 95 % power, in `bench ab`'s default
   plan (4 gates x 3 models share alpha; dialog_length, asked for, in a plan of 5 x 3), by
   Monte-Carlo through the rule; the family's false alarms on identical builds through the runner;
   `bench ab` on builds 3 % apart in first token and energy per dialog (at a fixed dialog length,
   bench/ab/dialogs.py: the simulated dialogs' windows scatter at dialog_length's measured spread).

Usage: python benchmarks/bench_bisect.py [--blocks 6] [--reps 3] [--noise FILE] [--save-noise FILE] [--skip-planted]
(--noise reuses a saved step 1 instead of measuring it: say so when quoting the figures).
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DIMENSITY_9300 = "PB-Emu Dimensity 9300"
# bench ab's and bench bisect's default gates (bench/ab/gates.DEFAULT_METRICS), and dialog_length
# (only when asked for) measured beside them: its spread drives the simulated dialogs' windows.
BISECT = ("first_token", "token_median", "sustained_power", "energy_per_dialog")
GATES = (*BISECT, "dialog_length")
N = 32
BUDGET = math.log2(N) + 2


# --------------------------------------------------------------------------- 1. the emulated fleet

def measure_fleet(blocks: int, seed: int) -> dict[str, Any]:
    from phonebench.bench.ab.measure import open_bench
    from phonebench.bench.ab.install import CatalogueInstaller
    from phonebench.bench.ab.run import run_ab
    from phonebench.bench.ab.sequential import AbPlan
    from phonebench.bench.ab.session import station_config
    from phonebench.bench.catalogue.catalogue import load_catalogue
    from phonebench.bench.station.backend import open_station
    from phonebench.emulation.catalogue_factory import write_catalogue

    with tempfile.TemporaryDirectory(prefix="bench-bisect-") as tmp:
        catalogue = load_catalogue(write_catalogue(Path(tmp) / "cat", n_builds=2,
                                                   culprits={1: {"npu_time": 1.06, "models": ["MT6989"]}}))
        a, b = (x.id for x in catalogue.builds)
        config, _ = station_config(None, seed)
        wall = time.perf_counter()
        with open_station(config) as station, \
                open_bench(station, None, GATES, CatalogueInstaller(catalogue, Path(tmp) / "res")) as bench:
            unit = bench.units()[0].name
            parts = {}
            for metric, part in (("first_token", "inferences"), ("sustained_power", "generate"),
                                 ("energy_per_dialog", "dialogs")):
                t0 = bench.now(unit)
                bench.segment(unit, [metric])
                parts[part] = bench.now(unit) - t0
            result = run_ab(bench, a, b, metrics=GATES, plan=AbPlan((blocks,), family=15), seed=seed,
                            on_look=lambda r, k: print(f"  fleet block {k}: {r.lab_minutes:.1f} lab min, "
                                                       f"{time.perf_counter() - wall:.0f} s wall", flush=True))
    units = {u.name: u.model for u in result.units}
    spread: dict[str, dict[str, float]] = {}
    for (model, metric), by_unit in result.blocks().items():
        if model != DIMENSITY_9300:
            spread.setdefault(metric, {}).update({u: float(np.std(d, ddof=1)) for u, d in by_unit.items()})
    for model, by_unit in result.raw_blocks("dialog_energy_j").items():  # the statistic before the adjustment
        if model != DIMENSITY_9300:
            spread.setdefault("raw energy per dialog", {}).update({u: float(np.std(d, ddof=1)) for u, d in by_unit.items()})
    installs = [s.install.station_s for s in result.segments if s.install is not None]
    return {"seed": seed, "blocks": blocks, "units": units, "parts_s": parts,
            "install_s": float(np.mean(installs)), "spread": spread,
            "effect_6pct_npu": {g.metric: g.change for g in result.gates if g.model == DIMENSITY_9300},
            "reference_dialog_s": dict(result.reference_s),
            "gates": [g.to_dict() for g in result.gates], "lab_minutes": result.lab_minutes,
            "segment_s": float(np.mean([s.end_s - s.start_s - (s.install.station_s if s.install else 0.0)
                                        for s in result.segments]))}


# --------------------------------------------------------------------------- 2. planted catalogues

class Fleet:
    """The measured fleet's shape and noise as a simulated bench factory."""

    def __init__(self, measured: dict[str, Any]) -> None:
        from phonebench.bench.ab.records import Unit
        from phonebench.bench.ab.simulated import Noise

        self.units = [Unit(u, m) for u, m in measured["units"].items()]
        self.models = list(dict.fromkeys(u.model for u in self.units))
        # one spread per gate: the A/A units' pooled (root mean square); a noisy unit is a scenario
        self.sigma = {m: math.sqrt(statistics.mean(x * x for x in v.values())) for m, v in measured["spread"].items()}
        self.noise = Noise(self.sigma, measured["parts_s"], measured["install_s"])
        self.effect = {m: 1.0 + v for m, v in measured["effect_6pct_npu"].items()}

    def bench(self, planted: list, rng: np.random.Generator, noisy: dict[str, float] | None = None):  # noqa: ANN201
        from phonebench.bench.ab.simulated import SimulatedBench

        return SimulatedBench(planted, self.units, self.noise, rng, noisy)


def search(fleet: Fleet, changes: dict[int, dict[str, dict[str, float]]], seed: int,
           unusable: dict[int, str] | None = None, noisy: dict[str, float] | None = None):  # noqa: ANN201
    from phonebench.bench.ab.bisect import bisect
    from phonebench.bench.ab.run import ab_oracle
    from phonebench.bench.ab.simulated import PlantedBuild

    planted = [PlantedBuild(f"b{i:02d}", changes.get(i, {}), (unusable or {}).get(i)) for i in range(N)]
    bench = fleet.bench(planted, np.random.default_rng(seed), noisy)
    return bisect([p.id for p in planted], ab_oracle(bench), models=fleet.models, metrics=BISECT)


def culprits(result) -> dict[str, list[str]]:  # noqa: ANN001
    return {m: [c.build for c in s.culprits] for m, s in result.models.items()}


def scenario(name: str, runs: list[tuple[Any, bool]]) -> list[str]:
    steps = [len(r.steps) for r, _ in runs]
    minutes = [r.lab_minutes for r, _ in runs]
    right = sum(ok for _, ok in runs)
    return [f"| {name} | {len(runs)} | {right}/{len(runs)} | {statistics.mean(steps):.1f} ({min(steps)}-{max(steps)}) "
            f"| {sum(s <= BUDGET for s in steps)}/{len(runs)} | {statistics.mean(minutes):.0f} ({min(minutes):.0f}-"
            f"{max(minutes):.0f}) |"]


def planted_catalogues(fleet: Fleet, reps: int, seed: int) -> list[str]:
    one = {m: v for m, v in fleet.effect.items() if m in BISECT}
    half = {m: math.sqrt(v) for m, v in one.items()}
    lines = ["| scenario (32 builds, culprit on the Dimensity 9300 unless said) | bisections | correct | A/B steps "
             f"mean (range) | within log2(32)+2 = {BUDGET:.0f} | lab minutes mean (range) |", "|---|---|---|---|---|---|"]
    runs, by_position = [], {}
    for position in range(1, N):
        for rep in range(reps):
            r = search(fleet, {position: {DIMENSITY_9300: one}}, seed + 1000 * rep + position)
            ok = culprits(r) == {m: ([f"b{position:02d}"] if m == DIMENSITY_9300 else []) for m in fleet.models}
            runs.append((r, ok))
            by_position.setdefault(position, []).append((len(r.steps), r.lab_minutes, ok))
    lines += scenario(f"one culprit (6 % slower NPU), each of positions 1-31 x {reps}", runs)
    none = [search(fleet, {}, seed + 7 + rep) for rep in range(3 * reps)]
    lines += scenario("no change in the range", [(r, not any(culprits(r).values())) for r in none])
    partial = []
    for rep in range(3 * reps):
        r = search(fleet, {9: {DIMENSITY_9300: half}, 22: {DIMENSITY_9300: half}}, seed + 31 + rep)
        partial.append((r, culprits(r)[DIMENSITY_9300] == ["b09", "b22"]))
    lines += scenario("two partial culprits (3 % each, at 9 and 22)", partial)
    sm = fleet.units[0].model
    noisy = []
    for rep in range(3 * reps):
        position = 1 + (7 * rep + 3) % (N - 1)
        r = search(fleet, {position: {sm: one}}, seed + 61 + rep, noisy={fleet.units[1].name: 4.0})
        noisy.append((r, culprits(r)[sm] == [f"b{position:02d}"]))
    lines += scenario(f"a noisy unit ({fleet.units[1].name} 4 x the spread; culprit on {sm})", noisy)
    skipped = []
    for rep in range(3 * reps):
        r = search(fleet, {20: {DIMENSITY_9300: one}}, seed + 91 + rep,
                   unusable={15: "crash-on-start", 19: "bad-signature", 24: "missing-artefact"})
        skipped.append((r, culprits(r)[DIMENSITY_9300] == ["b20"] and "b19" not in r.skipped or
                        culprits(r)[DIMENSITY_9300] == ["b20"]))
    lines += scenario("builds 15, 19, 24 do not install (culprit at 20)", skipped)
    edge = {"first_token": 1.03, "token_median": 1.03}
    at = []
    for rep in range(3 * reps):
        r = search(fleet, {13: {DIMENSITY_9300: edge}}, seed + 121 + rep)
        at.append((r, culprits(r)[DIMENSITY_9300] == ["b13"]))
    lines += scenario("a culprit exactly at the threshold (+3 % first token and token median)", at)
    lines.append("")
    lines.append("One culprit, per position (steps / lab minutes, each seed; x: wrong):")
    row = []
    for position, rows in by_position.items():
        row.append(f"{position}: " + " ".join(f"{s}/{m:.0f}{'' if ok else 'x'}" for s, m, ok in rows))
    lines += ["  " + "; ".join(row[i:i + 6]) for i in range(0, len(row), 6)]
    return lines


# --------------------------------------------------------------------------- 3. the gates

def gates_table(fleet: Fleet, measured: dict[str, Any], seed: int) -> list[str]:
    from phonebench.bench.ab.operating import detectable_change, simulate
    from phonebench.bench.ab.run import plan_for
    from phonebench.bench.ab.schedule import planned_seconds

    default, every = plan_for(BISECT, fleet.models), plan_for(GATES, fleet.models)
    rng = np.random.default_rng(seed)
    lines = [f"bench ab's default plan ({', '.join(BISECT)} on {len(fleet.models)} models): "
             f"{default.describe()}; with dialog_length asked for too: {every.family} comparisons",
             "| gate | block spread (1 unit) | false alarm at 0 %, 2000 A/Bs (stated) | power at +3 %, 1 unit | detects "
             "at 95 % power, 1 unit | 2 units pooled | mean blocks at 0 % / +3 %, 1 unit |", "|---|---|---|---|---|---|---|"]
    for gate in GATES:
        plan = default if gate in BISECT else every
        sigma = fleet.sigma[gate]
        zero = simulate(plan, change=0.0, sigma=sigma, reps=2000, rng=rng)
        three = simulate(plan, change=0.03, sigma=sigma, reps=1000, rng=rng)
        one = detectable_change(plan, sigma=sigma, reps=300, rng=rng)
        two = detectable_change(plan, sigma=[sigma, sigma], reps=300, rng=rng)
        lines.append(f"| {gate} | {100 * sigma:.2f} % | {100 * zero.false_alarm:.2f} % (<= "
                     f"{100 * plan.alpha / plan.family:.2f} %) | {100 * three.regressed:.0f} % | +{100 * one:.1f} % | "
                     f"+{100 * two:.1f} % | {zero.mean_blocks:.1f} / {three.mean_blocks:.1f} |")
    parts = measured["parts_s"]
    for name, plan, segment in (("the default gates", default, sum(parts.values())),
                                ("without energy per dialog (the old default)", default,
                                 parts["inferences"] + parts["generate"])):
        most = planned_seconds(plan.max_blocks, segment, measured["install_s"]) / 60
        lines.append(f"{name}: a segment {segment:.1f} lab s, a block {4 * segment / 60:.1f} lab min + 2 installs of "
                     f"{measured['install_s']:.1f} s; the plan's {plan.max_blocks} blocks at most: {most:.1f} lab min "
                     "per phone")
    return lines


def family_and_goal(fleet: Fleet, seed: int, reps: int) -> list[str]:
    from phonebench.bench.ab.run import plan_for, run_ab
    from phonebench.bench.ab.simulated import PlantedBuild

    plan = plan_for(BISECT, fleet.models)
    alarms, minutes = 0, []
    for rep in range(reps):
        bench = fleet.bench([PlantedBuild("A"), PlantedBuild("B")], np.random.default_rng(seed + rep))
        r = run_ab(bench, "A", "B", metrics=BISECT, plan=plan)
        alarms += any(g.call in ("regressed", "improved") for g in r.gates)
        minutes.append(r.lab_minutes)
    lines = [f"Identical builds, the {len(BISECT)} default gates on all {len(fleet.models)} models ({reps} simulated A/Bs through the runner): "
             f"any false alarm in {100 * alarms / reps:.1f} % (stated <= {100 * plan.alpha:.0f} %), "
             f"{statistics.mean(minutes):.1f} lab min per phone (mean)"]
    calls: dict[str, list[str]] = {"first_token": [], "energy_per_dialog": []}
    minutes = []
    change = {m: {"first_token": 1.03, "energy_per_dialog": 1.03} for m in fleet.models}
    for rep in range(reps):
        bench = fleet.bench([PlantedBuild("A"), PlantedBuild("B", change)], np.random.default_rng(seed + 5000 + rep))
        r = run_ab(bench, "A", "B", metrics=BISECT, plan=plan)
        for metric in calls:
            calls[metric] += [g.call for g in r.gates if g.metric == metric]
        minutes.append(r.lab_minutes)
    for metric, got in calls.items():
        lines.append(f"Builds 3 % apart in {metric}: called regressed on {100 * got.count('regressed') / len(got):.0f} % "
                     f"of model-level gates ({len(got)}), undecided {100 * got.count('undecided') / len(got):.0f} %")
    lines.append(f"  those A/Bs: {statistics.mean(minutes):.1f} lab min per phone (mean), {max(minutes):.1f} at most")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=6, help="blocks of the fleet measurement")
    parser.add_argument("--reps", type=int, default=3, help="seeds per culprit position (other scenarios: 3 x this)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--noise", help="a saved fleet measurement (JSON) instead of measuring")
    parser.add_argument("--save-noise", help="write the fleet measurement here")
    parser.add_argument("--skip-planted", action="store_true", help="leave step 2 (the planted catalogues) out")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    start = time.perf_counter()
    if args.noise:
        measured = json.loads(Path(args.noise).read_text())
        print(f"1. the emulated fleet: read from {args.noise} (not measured in this run)")
    else:
        print(f"1. the emulated fleet: {args.blocks} ABBA blocks of two catalogue builds (the second 6 % slower NPU "
              "on the Dimensity 9300), real installs")
        measured = measure_fleet(args.blocks, args.seed)
    if args.save_noise:
        Path(args.save_noise).write_text(json.dumps(measured, indent=1))
    print(f"   segment parts (lab s): {', '.join(f'{k} {v:.1f}' for k, v in measured['parts_s'].items())}; "
          f"install {measured['install_s']:.1f} s; the A/B {measured['lab_minutes']:.1f} lab min per phone")
    for metric, units in measured["spread"].items():
        print(f"   {metric}: block log-ratio spread " + ", ".join(f"{u} {100 * s:.2f} %" for u, s in units.items())
              + (f"; 6 % slower NPU on the Dimensity 9300: {100 * measured['effect_6pct_npu'][metric]:+.2f} %"
                 if metric in measured["effect_6pct_npu"] else ""))
    for g in measured["gates"]:
        print(f"   measured: {g['model']:28} {g['metric']:18} {100 * g['change']:+.2f} % {g['call']}")
    fleet = Fleet(measured)
    if not args.skip_planted:
        print("\n2. planted catalogues (simulated fleet of the same shape and noise, the same runner, rule and search)")
        print("\n".join(planted_catalogues(fleet, args.reps, args.seed)), flush=True)
    print("\n3. the gates")
    print("\n".join(gates_table(fleet, measured, args.seed)))
    print("\n".join(family_and_goal(fleet, args.seed, 200)))
    print(f"\n({time.perf_counter() - start:.0f} s wall)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
