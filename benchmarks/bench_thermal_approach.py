"""Can a fitted thermal approach stand in for the sustained-use warm-up? (issue 32's lever)

The nightly's sustained-use study waits for a steady back cover (claim 7: readings after the cover
rose < 0.3 degC over 5 min), about 16 of its 24 lab minutes. The issue allows cutting that wait by
a fitted approach "if a study against full warm-ups shows it decides the same". This is the study,
on the cover traces a measured nightly kept (raw `cover-temperature.npz` of test_sustained_use):
for each phone, at loop times of 4-10 minutes, the hottest cover probe's readings so far are fitted
with one exponential approach a - b exp(-t / tau) (scipy's curve_fit); its asymptote a, with the
fit's standard error inflated for the residuals' lag-1 autocorrelation, is held against the mean of
the readings the full warm-up measured.

A stand-in decides the same only if every fitted asymptote lies within ~2 s.e. of the measured
steady value (or its error is far below the limit's margin *and* stated honestly). Prints, per phone
and fit time: the asymptote, its s.e., tau, the error and the error in s.e.; then the largest
|error| / s.e. over fits from 6 minutes on. Exit 0 (a study, not a target).

    python benchmarks/bench_thermal_approach.py [RUN_DIR]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import curve_fit

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_nightly_gates import newest_nightly  # noqa: E402

FIT_TIMES_S = (240, 300, 360, 420, 480, 540, 600)
SKIP_S = 30.0  # the die's and board's fast modes (< 40 s) have died out by then
TRACE = "suites_test_sla_instruments.py_test_sustained_use_*/cover-temperature.npz"


def approach(t: np.ndarray, a: float, b: float, tau: float) -> np.ndarray:
    return a - b * np.exp(-t / tau)


def fit(t: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """(asymptote, its s.e. inflated for lag-1 autocorrelated residuals, tau)."""
    p, cov = curve_fit(approach, t, y, p0=(y[-1] + 1.0, y[-1] - y[0] + 1.0, 300.0),
                       bounds=([0.0, 0.0, 20.0], [150.0, 100.0, 5000.0]), maxfev=20000)
    residuals = y - approach(t, *p)
    rho = float(np.corrcoef(residuals[:-1], residuals[1:])[0, 1])
    inflation = np.sqrt((1 + rho) / (1 - rho)) if 0 < rho < 1 else 1.0
    return float(p[0]), float(np.sqrt(cov[0, 0]) * inflation), float(p[2])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", nargs="?", help="a nightly run folder (default: the newest under ./reports)")
    args = parser.parse_args()
    folder = Path(args.run) if args.run else newest_nightly(Path("reports"))
    traces = sorted((folder / "raw").glob(TRACE))
    if not traces:
        raise SystemExit(f"{folder}: no sustained-use cover traces (raw/{TRACE})")
    print(f"run {folder.name}: one-exponential fits of the hottest cover probe against the full warm-up")
    print(f"{'phone':>8} {'fit at':>7} {'asymptote':>9} {'s.e.':>5} {'tau':>5} {'steady':>7} {'error':>6} {'err/se':>6}")
    worst = 0.0
    for path in traces:
        phone = path.parent.name.rsplit("_", 1)[-1]
        data = np.load(path)
        t, hottest = data["t"], np.maximum(data["y"], data["y2"])
        steady = float(hottest[int(data["measure_from"]):].mean())
        for at in FIT_TIMES_S:
            part = (t >= SKIP_S) & (t <= at)
            asymptote, se, tau = fit(t[part], hottest[part])
            ratio = (asymptote - steady) / se
            if at >= 360:
                worst = max(worst, abs(ratio))
            print(f"{phone:>8} {at:>6}s {asymptote:>9.2f} {se:>5.2f} {tau:>5.0f} {steady:>7.2f} "
                  f"{asymptote - steady:>+6.2f} {ratio:>+6.1f}")
    verdict = "decides the same" if worst <= 2.0 else "does NOT decide the same: the warm-up stays"
    print(f"\nlargest |error| / s.e. for fits from 6 min on: {worst:.1f} -> {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
