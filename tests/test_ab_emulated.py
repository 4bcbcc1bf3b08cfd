"""bench ab / bench bisect through the emulated station: real installs of a planted catalogue's
builds, real segments through the instruments and the station clock (slow: minutes of lab time
on two phones)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from phonebench.bench.ab.bisect import bisect
from phonebench.bench.ab.gates import FIRST_TOKEN, TOKEN_MEDIAN
from phonebench.bench.ab.report import bisect_text, write_bisect
from phonebench.bench.ab.run import ab_oracle
from phonebench.bench.ab.session import ab_bench, seeded
from phonebench.bench.catalogue.catalogue import load_catalogue
from phonebench.core.station import EmulatedConfig, EmulatedPhoneConfig, StationConfig
from phonebench.emulation.catalogue_factory import write_catalogue

DIMENSITY_9300 = "PB-Emu Dimensity 9300"
SNAPDRAGON = "PB-Emu Snapdragon 8 Gen 3"


def _station(seed: int) -> StationConfig:
    phones = [EmulatedPhoneConfig("EMU0001", npu_persona="SM8650-MP"),
              EmulatedPhoneConfig("EMU0003", npu_persona="MT6989-MP")]
    return StationConfig(name="emulated", source=None,
                         emulated=seeded(EmulatedConfig(phones=phones, transport="direct"), seed))


def test_bisect_names_the_culprit_on_its_model_only_and_skips_a_build_that_crashes(tmp_path: Path):
    catalogue = load_catalogue(write_catalogue(tmp_path / "catalogue", n_builds=8,
                                               culprits={5: {"npu_time": 1.06, "models": ["MT6989"]}},
                                               broken={3: "crash-on-start"}))
    builds = [b.id for b in catalogue.builds]
    metrics = (FIRST_TOKEN, TOKEN_MEDIAN)
    with ab_bench(_station(5), catalogue=catalogue, duts=None, metrics=metrics, results_dir=tmp_path / "res") as opened:
        bench = opened.bench
        result = bisect(builds, ab_oracle(bench, last=6, seed=5), models=[SNAPDRAGON, DIMENSITY_9300], metrics=metrics)
    text = "\n".join(bisect_text(result))
    assert [c.build for c in result.models[DIMENSITY_9300].culprits] == [builds[5]], text
    assert result.models[SNAPDRAGON].status == "no culprit", text
    assert len(result.steps) <= math.log2(8) + 2, text
    culprit = result.models[DIMENSITY_9300].culprits[0]
    assert {g.metric: g.call for g in culprit.effects} == {FIRST_TOKEN: "regressed", TOKEN_MEDIAN: "regressed"}
    assert 0.03 < next(g.change for g in culprit.effects if g.metric == TOKEN_MEDIAN) < 0.09
    # every step's A/B is data with lab time; the crashing build, if the search reached it, is said
    assert all(s.lab_minutes > 0 for s in result.steps)
    assert set(result.skipped) <= {builds[3]}
    # the install records are kept beside the result, and the result is JSON
    assert list((tmp_path / "res" / "installs").glob("*.json"))
    saved = json.loads(write_bisect(result, tmp_path / "res").read_text())
    assert saved["models"][DIMENSITY_9300]["culprits"][0]["build"] == builds[5]


@pytest.mark.parametrize("seed", [3])
def test_ab_of_identical_builds_raises_no_alarm(tmp_path: Path, seed: int):
    from phonebench.bench.ab.run import plan_for, run_ab

    catalogue = load_catalogue(write_catalogue(tmp_path / "catalogue", n_builds=2))
    a, b = (x.id for x in catalogue.builds)
    metrics = (FIRST_TOKEN, TOKEN_MEDIAN, "sustained_power")
    with ab_bench(_station(seed), catalogue=catalogue, duts=None, metrics=metrics, results_dir=tmp_path) as opened:
        bench = opened.bench
        result = run_ab(bench, a, b, metrics=metrics, plan=plan_for(metrics, [SNAPDRAGON, DIMENSITY_9300], last=5),
                        seed=seed)
    assert not [g for g in result.gates if g.call in ("regressed", "improved")]
    assert all(s.install is None or s.install.station_s > 0 for s in result.segments)
    assert max(result.lab_s.values()) == pytest.approx(result.lab_minutes * 60)
