"""Identify each SoC model's GPU power relation on reference units (claim 5's load level).

For every model: UNITS emulated reference units (serials REF-<model>-<i>, so each is its own unit
with its own process variation), each on its own emulated N6705C feeding it as a battery, stepped
through the load levels of bench/checks/gpu_power.STEP_LEVELS; `identify_gpu_power` fits the
line per unit and keeps the mean slope, the units' spread and the pooled residual. Prints the
TOML block the contention entry of sla_profiles/default.toml carries
(`[metrics.token_latency_p95_gpu_load.parameters.gpu_power.<model>]`), and how well each record
predicts a fresh unit's level at 75 % busy (a unit not in the fit).

A lab runs the same steps (`gpu_power.gpu_power_steps`) on its own reference units, whose busy
counters it trusts (teardown or a trusted build), and pastes the block into its profile.

Usage: python benchmarks/identify_gpu_power.py [--units N] [--models SM8650,MT6989,...]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

FLEET_MODELS = ("SM8650", "MT6989", "MT6991")


def _steps(model: str, serial: str, levels: tuple[float, ...]) -> list[tuple[float, float]]:
    from device_double import emulated_supplies, make_device

    from phonebench.bench.checks.gpu_power import gpu_power_steps
    from phonebench.bench.checks.power import battery_emulation

    with emulated_supplies() as attach:
        device = make_device(f"{model}-MP", serial)
        supply = attach(device)
        battery_emulation(supply)
        return gpu_power_steps(device, supply, levels)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, default=8, help="reference units per SoC model")
    parser.add_argument("--models", default=",".join(FLEET_MODELS), help="SoC models, comma-separated")
    args = parser.parse_args()

    from phonebench.bench.checks.gpu_power import STEP_LEVELS, identify_gpu_power

    for model in args.models.split(","):
        units = [_steps(model, f"REF-{model}-{i}", STEP_LEVELS) for i in range(1, args.units + 1)]
        relation = identify_gpu_power(units, f"{args.units} reference units x {len(STEP_LEVELS)} load steps "
                                             f"(benchmarks/identify_gpu_power.py)")
        record = relation.to_record()
        fields = ", ".join(f"{k} = {v!r}" if isinstance(v, str) else f"{k} = {v}" for k, v in record.items())
        print(f"[metrics.token_latency_p95_gpu_load.parameters.gpu_power.{model}]")
        print(fields.replace("'", '"').replace(", ", "\n").replace(" = ", " = "))
        fresh = _steps(model, f"FRESH-{model}", (0.75,))[0]
        level = relation.level(fresh[1])
        print(f"# a fresh unit at {fresh[0]:.3f} busy by its counters: {level.busy:.3f} +- {level.expanded_u:.3f} "
              f"from its draw ({fresh[1]:.3f} W); off by {level.busy - fresh[0]:+.3f}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
