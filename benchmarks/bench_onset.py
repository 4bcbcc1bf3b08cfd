"""Onset detection on two scope channels of 10 M samples each vs one numpy pass (np.abs) over them.

Target: detection within 3x of the single pass. Prints a table and exits 0.
Usage: python benchmarks/bench_onset.py [--samples N] [--repeat R]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _timing import best_of  # noqa: E402  (benchmarks/ is on sys.path when run as a script)
from bench.onset import OnsetDetector, measure_latency  # noqa: E402

FS = 1_000_000.0  # 1 MS/s: 10 M samples = 10 s of capture



def channel(rng: np.random.Generator, n: int, onset_s: float | None, clicks_every_s: float | None = None,
            click_s: float = 0.0002) -> np.ndarray:
    x = 0.01 * rng.standard_normal(n) + 0.02 * np.sin(2 * np.pi * 50 * np.arange(n) / FS)
    if clicks_every_s:
        for i in range(int(0.1 * FS), n, int(clicks_every_s * FS)):
            x[i:i + int(click_s * FS)] += 0.5  # clicks: each needs a closer look, none is an onset
    if onset_s is not None:
        i = int(onset_s * FS)
        x[i:] += 0.3 * np.sin(2 * np.pi * 800 * np.arange(n - i) / FS)
    return x


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10_000_000, help="samples per channel")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    n, rng = args.samples, np.random.default_rng(0)
    stim = channel(rng, n, 0.2 * n / FS)
    cases = {
        "latency: onsets at 20 % and 60 %": (stim, channel(rng, n, 0.6 * n / FS)),
        "latency: answer in the last 1 %": (stim, channel(rng, n, 0.99 * n / FS)),
        "no answer (full scan of ch2)": (stim, channel(rng, n, None)),
        "no answer, 0.2 ms click every 10 ms": (stim, channel(rng, n, None, clicks_every_s=0.01)),
        "no answer, 1 ms click every 10 ms": (stim, channel(rng, n, None, clicks_every_s=0.01, click_s=0.001)),
    }
    detector = OnsetDetector()
    print(f"onset detection, 2 channels x {n / 1e6:g} M float64 samples at {FS / 1e6:g} MS/s (best of {args.repeat})")
    print(f"{'case':36s} {'np.abs x2 [ms]':>15s} {'detect [ms]':>12s} {'ratio':>7s}  result")
    worst = 0.0
    for name, (a, b) in cases.items():
        base = best_of(lambda a=a, b=b: (np.abs(a), np.abs(b)), args.repeat)
        result = measure_latency(a, b, FS, detector=detector)
        took = best_of(lambda a=a, b=b: measure_latency(a, b, FS, detector=detector), args.repeat)
        worst = max(worst, took / base)
        what = f"latency {result.latency_s * 1e3:.3f} ms" if result.valid else result.reason[:40]
        print(f"{name:36s} {base * 1e3:15.1f} {took * 1e3:12.1f} {took / base:7.2f}  {what}")
    print(f"worst ratio {worst:.2f} (target <= 3.00): {'met' if worst <= 3.0 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
