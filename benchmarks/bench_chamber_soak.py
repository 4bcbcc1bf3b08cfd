"""Lab time from the chamber (issue 49, item 5): may the nightly bring the board to its
sustained-use temperature with the chamber before claim 8's soak, and what would it save?

For each unit of the default emulated fleet, in process (the emulated phone in its world inside an
emulated F4T, the real driver over Modbus/TCP, the station clock the world's), from the same start
(the board warmed as the token checks leave it), two ways to the soak:

- kept on: the chamber was already stable at 25 degC before the warm-up and nothing moved, so the
  soak starts at once (the hold carried over from the previous thermal test, as in the nightly);
- held: the chamber steps to 25 degC and holds until stable (the thermal tests' rule,
  bench/checks/chamber_hold.py), then the soak (approach to the trip, the nightly's 60 dialogs);
- preconditioned: the chamber steps to PRE_C with the phone idle until the board reaches its
  sustained-use temperature (BOARD_C: what the nightly's soak started from), then back to 25 degC and
  held until stable, then the same soak;
- preconditioned, no wait: the same, but the soak starts as soon as the set point is back at 25 degC
  (what would save the most, against the rule that nothing is judged before the air is stable).

The trip's independent side is an emulated DAQ970A on the SoC's shield, as on the emulated station.

It reports per unit and way: the trip verdict (outcome, value, bracket), kills and long-dialog
success, and the lab minutes on the station clock (chamber wait + approach + dialogs). The
preconditioning is worth adopting only if every verdict is unchanged and it saves minutes.

Usage: python benchmarks/bench_chamber_soak.py [--units N] [--dialogs 60] [--pre-c 40]
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

PRE_C = 40.0  # the chamber's air while it warms the board (well inside an F4T chamber's range)
BOARD_C = 41.5  # the board at the nightly's soak start (docs/nightly.md: 41.1-42.3 degC)
PRE_MAX_S = 3600.0
WARM_DECODE_S = 1500.0  # the token checks' heat before the soak (their back-to-back inferences)


def _soak(spec, pre_c: float | None, dialogs: int, wait_after: bool = True, kept_on: bool = False) -> dict:
    from device_double import PhoneDevice, WorldClock, emulated_shield_probes

    from phonebench.bench.checks import chamber_hold, thermal_trip
    from phonebench.bench.phone.adapters import shipped_numerics
    from phonebench.bench.specs.sla import load_profile
    from phonebench.drivers.chamber import Stabilised
    from phonebench.drivers.registry import open_instrument
    from phonebench.drivers.runtime import RuntimeClient
    from phonebench.emulation.instruments.f4t import F4TServer
    from phonebench.emulation.phones import emulated_phone

    device = PhoneDevice(emulated_phone(spec))
    world = device.phone.world
    server = F4TServer(world)
    server.start()
    chamber = open_instrument("chamber", "watlow-f4t", server.address, timeout_s=5.0)
    try:
        clock = WorldClock(device)
        profile = load_profile("nightly")
        trip = profile.get("npu_trip_temperature")
        earlier = chamber_hold.hold_for(chamber, trip, clock=clock, pause=world.wait) if kept_on else None
        world.work("decode", WARM_DECODE_S)  # the same start for every way
        world.wait(30.0)
        if earlier is not None:
            earlier.watch()  # the previous thermal test's last look
        board_start = world.temperatures()["board"]
        start = clock.now()
        if pre_c is not None:
            chamber.set_ramp(None)
            chamber.set_point(pre_c)
            while world.temperatures()["board"] < BOARD_C and clock.now() - start < PRE_MAX_S:
                world.wait(10.0)
        board_at_hold = world.temperatures()["board"]
        if wait_after:
            held = chamber_hold.hold_for(chamber, trip, clock=clock, pause=world.wait, previous=earlier)
        else:  # the set point back at 25 degC, no wait: the hold's record as if it were stable
            chamber.set_point(chamber_hold.set_point_for(trip))
            held = chamber_hold.AmbientHold(chamber, chamber_hold.set_point_for(trip),
                                            Stabilised(chamber.air_temperature(), 25.0, 0.5, 0.0, 0.0), clock)
        waited = clock.now() - start
        board = world.temperatures()["board"]
        success = dataclasses.replace(profile.get("long_dialog_success"))
        soak_start = clock.now()
        runtime = RuntimeClient(device, clock=clock)
        shipped_numerics(runtime)  # the profile's adapter: an honest unit streams the reference's tokens
        with emulated_shield_probes() as attach:
            result = thermal_trip.thermal_trip_check(runtime, trip=trip,
                                                     kills=profile.get("npu_process_kills"), success=success,
                                                     shield=attach(device), dialogs=dialogs, cool_down=False,
                                                     watch=held.watch)
        verdicts = {v.name: v for v in held.attach(result).verdicts}
        return {"wait_s": waited, "soak_s": clock.now() - soak_start, "board_c": board,
                "board_at_hold_c": board_at_hold, "board_start_c": board_start,
                "air_max_c": max(held.air_c, default=float("nan")),
                "trip": verdicts["npu_trip_temperature"], "kills": verdicts["npu_trip_process_kills"],
                "success": verdicts["npu_trip_long_dialog_success"]}
    finally:
        chamber.close()
        server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, default=4)
    parser.add_argument("--dialogs", type=int, default=60)
    parser.add_argument("--pre-c", type=float, default=PRE_C)
    args = parser.parse_args()
    os.environ.setdefault("PHONEBENCH_LOCK_DIR", tempfile.mkdtemp(prefix="phonebench-locks-"))

    from phonebench.core import signing
    from phonebench.emulation.npu_personas import default_fleet

    same = True
    print(f"{'unit':8} {'way':15} {'board':>6} {'board@soak':>10} {'wait':>6} {'soak':>6} {'total':>6} {'air max':>7}  "
          "trip (outcome, value, bracket)           kills  success   (degC, lab min)")
    with signing.trusting(None, development=True):
        for spec in default_fleet()[:args.units]:
            rows = {way: _soak(spec, pre, args.dialogs, wait, kept) for way, pre, wait, kept in
                    (("kept on", None, True, True), ("held", None, True, False),
                     ("preconditioned", args.pre_c, True, False), ("pre, no wait", args.pre_c, False, False))}
            for way, r in rows.items():
                trip = r["trip"]
                bracket = trip.extra.get("bracket_c") or [float("nan")] * 2
                print(f"{spec.serial:8} {way:15} {r['board_start_c']:6.1f} {r['board_c']:10.1f} {r['wait_s'] / 60:6.1f} "
                      f"{r['soak_s'] / 60:6.1f} {(r['wait_s'] + r['soak_s']) / 60:6.1f} {r['air_max_c']:7.1f}  "
                      f"{trip.outcome.value:12} {trip.value or float('nan'):6.2f} [{bracket[0]:.2f}, {bracket[1]:.2f}]  "
                      f"{r['kills'].outcome.value:5}  {r['success'].outcome.value}")
            base = tuple(rows["held"][k].outcome for k in ("trip", "kills", "success"))
            for way in ("kept on", "preconditioned", "pre, no wait"):
                unchanged = tuple(rows[way][k].outcome for k in ("trip", "kills", "success")) == base
                same = same and unchanged
                saved = rows["held"]["wait_s"] + rows["held"]["soak_s"] - rows[way]["wait_s"] - rows[way]["soak_s"]
                print(f"{'':8} {way}: {saved / 60:+.1f} lab min saved, verdicts {'unchanged' if unchanged else 'CHANGED'}")
    print("verdicts unchanged on every unit" if same else "VERDICTS CHANGED: do not adopt")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
