"""The nightly's memory: accepted baselines, comparison against them or a build, and the history of
each statistic per model with its change points at the right build (bench trend, docs/nightly.md)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from markupsafe import escape

from phonebench.bench.cli import main
from phonebench.bench.results.trend import find_changes, series_of
from phonebench.bench.store import StoreError, open_store
from phonebench.bench.store.history import accept_build, accepted_baselines, history, runs_of_build
from nightly_nights import Plan, night


@pytest.fixture(scope="module")
def store_with_nights(tmp_path_factory):
    """One store of 30 nights for the module (its tests only add acceptances and an incomplete run,
    which no reading here counts)."""
    path = tmp_path_factory.mktemp("nights") / "results.sqlite"
    rng = np.random.default_rng(11)
    plan = Plan(step_night=20)
    with open_store(path) as store:
        for i in range(30):
            store.sync_run(night(plan, i, rng))
    return path


def test_the_planted_step_is_found_at_the_build_that_made_it_and_nowhere_else(store_with_nights):
    with open_store(store_with_nights) as store:
        points = history(store)
    assert len(points) == 30 * 4 * 3
    all_series = series_of(points)
    assert len(all_series) == 2 * 3
    found = {(s.metric, s.model): find_changes(s) for s in all_series}
    changes = found.pop(("first_token_p99", "Model A"))
    assert [c.index for c in changes] == [20] and changes[0].call == "regressed"
    assert changes[0].build_range == "build 3.4.0 (run night-0019) → 3.4.1 (run night-0020)"
    assert 0.06 < changes[0].relative < 0.10
    assert not any(found.values()), found  # no false change point on the honest series


def test_a_baseline_is_accepted_per_model_and_only_from_a_complete_run(store_with_nights):
    with open_store(store_with_nights) as store:
        made = accept_build(store, "night-0010", by="lab")
        assert {a.model for a in made} == {"Model A", "Model B"} and made[0].build == "3.4.0"
        accept_build(store, "night-0025", ["Model B"])
        baselines = accepted_baselines(store)
        assert baselines["Model A"].run_id == "night-0010" and baselines["Model B"].run_id == "night-0025"
        store.sync_run({**night(Plan(), 99, np.random.default_rng(1)), "run_id": "broken", "status": "incomplete"})
        with pytest.raises(StoreError, match="not complete"):
            accept_build(store, "broken")
        with pytest.raises(StoreError, match="no phone of model Model C"):
            accept_build(store, "night-0010", ["Model C"])
        assert runs_of_build(store, "3.4.1")[0] == "night-0029"


def test_the_cli_compares_against_accepted_and_against_a_build_and_draws_the_history(store_with_nights, tmp_path,
                                                                                     capsys):
    db = str(store_with_nights)
    assert main(["accept-build", "night-0019", "--database", db, "--by", "lab"]) == 0
    assert main(["compare", "night-0029", "--against", "accepted", "--database", db]) == 1
    out = capsys.readouterr().out
    assert "accepted (Model A: night-0019, Model B: night-0019)" in out
    assert "1 regression(s): first_token_p99 on Model A" in out
    bisect = "bench bisect --good 3.4.0 --bad 3.4.1 --metric first_token --model 'Model A' --catalogue PATH"
    assert "first_token_p99 on Model A moved: build 3.4.0 (run night-0019) → 3.4.1 (run night-0029)" in out
    assert f"    {bisect}" in out.splitlines()
    assert main(["compare", "night-0029", "--against", "accepted", "--database", db, "--json"]) == 1
    record = json.loads(capsys.readouterr().out)
    assert [(h["model"], h["bisect"]) for h in record["regressions"]] == [("Model A", bisect)]
    assert record["family"] == 6 and all(g["sight"] for g in record["comparisons"] if g["phone"] is None)
    assert main(["compare", "night-0029", "--against", "3.4.0", "--database", db]) == 1
    assert "build 3.4.0 (Model A: run night-0019, Model B: run night-0028)" in capsys.readouterr().out
    assert main(["compare", "night-0029", "--against", "no-such-thing", "--database", db]) == 4  # USAGE
    assert "neither a stored run nor a build" in capsys.readouterr().err
    page = tmp_path / "trend.html"
    (tmp_path / "bisect").mkdir()
    (tmp_path / "bisect" / "b.json").write_text(json.dumps({
        "metric": "first_token_p99", "model": "Model A", "good": "3.4.0", "bad": "3.4.1", "first_bad": "3.4.1",
        "runs": [], "finished": None}))
    assert main(["trend", "--database", db, "--html", str(page), "--bisects", str(tmp_path / "bisect")]) == 1
    out = capsys.readouterr().out
    assert "regressed +8" in out and "3.4.0 (run night-0019) → 3.4.1 (run night-0020)" in out
    assert "1 series with a change point" in out
    html = page.read_text()
    assert html.count("<svg") == 6 and "first_token_p99" in html and "→ 3.4.1" in html
    # the morning page leads with tonight's call against the accepted night-0019 (the step's change
    # point is 10 nights old: it leads too, within the last 14)
    lead = html[html.index('id="moved"'):html.index('<details id="unchanged">')]
    assert lead.count("<svg") == 1 and "first_token_p99 on Model A" in lead
    assert "regressed +8" in lead and str(escape(bisect)) in lead and "first build with the change: 3.4.1" in lead
    assert "morning page:" in out and "5 series unchanged" in out
