"""The history page's size for the default fleet, before and after the morning page (issue 51, item 5).

The default fleet's history: three phone models (two Snapdragon 8 Gen 3 phones, one Dimensity 9300,
one Dimensity 9400) and the 49 statistics the claims table names (the fingerprint's alias left
out), so 147 series; 60 and 365 nights, seeded, 1 % night-to-night noise. Four nights before the
end every model moves to build 3.4.1, on which first token is 6 % slower on the Dimensity 9300
alone; the baseline accepted is the night before that build, and one bisect result is in the
results folder. "Before" is the page as bench/report/trend_page.py drew it at BEFORE (read from
git), "after" is today's morning page, from the same series in the same run.

Prints per history length: the page's bytes, and its height in a headless Chromium 1280 px wide
(as it opens, and with every <details> opened), with the number of plots drawn open.
"""
from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import tempfile
import types
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from phonebench.bench.report.trend_page import render_page  # noqa: E402
from phonebench.bench.results.bisect_record import read_bisects  # noqa: E402
from phonebench.bench.results.compare import compare_models, label  # noqa: E402
from phonebench.bench.results.morning import assemble  # noqa: E402
from phonebench.bench.results.trend import HistoryPoint, find_changes, series_of  # noqa: E402
from phonebench.bench.specs.claims import load_claims  # noqa: E402

BEFORE = "dece653"  # main when the morning page began: the page that opened with the table of every series
MODELS = {"PB-Emu Snapdragon 8 Gen 3": 2, "PB-Emu Dimensity 9300": 1, "PB-Emu Dimensity 9400": 1}
MOVED_MODEL, MOVED_METRIC, STEP, Z95 = "PB-Emu Dimensity 9300", "first_token_p99", 0.06, 1.6448536
WINDOW = "1280,1000"


def statistics() -> list[tuple[str, int]]:
    return [(m, c.number) for c in load_claims() for m in c.metrics if m != "npu_microcode_fingerprint"]


def night(index: int, nights: int, rng: np.random.Generator) -> dict[str, Any]:
    """Night `index` as a results.json record."""
    build = "3.4.1" if index >= nights - 4 else "3.4.0"
    duts, tests = {}, []
    for model, phones in MODELS.items():
        for k in range(phones):
            phone = f"{model.split()[-1]}-{k + 1}"
            duts[phone] = {"product_model": model, "runtime_version": build}
            verdicts = []
            for name, claim in statistics():
                moved = build == "3.4.1" and (model, name) == (MOVED_MODEL, MOVED_METRIC)
                value = float(100.0 * (1 + (STEP if moved else 0.0)) * (1 + rng.normal(0.0, 0.01)))
                verdicts.append({"name": name, "claim": claim, "value": value, "unit": "ms", "comparator": "<=",
                                 "evidence": "measured", "bound": value * (1 + Z95 * 0.01), "confidence": 0.95})
            tests.append({"dut": phone, "verdicts": verdicts})
    started = dt.datetime(2026, 1, 1, 1) + dt.timedelta(days=index)
    return {"run_id": f"night-{index:04d}", "started": started, "duts": duts, "tests": tests}


def points_of(run: dict[str, Any]) -> list[HistoryPoint]:
    """What bench.store.history.history reads back of one stored run."""
    return [HistoryPoint(run["run_id"], run["started"], t["dut"], run["duts"][t["dut"]]["product_model"],
                         run["duts"][t["dut"]]["runtime_version"], label(v), None, v["value"], v["unit"],
                         v["comparator"], v["claim"], v["bound"], v["confidence"])
            for t in run["tests"] for v in t["verdicts"]]


def page_before() -> Callable[..., str] | None:
    """render_page as it was at BEFORE, or None without the repository's history."""
    try:
        source = subprocess.run(["git", "-C", str(ROOT), "show", f"{BEFORE}:bench/report/trend_page.py"],
                                capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    module = types.ModuleType("phonebench.bench.report.trend_page_before")
    module.__package__ = "phonebench.bench.report"
    exec(compile(source, f"{BEFORE}:bench/report/trend_page.py", "exec"), module.__dict__)  # this repository's own file
    return module.render_page  # type: ignore[no-any-return]


def heights(pages: list[Path]) -> list[tuple[int, int, int]] | None:
    """(height as opened, height with every <details> open, plots laid out as opened) per page."""
    try:
        from browser_helpers import HAVE_BROWSER, start_browser
    except ImportError:
        return None
    if not HAVE_BROWSER:
        return None
    driver = start_browser(WINDOW)
    try:
        found = []
        for page in pages:
            driver.get(page.resolve().as_uri())
            closed = driver.execute_script("return document.documentElement.scrollHeight")
            shown = driver.execute_script("return [...document.querySelectorAll('svg')].filter("
                                          "s => s.checkVisibility()).length")
            driver.execute_script("document.querySelectorAll('details').forEach(d => d.open = true)")
            found.append((int(closed), int(driver.execute_script("return document.documentElement.scrollHeight")),
                          int(shown)))
        return found
    finally:
        driver.quit()


def main() -> None:
    before = page_before()
    generated = dt.datetime(2026, 12, 7, 9, 0)
    with tempfile.TemporaryDirectory() as folder:
        rows = []
        for nights in (60, 365):
            rng = np.random.default_rng(2026)
            runs = [night(i, nights, rng) for i in range(nights)]
            all_series = series_of(p for run in runs for p in points_of(run))
            for s in all_series:
                find_changes(s)
            accepted = runs[nights - 5]
            calls = compare_models(runs[-1], {None: accepted})
            bisects = Path(folder) / f"bisect-{nights}"
            bisects.mkdir()
            (bisects / "b1.json").write_text(json.dumps({
                "metric": MOVED_METRIC, "model": MOVED_MODEL, "good": "3.4.0", "bad": "3.4.1", "first_bad": "3.4.1",
                "runs": ["bisect-1", "bisect-2"], "finished": runs[-1]["started"].isoformat() + "Z"}))
            morning = assemble(all_series, calls, f"accepted ({accepted['run_id']})", None, *read_bisects(bisects))
            links = {r["run_id"]: f"./{r['run_id']}/report.html" for r in runs}
            pages = {}
            if before is not None:
                pages["before"] = before(all_series, "phonebench: history per phone model", generated)
            pages["after"] = render_page(all_series, "phonebench: the morning page", generated, morning, links)
            for name, text in pages.items():
                path = Path(folder) / f"{name}-{nights}.html"
                path.write_text(text, encoding="utf-8")
                rows.append((nights, name, path, len(text.encode()), len(all_series),
                             sum(len(g.moved) for g in morning.groups)))
        measured = heights([r[2] for r in rows])
    print(f"the default fleet's history: {len(MODELS)} models, {len(statistics())} statistics, "
          f"{rows[0][4]} series; {len(morning.groups)} group(s) moved ({rows[0][5]} series)")
    if before is None:
        print(f"(no git history: the page at {BEFORE} is not measured)")
    print(f"{'nights':>6}  {'page':6} {'bytes':>10} {'height as opened':>17} {'all <details> open':>19} "
          f"{'plots laid out':>15}")
    for i, (nights, name, _, size, _, _) in enumerate(rows):
        h = measured[i] if measured else None
        print(f"{nights:>6}  {name:6} {size:>10,} " + (f"{h[0]:>14,} px {h[1]:>16,} px {h[2]:>15}" if h
                                                       else "(no headless Chromium: heights not measured)"))


if __name__ == "__main__":
    main()
