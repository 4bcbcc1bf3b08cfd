"""`bench trend` on a year of nights: how long the history takes to read and analyse, how often
it finds a change point where there is none, and how often it finds a planted one at the right
build (seeded; docs/nightly.md).

Prints: store write and read/analyse times for 365 nights of 4 models x 4 phones x 12 statistics;
then, over 300 seeded series of 60 nights each, the share of honest series with any (false) change
point and the share of series with a planted step found at exactly the night its build changed.
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from nightly_nights import Plan, night  # noqa: E402
from phonebench.bench.results.trend import NightValue, Series, find_changes, series_of  # noqa: E402
from phonebench.bench.store import open_store  # noqa: E402
from phonebench.bench.store.history import history  # noqa: E402

YEAR, SERIES, LENGTH = 365, 300, 60


def year_in_a_store() -> None:
    plan = Plan(models=("Model A", "Model B", "Model C", "Model D"), phones_per_model=4,
                statistics={f"s{k:02d}": 100.0 + k for k in range(12)}, step_night=200, step={"s00": 0.08})
    rng = np.random.default_rng(2026)
    with tempfile.TemporaryDirectory() as folder, open_store(Path(folder) / "results.sqlite") as store:
        t0 = time.perf_counter()
        for i in range(YEAR):
            store.sync_run(night(plan, i, rng))
        written = time.perf_counter() - t0
        t0 = time.perf_counter()
        points = history(store)
        read = time.perf_counter() - t0
        t0 = time.perf_counter()
        all_series = series_of(points)
        changes = [(s, c) for s in all_series for c in find_changes(s)]
        analysed = time.perf_counter() - t0
    print(f"a year: {YEAR} nights, {len(points)} values, {len(all_series)} series")
    print(f"  store write {written:.1f} s (once, as the nights are recorded); read {read:.2f} s; "
          f"change points {analysed:.2f} s")
    for s, c in changes:
        print(f"  {s.metric} on {s.model}: {c.call} {100 * (c.relative or 0):+.1f} % at night {c.index} ({c.build_range})")


def monte_carlo(rel_noise: float, step: float) -> tuple[float, float]:
    rng = np.random.default_rng(int(rel_noise * 1e4) + int(step * 1e3))
    false, found = 0, 0
    for _ in range(SERIES):
        for planted in (0.0, step):
            y = 100.0 * (1 + rng.normal(0.0, rel_noise, LENGTH))
            y[LENGTH // 2:] *= 1 + planted
            builds = ["a"] * (LENGTH // 2) + ["b"] * (LENGTH - LENGTH // 2)
            series = Series("s", "m", "ms", None, True,
                            [NightValue(f"r{i}", None, (builds[i],), float(v), 1) for i, v in enumerate(y)])
            changes = find_changes(series)
            if planted == 0.0:
                false += bool(changes)
            else:
                found += [c.index for c in changes] == [LENGTH // 2]
    return false / SERIES, found / SERIES


def main() -> None:
    year_in_a_store()
    print(f"\n{SERIES} seeded series of {LENGTH} nights (5 % practical threshold):")
    print("  night-to-night noise  planted step  honest series with a false change point  step found at its build")
    for rel_noise, step in ((0.01, 0.08), (0.02, 0.08), (0.03, 0.08), (0.02, 0.15)):
        false, found = monte_carlo(rel_noise, step)
        print(f"  {100 * rel_noise:>18.0f} %  {100 * step:>10.0f} %  {100 * false:>38.1f} %  {100 * found:>22.1f} %")


if __name__ == "__main__":
    main()
