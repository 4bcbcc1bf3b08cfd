"""NPU numerics speed: a complete fingerprint per persona, and the tiny model's tokens per second.

Prints:
  - per persona: runtime calls (target <= 20), device round trips and seconds per complete
    fingerprint on an in-process phone (no transport), verdict and measured signature;
  - the same over real ADB on loopback for the default fleet (daemon in this process);
  - golden-model tokens per second (exact accumulation) and the emulated NPU's for the slowest
    rule (16-bit saturate-each-step), raw and through its adapter;
  - the NPU matmul for the 16384-long MLP reduction, per rule.
Always exits 0; a persona over the call budget is flagged.

    .venv/bin/python benchmarks/bench_fingerprint.py [--quick]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from phonebench.bench.phone.fingerprint import fingerprint  # noqa: E402
from phonebench.bench.specs.profiles import load_library  # noqa: E402
from phonebench.core import signing  # noqa: E402
from device_double import make_device  # noqa: E402
from phonebench.emulation.npu import Accumulator, OverflowRule, matmul  # noqa: E402
from phonebench.emulation.npu_personas import PERSONAS, default_fleet  # noqa: E402
from phonebench.emulation.tinymodel import prompt_tokens, shared_model  # noqa: E402

CALL_BUDGET = 20


def _timed(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def bench_personas(library, repeat: int) -> None:
    print(f"\n== fingerprint per persona (in-process phone), median of {repeat}")
    print(f"{'persona':20} {'runtime calls':>13} {'device trips':>12} {'ms':>8}  verdict / measured")
    for name in sorted(PERSONAS):
        seconds, report = _timed(lambda: fingerprint(make_device(name), library), repeat)
        flag = "" if report.runtime_calls <= CALL_BUDGET else "  OVER BUDGET"
        print(f"{name:20} {report.runtime_calls:13d} {report.device_calls:12d} {seconds * 1e3:8.1f}  "
              f"{report.verdict} / {report.measured}{flag}")


def bench_adb(library) -> None:
    from phonebench.drivers.adb import AdbPhone
    from phonebench.emulation.adbd import AdbDaemon
    from phonebench.emulation.phones import emulated_phone

    print("\n== fingerprint over ADB on loopback (default fleet)")
    print(f"{'phone':10} {'persona':20} {'runtime calls':>13} {'device trips':>12} {'ms':>8}")
    for spec in default_fleet():
        daemon = AdbDaemon(emulated_phone(spec), auth=None)
        daemon.start()
        device = AdbPhone(daemon.address, name=spec.serial)
        try:
            device.connect()
            seconds, report = _timed(lambda: fingerprint(device, library), 3)
            print(f"{spec.serial:10} {spec.npu_persona:20} {report.runtime_calls:13d} {report.device_calls:12d} "
                  f"{seconds * 1e3:8.1f}")
        finally:
            device.close()
            daemon.stop()


def _generation(model, prompt, tokens: int, npu_matmul) -> tuple[float, float]:
    """(seconds to the first token, seconds for all tokens)."""
    stream = model.stream(prompt, tokens, seed=1, npu_matmul=npu_matmul)
    start = time.perf_counter()
    next(stream)
    prefill = time.perf_counter() - start
    for _ in stream:
        pass
    return prefill, time.perf_counter() - start


def bench_model(tokens: int, repeat: int) -> None:
    model = shared_model()
    prompt = prompt_tokens(32, 1)
    saturate = Accumulator(16, OverflowRule.SATURATE)
    cases = [("golden (exact)", None),
             ("NPU 16-bit saturate-each-step, raw", lambda x, w: matmul(x, w, saturate)),
             ("NPU 16-bit saturate-each-step, tile-k-256", lambda x, w: matmul(x, w, saturate, 256)),
             ("NPU 16-bit wrap, raw", lambda x, w: matmul(x, w, Accumulator(16, "wrap")))]
    print(f"\n== tiny model ({model.config.n_layers} layers, d={model.config.d_model}, "
          f"MLP K={model.config.d_ffn}): prompt 32 tokens, then {tokens} decoded")
    print(f"{'path (median of ' + str(repeat) + ')':45} {'tokens/s (incl. prefill)':>24} {'prefill ms':>11}")
    for label, npu_matmul in cases:
        runs = [_generation(model, prompt, tokens, npu_matmul) for _ in range(repeat)]
        prefill, total = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
        print(f"{label:45} {tokens / total:24.1f} {prefill * 1e3:11.1f}")


def bench_matmul(repeat: int) -> None:
    model = shared_model()
    down = model.layers[0]["down"].weight
    rng = np.random.default_rng(0)
    x = np.clip(rng.integers(3, 12, (1, down.shape[0])), 0, 7)
    print(f"\n== NPU matmul, 1 x {down.shape[0]} @ {down.shape[0]} x {down.shape[1]} (the MLP down projection)")
    print(f"{'accumulator':32} {'us per call':>12}")
    for label, acc in [("exact (golden)", None)] + [(f"16-bit {r.value}", Accumulator(16, r)) for r in OverflowRule]:
        seconds, _ = _timed(lambda: matmul(x, down, acc), repeat)
        print(f"{label:32} {seconds * 1e6:12.0f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    with signing.trusting(None, development=True):  # emulated phones: a development station
        library = load_library()
        bench_personas(library, 1 if args.quick else 3)
        bench_adb(library)
    bench_model(32 if args.quick else 96, 1 if args.quick else 3)
    bench_matmul(5 if args.quick else 30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
