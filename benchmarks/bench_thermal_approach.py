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
|error| / s.e. over fits from 6 minutes on.

Then the bound the nightly's warm-up may end on (phonebench.bench.checks.thermal.remaining_rise_bound,
the same function): at each reading from BOUND_FROM_S of the loop on, the remaining rise is
bounded by tau x the upper 95 % bound of the present slope (a line through the last window of
readings, its s.e. inflated for lag-1 autocorrelated residuals). The warm-up would end at the first
reading whose bound is at most the allowed remaining rise; the estimate of the steady maximum is
the next READINGS readings' maximum plus that bound. Only full warm-ups are studied (a trace whose
warm-up ended on a bound is skipped). Per phone at the module's tau and window, and summed over a
grid around them: where it would end against where the full warm-up ended, and the estimate's
error against the steady maximum the full warm-up measured (it must never be negative: a bound
that under-covers is not a bound). Give it nominal and `hot` units' runs. Exit 0 (a study).

    python benchmarks/bench_thermal_approach.py [RUN_DIR ...]
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import curve_fit

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_nightly_gates import newest_nightly  # noqa: E402
from phonebench.bench.checks.thermal import (BOUND_FROM_S, REMAINING_RISE_TAU_S as TAU_MAX_S,  # noqa: E402
                                             SLOPE_WINDOW_S, remaining_rise_bound)

FIT_TIMES_S = (240, 300, 360, 420, 480, 540, 600)
ALLOWED_RISE_C = (0.5, 0.75, 1.0)
TAUS_S = (600.0, TAU_MAX_S, 1000.0)  # around the module's
WINDOWS_S = (120.0, SLOPE_WINDOW_S, 240.0)
READINGS = 20  # the nightly's cover readings after the warm-up
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


@dataclass
class FullWarmUp:
    name: str  # run/phone
    t: np.ndarray
    hottest: np.ndarray  # the hottest cover probe per reading, degC
    full: int  # the reading the full warm-up's measurement started at
    verdict: dict  # the run's cover_temp_max verdict for this phone (value, limit, uncertainty)


def full_warmups(folders: list[Path]) -> list[FullWarmUp]:
    """Every trace whose warm-up ended steady, not on a bound (those are not full warm-ups to hold
    the bound against), with its phone's cover verdict."""
    traces = []
    for folder in folders:
        verdicts = {test["dut"]: v for test in json.loads((folder / "results.json").read_text())["tests"]
                    if "test_sustained_use" in test["nodeid"] for v in test["verdicts"] if v["name"] == "cover_temp_max"}
        for path in sorted((folder / "raw").glob(TRACE)):
            data = np.load(path)
            if "remaining_rise_c" in data and np.isfinite(data["remaining_rise_c"]):
                continue
            phone = path.parent.name.rsplit("_", 1)[-1]
            traces.append(FullWarmUp(f"{folder.name}/{phone}", data["t"], np.maximum(data["y"], data["y2"]),
                                     int(data["measure_from"]), verdicts[phone]))
    return traces


def guarded(value: float, expanded: float, limit: float) -> str:
    """The guarded decision against an upper limit (core.judge's guard band)."""
    return "pass" if value + expanded <= limit else "fail" if value - expanded > limit else "inconclusive"


def decisions(trace: FullWarmUp, at: int, bound: float) -> str:
    """The cover verdict as the full warm-up decided it -> as the bound-ended one would: the next
    READINGS readings' maximum, the bound a rectangular component of the uncertainty."""
    v, u = trace.verdict, trace.verdict["uncertainty"]
    k = u["coverage_factor"]
    expanded = k * float(np.hypot(u["expanded"] / k, bound / np.sqrt(3.0)))
    value = float(trace.hottest[at + 1:at + 1 + READINGS].max())
    return f"{guarded(v['value'], u['expanded'], v['limit'])} -> {guarded(value, expanded, v['limit'])}"


def first_bounded(t: np.ndarray, hottest: np.ndarray, full: int, tau: float, window_s: float,
                  allowed: float) -> tuple[int, float] | None:
    """(reading, bound) where the bound would end the warm-up before the full one did, or None."""
    for i in np.flatnonzero(t >= max(BOUND_FROM_S, window_s)):
        if i >= full:
            return None
        recent = (t > t[i] - window_s) & (t <= t[i])
        bound = remaining_rise_bound(t[recent], hottest[recent], tau)
        if bound <= allowed:
            return int(i), bound
    return None


def bound_study(folders: list[Path]) -> None:
    traces = full_warmups(folders)
    print(f"\nthe bound, on {len(traces)} full warm-ups: remaining rise <= tau x the slope's upper 95 % bound "
          f"over the last window, from {BOUND_FROM_S:.0f} s of the loop on; per phone at the module's "
          f"tau {TAU_MAX_S:.0f} s, window {SLOPE_WINDOW_S:.0f} s:")
    print(f"{'allowed':>7} {'run/phone':>26} {'ends at':>7} {'full':>5} {'bound':>5} {'error':>6}  "
          f"cover verdict: full -> bound")
    for window_s in WINDOWS_S:
        for tau in TAUS_S:
            for allowed in ALLOWED_RISE_C:
                saved, errors = [], []
                for trace in traces:
                    t, hottest, full = trace.t, trace.hottest, trace.full
                    steady_max = float(hottest[full:].max())
                    found = first_bounded(t, hottest, full, tau, window_s, allowed)
                    if found is None:
                        saved.append(0.0)
                        continue
                    i, bound = found
                    error = float(hottest[i + 1:i + 1 + READINGS].max()) + bound - steady_max
                    saved.append(t[full] - t[i])
                    errors.append(error)
                    if (tau, window_s) == (TAU_MAX_S, SLOPE_WINDOW_S):
                        print(f"{allowed:>6.2f}C {trace.name:>26} {t[i]:>6.0f}s {t[full]:>4.0f}s {bound:>5.2f} "
                              f"{error:>+6.2f}  {decisions(trace, i, bound)}")
                print(f"  window {window_s:.0f} s, tau {tau:.0f} s, allowed {allowed:.2f} degC: ends "
                      f"{np.mean(saved) / 60:.1f} min earlier on average (at most {max(saved) / 60:.1f}); error "
                      + (f"{min(errors):+.2f}..{max(errors):+.2f} degC -> "
                         f"{'conservative on every phone' if min(errors) >= 0 else 'UNDER-COVERS: not a bound'}"
                         if errors else "-"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", help="nightly run folders (default: the newest under ./reports)")
    args = parser.parse_args()
    folders = [Path(run) for run in args.runs] or [newest_nightly(Path("reports"))]
    folder = folders[0]
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
    bound_study(folders)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
