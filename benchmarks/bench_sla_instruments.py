"""Wall time of the instrument-side SLA checks on the emulated station (claims 1, 2, 6, 7).

Each check runs in-process against one emulated phone and its emulated instruments (real
drivers, loopback sockets), as `make run` does. Figures: wall time per voice trial (claim 1
needs ~300), per sustained-power run, per dialog-energy measurement, and the thermal loop's
simulated seconds per wall second, plus each check's total at the default profile's counts.

Usage: python benchmarks/bench_sla_instruments.py [--trials N]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100, help="voice trials to time")
    args = parser.parse_args()

    from device_double import PhoneDevice

    from phonebench.bench.checks import power, thermal, voice
    from phonebench.bench.specs.sla import load_profile
    from phonebench.drivers.registry import open_instrument
    from phonebench.drivers.runtime import RuntimeClient
    from phonebench.emulation.device import PhoneSpec
    from phonebench.emulation.phones import emulated_phone
    from phonebench.emulation.instruments.awg import AwgServer
    from phonebench.emulation.instruments.power_analyzer import PowerAnalyzerServer
    from phonebench.emulation.instruments.scope import KeysightScopeServer
    from phonebench.emulation.instruments.thermal_probe import ThermalProbeServer
    from phonebench.emulation.world import World

    profile = load_profile("default")
    world = World(seed=1)
    device = PhoneDevice(emulated_phone(PhoneSpec(), world=world))
    servers = {"scope": KeysightScopeServer(world), "stimulus": AwgServer(world), "supply": PowerAnalyzerServer(world),
               "thermal": ThermalProbeServer(world)}
    drivers = {}
    for role, server in servers.items():
        server.start()
        drivers[role] = open_instrument(role, server.family, server.address,
                                        **({"poll_s": 0} if role == "scope" else {}))
    rows: list[tuple[str, str, str]] = []
    try:
        start = time.perf_counter()
        voice.run_voice_trials(drivers["scope"], drivers["stimulus"], device, args.trials)
        per_trial = (time.perf_counter() - start) / args.trials
        needed = voice.trials_needed(*profile.pick(**voice.METRICS).values())
        rows.append(("voice trial (4.6 s record at 10 kS/s, 2 ch)", f"{1e3 * per_trial:.1f} ms",
                     f"{needed} trials ~ {needed * per_trial:.1f} s"))

        power.battery_emulation(drivers["supply"])
        RuntimeClient(device).generate(200, prompt_tokens=16, seed=0)  # the tiny model's tokens, cached
        start = time.perf_counter()
        runs = power.measure_sustained_power(drivers["supply"], device, 10)
        per_run = (time.perf_counter() - start) / 11
        rows.append((f"sustained-power run (200 tokens, {runs.sample_rate_hz:.0f} S/s)", f"{1e3 * per_run:.0f} ms",
                     f"10 runs + warm-up ~ {11 * per_run:.1f} s"))

        start = time.perf_counter()
        power.dialog_energy_check(drivers["supply"], drivers["stimulus"], energy=profile.get(power.ENERGY))
        per_dialog = (time.perf_counter() - start) / 27
        rows.append(("dialog energy (5 kS/s, until idle)", f"{1e3 * per_dialog:.0f} ms",
                     f"27 dialogs ~ {27 * per_dialog:.1f} s"))

        t0, start = world.clock.now(), time.perf_counter()
        run = thermal.cover_temperature_check(drivers["thermal"], drivers["stimulus"], device,
                                              **profile.pick(**thermal.ENTRIES)).measurement
        wall = time.perf_counter() - start
        rows.append(("thermal dialog loop", f"{(world.clock.now() - t0) / wall:.0f} sim s / wall s",
                     f"{len(run.t_s)} readings, {run.t_s[-1]:.0f} sim s ~ {wall:.1f} s"))
    finally:
        for driver in drivers.values():
            driver.close()
        for server in servers.values():
            server.stop()

    width = max(len(r[0]) for r in rows)
    print(f"{'check':<{width}}  {'per unit':>22}  default profile")
    for name, unit, total in rows:
        print(f"{name:<{width}}  {unit:>22}  {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
