"""The morning page (`bench trend --html`): what moved leads — tonight's calls, the recent change
points and bisect results, grouped by claim and model, each with its plot, its build range, the
bisect command and links to its runs; the unchanged series fold below; every stored string is
escaped."""
from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

from markupsafe import escape

from phonebench.bench.report.trend_page import render_page, run_links
from phonebench.bench.results.bisect_record import read_bisects
from phonebench.bench.results.compare import compare_models, label
from phonebench.bench.results.morning import assemble
from phonebench.bench.results.trend import HistoryPoint, find_changes, series_of

NIGHTS, STEP_NIGHT = 12, 6
MODELS = ("Model A", "Model B")
STATISTICS = {"first_token_p99": 3, "energy_per_dialog": 6, "voice_latency_p99": 1}


def _night(i: int, moves: dict[tuple[str, str], float], builds: dict[str, tuple[str, str]]) -> dict:
    """Night i: one phone per model, no noise but a stated 0.5 % s.e.; from STEP_NIGHT on each model
    runs its second build and the planted (statistic, model) moves by its factor."""
    duts, tests = {}, []
    for model in MODELS:
        build = builds[model][i >= STEP_NIGHT]
        duts[f"{model}-1"] = {"product_model": model, "runtime_version": build}
        verdicts = []
        for name, claim in STATISTICS.items():
            value = 100.0 * (moves.get((name, model), 1.0) if i >= STEP_NIGHT else 1.0) * (1 + 0.001 * (i % 3 - 1))
            verdicts.append({"name": name, "claim": claim, "value": value, "unit": "ms", "comparator": "<=",
                             "evidence": "measured", "bound": value * 1.008, "confidence": 0.95})
        tests.append({"dut": f"{model}-1", "verdicts": verdicts})
    return {"run_id": f"night-{i:02d}", "started": dt.datetime(2026, 12, 1) + dt.timedelta(days=i),
            "duts": duts, "tests": tests}


def _points(run: dict) -> list[HistoryPoint]:
    return [HistoryPoint(run["run_id"], run["started"], t["dut"], run["duts"][t["dut"]]["product_model"],
                         run["duts"][t["dut"]]["runtime_version"], label(v), None, v["value"], v["unit"],
                         v["comparator"], v["claim"], v["bound"], v["confidence"])
            for t in run["tests"] for v in t["verdicts"]]


def _history(moves: dict[tuple[str, str], float], builds: dict[str, tuple[str, str]] | None = None):
    builds = builds or {m: ("3.4.0", "3.4.1") for m in MODELS}
    runs = [_night(i, moves, builds) for i in range(NIGHTS)]
    all_series = series_of(p for run in runs for p in _points(run))
    for s in all_series:
        find_changes(s)
    night = compare_models(runs[-1], {None: runs[STEP_NIGHT - 1]})
    return runs, all_series, night


def _bisect(folder: Path, name: str, **fields: object) -> None:
    folder.mkdir(exist_ok=True)
    record = {"metric": "first_token_p99", "model": "Model B", "good": "3.4.0", "bad": "3.4.1", "first_bad": "3.4.1",
              "runs": ["bisect-1", "bisect-2"], "finished": "2026-12-12T06:00:00Z", **fields}
    (folder / name).write_text(json.dumps(record))


def test_what_moved_leads_grouped_by_claim_and_model_and_the_unchanged_fold_below(tmp_path):
    runs, all_series, night = _history({("first_token_p99", "Model B"): 1.08, ("energy_per_dialog", "Model A"): 0.9})
    _bisect(tmp_path / "bisect", "b1.json")
    morning = assemble(all_series, night, "accepted (night-05)", None, *read_bisects(tmp_path / "bisect"))
    # the regression's group leads, the improvement's follows; each names its claim and model
    assert [(g.claim, g.model, g.regressed) for g in morning.groups] == [(3, "Model B", True), (6, "Model A", False)]
    moved = morning.groups[0].moved[0]
    assert ([c.call for c in moved.calls], [c.call for c in moved.changes], len(moved.bisects)) == \
        (["regressed"], ["regressed"], 1)
    assert len(morning.unchanged) == len(all_series) - 2

    page = render_page(all_series, "morning", dt.datetime(2026, 12, 12, 9), morning)
    moved_at = page.index('id="moved"')
    folded_at = page.index('<details id="unchanged">')
    table_at = page.index('<details id="table">')
    # plots first: the two moved series' plots come before the fold, in the groups' order
    ft, energy = page.index("first_token_p99 on Model B (12 nights)"), page.index("energy_per_dialog on Model A (12 nights)")
    assert moved_at < ft < energy < folded_at < table_at
    assert page[:moved_at].count("<svg") == 0 and page[moved_at:folded_at].count("<svg") == 2
    assert page[folded_at:table_at].count("<svg") == len(all_series) - 2  # every unchanged series, folded
    assert "<details open" not in page and "open>" not in page
    table = page[table_at:]
    assert table.count("<tr") == len(all_series) + 1  # the full table: every series, and its header
    # each change point offers the bisect command for its build range; tonight's regression too
    command = "bench bisect --good 3.4.0 --bad 3.4.1 --metric first_token --model 'Model B' --catalogue PATH"
    assert page[moved_at:folded_at].count(str(escape(command))) == 2
    assert "first build with the change: 3.4.1" in page


