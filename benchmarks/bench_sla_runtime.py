"""What the runtime-side SLA checks cost on this host, against the emulated phone (in process).

Prints:
  emulator cost per streamed token when the tokens come from the stream cache (timing drawn only)
  model compute per token on each default-fleet NPU (the uncached path)
  single vs dual compute per token at +-50 mV ripple (redundancy really computes twice)
  the bench's hash work in a Merkle spot check (host SHA-256 per 4 KiB, hashes per check)
  wall time of each check at the default profile's sample counts, on one phone (arrivals stamped
  on the phone's world clock, in process)
  over real ADB: a generate streamed and stamped on the emulated SCPI time server vs the same
  generate read whole, as a ratio (the price of observing every token on the host)
Target: the whole runtime-side suite stays within a minute or two of wall time per phone.
Always exits 0.

    .venv/bin/python benchmarks/bench_sla_runtime.py
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from adb_shell.auth.keygen import keygen  # noqa: E402

from _timing import best_of  # noqa: E402
from phonebench.bench.checks import thermal_trip, tokens, weights  # noqa: E402
from phonebench.core.merkle import VerityGeometry  # noqa: E402
from phonebench.bench.specs.sla import load_profile  # noqa: E402
from device_double import WorldClock, make_device  # noqa: E402
from phonebench.drivers.adb import AdbPhone  # noqa: E402
from phonebench.drivers.clock import ScpiClock  # noqa: E402
from phonebench.drivers.runtime import RuntimeClient  # noqa: E402
from phonebench.emulation import npu, tinymodel  # noqa: E402
from phonebench.emulation.adb_auth import AuthPolicy  # noqa: E402
from phonebench.emulation.adbd import AdbDaemon  # noqa: E402
from phonebench.emulation.phones import emulated_phone  # noqa: E402
from phonebench.emulation.instruments.clock import ClockServer  # noqa: E402
from phonebench.emulation.npu_personas import DEFAULT_FLEET, PERSONAS, phone_spec  # noqa: E402
from phonebench.emulation.weights import WEIGHTS_BYTES  # noqa: E402


def timed(fn) -> float:  # noqa: ANN001
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> int:
    profile = load_profile("default")
    rows: list[tuple[str, str]] = []

    runtime = RuntimeClient(make_device("SM8650-MP", "BENCH-1"))
    runtime.generate(16, seed=1, prompt_tokens=16)  # fill the stream cache
    seconds = timed(lambda: [runtime.generate(16, seed=1, prompt_tokens=16) for _ in range(200)])
    rows.append(("emulator, cached token (timing only)", f"{1e6 * seconds / (200 * 16):.0f} us"))

    model = tinymodel.shared_model()
    prompt = tinymodel.prompt_tokens(16, 5)
    for name in DEFAULT_FLEET:
        acc = PERSONAS[name].accumulator
        seconds = timed(lambda: model.generate(prompt, 32, 5, npu_matmul=lambda x, w: npu.matmul(x, w, acc)))
        label = f"model compute per token, {name} ({acc.bits}-bit {acc.rule.value})"
        rows.append((label, f"{1e3 * seconds / 32:.1f} ms"))

    device = make_device("SM8650-ES", "BENCH-2")
    ripple = RuntimeClient(device)
    world = device.phone.world
    world.supply.emulator_on, world.supply.ripple_amplitude_v, world.supply.ripple_running = True, 0.05, True
    for mode in ("off", "on"):
        ripple.config_set("redundancy.mode", mode)
        seconds = timed(lambda: ripple.generate(32, seed=2, prompt_tokens=16))
        rows.append((f"+-50 mV, redundancy {mode}: per token", f"{1e3 * seconds / 32:.1f} ms"))

    per_hash = weights.hash_time_s()
    for size, label in ((WEIGHTS_BYTES, "32 MiB (emulated)"), (4 << 30, "4 GiB")):
        hashes = VerityGeometry(size // 4096).levels + 1
        rows.append((f"spot check, {label}: host hash work", f"{hashes} x {1e6 * per_hash:.1f} us = "
                                                              f"{1e3 * hashes * per_hash:.3f} ms of 100 ms"))

    phone = make_device("SM8650-MP", "BENCH-3")
    client = RuntimeClient(phone, clock=WorldClock(phone))
    checks = {
        "first token (299 inferences)": lambda: tokens.first_token_check(
            client, first_token=profile.get("first_token_p99")),
        "token std (1000 inferences)": lambda: tokens.token_std_check(
            client, token_std=profile.get("token_latency_std")),
        "contention (20 runs)": lambda: tokens.contention_check(
            phone, client, loaded_latency=profile.get("token_latency_p95_gpu_load")),
        "thermal soak (373 dialogs)": lambda: thermal_trip.thermal_trip_check(
            client, trip=profile.get("npu_trip_temperature"), kills=profile.get("npu_process_kills"),
            success=profile.get("long_dialog_success")),
        "spot checks (299 pages)": lambda: weights.spot_check_time_check(
            phone, client, spot_check_time=profile.get("merkle_spot_check_time")),
    }
    for name, run in checks.items():
        rows.append((f"check wall time, {name}", f"{timed(run):.2f} s"))

    rows.extend(_streaming_over_adb())
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    return 0


def _streaming_over_adb(runs: int = 30, tokens_per_run: int = 16) -> list[tuple[str, str]]:
    """Per-generate wall time over a real ADB socket: stamped per token on the SCPI clock vs read whole."""
    with tempfile.TemporaryDirectory() as tmp:
        keygen(f"{tmp}/adbkey")
        emulated = emulated_phone(phone_spec("SM8650-MP", "BENCH-ADB"))
        with AdbDaemon(emulated, auth=AuthPolicy(accept_any=True)) as daemon, ClockServer(emulated.world) as server, \
                AdbPhone(daemon.address, key_path=f"{tmp}/adbkey") as device:
            clock = ScpiClock(server.address)
            try:
                plain, stamped = RuntimeClient(device), RuntimeClient(device, clock=clock)
                plain.generate(tokens_per_run, seed=1, prompt_tokens=16)  # fill the stream cache
                whole = best_of(lambda: [plain.generate(tokens_per_run, seed=1, prompt_tokens=16)
                                         for _ in range(runs)], 3) / runs
                timed_s = best_of(lambda: [stamped.generate(tokens_per_run, seed=1, prompt_tokens=16)
                                           for _ in range(runs)], 3) / runs
                query = best_of(lambda: [clock.now() for _ in range(200)], 3) / 200
            finally:
                clock.close()
    return [(f"over ADB, generate of {tokens_per_run} tokens read whole", f"{1e3 * whole:.2f} ms"),
            (f"over ADB, same, streamed + stamped per line", f"{1e3 * timed_s:.2f} ms ({timed_s / whole:.1f}x)"),
            ("station clock query (SCPI :TIME:MON?)", f"{1e6 * query:.0f} us")]


if __name__ == "__main__":
    sys.exit(main())