def test_each_call_change_point_and_bisect_links_to_its_runs(tmp_path):
    runs, all_series, night = _history({("first_token_p99", "Model B"): 1.08})
    for run in runs:
        folder = tmp_path / "reports" / run["run_id"]
        folder.mkdir(parents=True)
        if run["run_id"] != "night-06":  # its report was never rendered: no link
            (folder / "report.html").write_text("report")
    (tmp_path / "reports" / "bisect-1").mkdir()
    (tmp_path / "reports" / "bisect-1" / "report.html").write_text("report")
    _bisect(tmp_path / "bisect", "b1.json")
    page_path = tmp_path / "reports" / "trend.html"
    dirs = {r["run_id"]: str(tmp_path / "reports" / r["run_id"]) for r in runs} | \
        {"bisect-1": str(tmp_path / "reports" / "bisect-1"), "gone": None}
    links = run_links(dirs, page_path)
    assert links["night-05"] == "./night-05/report.html" and "night-06" not in links and "gone" not in links
    morning = assemble(all_series, night, "accepted (night-05)", None, *read_bisects(tmp_path / "bisect"))
    page = render_page(all_series, "morning", dt.datetime(2026, 12, 12, 9), morning, links)
    lead = page[page.index('id="moved"'):page.index('<details id="unchanged">')]
    hrefs = re.findall(r'href="([^"#]+)"', lead)
    # tonight's call: baseline and tonight; the change point: the nights either side; the bisect: its runs
    assert hrefs == ["./night-05/report.html", "./night-11/report.html", "./night-05/report.html",
                     "./bisect-1/report.html"]
    assert "night-06" in lead and "bisect-2" in lead  # named, though no report is on disk


def test_a_run_folder_cannot_make_a_link_with_a_scheme(tmp_path):
    folder = tmp_path / "javascript:alert(1)"
    folder.mkdir()
    (folder / "report.html").write_text("x")
    href = run_links({"r": str(folder)}, tmp_path / "trend.html")["r"]
    assert href == "./javascript%3Aalert%281%29/report.html"


def test_hostile_names_and_builds_are_escaped_on_the_page(tmp_path):
    hostile_model = "Pixel <b>9</b>"
    hostile_build = '3.4.1"><img src=x onerror=alert(2)>'
    moves = {("first_token_p99", "Model B"): 1.08}
    runs, _, _ = _history(moves, {"Model A": ("3.4.0", "3.4.1"), "Model B": ("3.4.0", hostile_build)})
    for run in runs:  # a model and a statistic named to break out of the page
        run["duts"][hostile_model + "-1"] = run["duts"].pop("Model B-1") | {"product_model": hostile_model}
        for t in run["tests"]:
            if t["dut"] == "Model B-1":
                t["dut"] = hostile_model + "-1"
                for v in t["verdicts"]:
                    if v["name"] == "voice_latency_p99":
                        v["name"] = "<script>alert(1)</script>"
    all_series = series_of(p for run in runs for p in _points(run))
    for s in all_series:
        find_changes(s)
    night = compare_models(runs[-1], {None: runs[STEP_NIGHT - 1]})
    _bisect(tmp_path / "bisect", "b1.json", model=hostile_model, bad=hostile_build, runs=['"><script>x</script>'])
    (tmp_path / "bisect" / "broken <i>.json").write_text("{not json")
    morning = assemble(all_series, night, "accepted", None, *read_bisects(tmp_path / "bisect"))
    assert morning.groups[0].model == hostile_model and morning.bisect_problems
    page = render_page(all_series, "morning", dt.datetime(2026, 12, 12, 9), morning)
    for raw in ("<script>", "<img", "<b>9", "<i>"):
        assert raw not in page, raw
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "Pixel &lt;b&gt;9&lt;/b&gt;" in page
    assert "&lt;img src=x onerror=alert(2)&gt;" in page
    # the bisect command still names the hostile build, shell-quoted, then HTML-escaped
    from phonebench.bench.results.handover import bisect_command

    assert str(escape(bisect_command("3.4.0", hostile_build, "first_token_p99", hostile_model))) in page


def test_a_bisect_file_is_read_in_the_documented_shape_and_a_bad_one_is_named(tmp_path):
    folder = tmp_path / "bisect"
    _bisect(folder, "done.json")
    _bisect(folder, "running.json", first_bad=None, finished=None, runs=[])
    _bisect(folder, "no-model.json", model="")
    (folder / "list.json").write_text("[]")
    found, problems = read_bisects(folder)
    assert [b.source for b in found] == ["done.json", "running.json"]  # the finished first, then those running
    assert found[0].text == "first build with the change: 3.4.1 (searched 3.4.0 → 3.4.1, 2 run(s))"
    assert found[1].text == "not settled yet (searching 3.4.0 → 3.4.1, 0 run(s))"
    assert sorted(p.split(":")[0] for p in problems) == ["list.json", "no-model.json"]
    assert read_bisects(tmp_path / "none") == ([], [])


def test_old_change_points_and_bisects_stay_folded():
    runs, all_series, night = _history({("first_token_p99", "Model B"): 1.08})
    morning = assemble(all_series, None, None, "no accepted baseline", recent=3)  # the step is 6 nights old
    assert morning.groups == [] and len(morning.unchanged) == len(all_series)
    page = render_page(all_series, "morning", dt.datetime(2026, 12, 12, 9), morning)
    assert "Nothing moved" in page and "No calls tonight: no accepted baseline" in page
    assert "regressed +8.0 % (build 3.4.0 (run night-05) → 3.4.1 (run night-06)" in page  # in the full table
