"""bench/ab: energy per dialog at a fixed dialog length (the ratio estimator on the bench's own
window), the dialog_length gate beside it, and the records that keep raw and adjusted values."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from phonebench.bench.ab.dialogs import (DIALOGS, ENERGY_J, WINDOW_S, dialog_power_w, dialog_raw,
                                         length_adjusted_j, with_dialog_statistics)
from phonebench.bench.ab.gates import DEFAULT_METRICS, DIALOG_LENGTH, ENERGY_PER_DIALOG, GATES
from phonebench.bench.ab.protocol import Measured
from phonebench.bench.ab.records import Installed, Unit
from phonebench.bench.ab.report import ab_text
from phonebench.bench.ab.run import plan_for, run_ab
from phonebench.bench.ab.sequential import NO_CHANGE, REGRESSED
from phonebench.bench.ab.simulated import Noise, PlantedBuild, SimulatedBench
from phonebench.emulation.build_artefact import Behaviour, parse_manifest, read_artefact, write_artefact
from phonebench.emulation.catalogue_factory import behaviour_at
from phonebench.emulation.world import World

DIALOG_GATES = (ENERGY_PER_DIALOG, DIALOG_LENGTH)
# The emulated fleet's spreads (bench/ab/gates.py): power at a fixed length ~0.1 %, length ~15 %.
NOISE = Noise({ENERGY_PER_DIALOG: GATES[ENERGY_PER_DIALOG].spread, DIALOG_LENGTH: GATES[DIALOG_LENGTH].spread},
              {"dialogs": 5.0}, 2.0)
UNITS = [Unit("u1", "m"), Unit("u2", "m")]


# --------------------------------------------------------------------------- the statistic

def test_the_adjusted_statistic_by_hand():
    raw = dialog_raw([8.0, 12.0], [2.0, 3.0])  # 20 J over 5 s: 4 W
    assert raw == {DIALOGS: 2.0, ENERGY_J: 10.0, WINDOW_S: 2.5}
    assert dialog_power_w(raw) == pytest.approx(4.0)
    assert length_adjusted_j(raw, 2.0) == pytest.approx(8.0)  # a 2 s dialog at 4 W
    # a longer pair of dialogs at the same power costs the same at the reference length
    assert length_adjusted_j(dialog_raw([12.0, 16.0], [3.0, 4.0]), 2.0) == pytest.approx(8.0)
    with pytest.raises(ValueError):
        dialog_raw([], [])


def test_the_first_dialogs_fix_the_reference_and_the_raw_values_stay():
    first = Measured({}, {}, (), dialog_raw([10.0], [2.5]))
    adjusted, ref = with_dialog_statistics(first, DIALOG_GATES, None)
    assert ref == 2.5
    assert adjusted.values == {ENERGY_PER_DIALOG: pytest.approx(10.0), DIALOG_LENGTH: 2.5}
    later, ref2 = with_dialog_statistics(Measured({}, {}, (), dialog_raw([16.0], [4.0])), DIALOG_GATES, ref)
    assert ref2 == 2.5  # fixed for the whole A/B on the unit
    assert later.values[ENERGY_PER_DIALOG] == pytest.approx(10.0)  # 4 W x 2.5 s
    assert later.raw[ENERGY_J] == 16.0 and later.raw[WINDOW_S] == 4.0  # nothing measured dropped
    only_energy, _ = with_dialog_statistics(Measured({}, {}, (), dialog_raw([16.0], [4.0])), [ENERGY_PER_DIALOG], ref)
    assert set(only_energy.values) == {ENERGY_PER_DIALOG}
    untouched = Measured({"first_token": 40.0}, {"first_token": 100})
    assert with_dialog_statistics(untouched, ["first_token"], None) == (untouched, None)


# --------------------------------------------------------------------------- the record

class ScriptedBench:
    """Dialogs of given (energy, window) in turn, the same on every unit: a hand-checkable A/B."""

    def __init__(self, dialogs: Sequence[tuple[float, float]]) -> None:
        self.dialogs, self.clock, self.i = list(dialogs), {u.name: 0.0 for u in UNITS}, {u.name: 0 for u in UNITS}

    def units(self) -> Sequence[Unit]:
        return UNITS

    def now(self, unit: str) -> float:
        return self.clock[unit]

    def install(self, unit: str, build: str) -> Installed:
        return Installed(build, 0.0)

    def segment(self, unit: str, metrics: Sequence[str]) -> Measured:
        e, w = self.dialogs[self.i[unit] % len(self.dialogs)]
        self.i[unit] += 1
        self.clock[unit] += 5.0
        return Measured({}, {}, (), dialog_raw([e], [w]))


def test_the_ab_record_keeps_raw_and_adjusted_values_and_the_reference():
    bench = ScriptedBench([(10.0, 2.5), (16.0, 4.0), (8.0, 2.0), (12.0, 3.0)])  # every dialog at 4 W
    result = run_ab(bench, "A", "B", metrics=[ENERGY_PER_DIALOG], plan=plan_for([ENERGY_PER_DIALOG], ["m"], last=3))
    assert result.reference_s == {"u1": 2.5, "u2": 2.5}
    first = result.segments[0]
    assert first.values[ENERGY_PER_DIALOG] == pytest.approx(10.0)
    assert all(s.values[ENERGY_PER_DIALOG] == pytest.approx(10.0) for s in result.segments)  # 4 W x 2.5 s
    assert [s.raw[ENERGY_J] for s in result.segments[:4]] == [10.0, 16.0, 8.0, 12.0]
    assert [s.raw[WINDOW_S] for s in result.segments[:4]] == [2.5, 4.0, 2.0, 3.0]
    record = result.to_dict()
    assert record["reference_dialog_s"] == {"u1": 2.5, "u2": 2.5}
    assert record["segments"][1]["raw"] == {DIALOGS: 1.0, ENERGY_J: 16.0, WINDOW_S: 4.0}
    assert record["segments"][1]["values"] == {ENERGY_PER_DIALOG: pytest.approx(10.0)}
    assert result.gate(ENERGY_PER_DIALOG, "m").call == NO_CHANGE


# --------------------------------------------------------------------------- the calls

def _ab(b: PlantedBuild, seed: int, metrics: Sequence[str] = DIALOG_GATES):
    bench = SimulatedBench([PlantedBuild("A"), b], UNITS, NOISE, np.random.default_rng(seed))
    return run_ab(bench, "A", "B", metrics=metrics, plan=plan_for(metrics, ["m"]))


def test_identical_builds_the_adjusted_statistic_does_not_call():
    calls = [_ab(PlantedBuild("B"), seed).gate(ENERGY_PER_DIALOG, "m").call for seed in range(20)]
    assert calls == [NO_CHANGE] * 20  # the dialogs' length scatters ~15 %; at a fixed length it is gone


def test_three_percent_more_power_in_dialogs_is_called_regressed():
    b = PlantedBuild("B", {"m": {ENERGY_PER_DIALOG: 1.03}})
    results = [_ab(b, seed, [ENERGY_PER_DIALOG]) for seed in range(10)]
    assert all(r.gate(ENERGY_PER_DIALOG, "m").call == REGRESSED for r in results)
    assert all(r.gate(ENERGY_PER_DIALOG, "m").look == 3 for r in results)  # at the first look
    assert all(r.gate(ENERGY_PER_DIALOG, "m").change == pytest.approx(0.03, abs=0.003) for r in results)


def test_longer_dialogs_at_the_same_power_are_dialog_lengths_not_hidden():
    longer = PlantedBuild("B", {"m": {DIALOG_LENGTH: 2.0}})  # dialogs twice as long, the same power
    result = _ab(longer, 7)
    assert result.gate(ENERGY_PER_DIALOG, "m").call == NO_CHANGE  # energy at a fixed length: unchanged
    assert result.gate(DIALOG_LENGTH, "m").call == REGRESSED
    assert result.gate(DIALOG_LENGTH, "m").change == pytest.approx(1.0, abs=0.3)
    raw_b = np.mean([s.raw[ENERGY_J] for s in result.segments if s.side == "B"])
    raw_a = np.mean([s.raw[ENERGY_J] for s in result.segments if s.side == "A"])
    assert raw_b / raw_a == pytest.approx(2.0, rel=0.3)  # the raw energy in the record shows it
    text = "\n".join(ab_text(result))
    assert "energy_per_dialog is the energy of a dialog of fixed length" in text
    assert "a change of dialog length is dialog_length's" in text


def test_energy_alone_shows_the_length_change_beside_it():
    result = _ab(PlantedBuild("B", {"m": {DIALOG_LENGTH: 2.0}}), 7, [ENERGY_PER_DIALOG])
    assert [g.metric for g in result.gates] == [ENERGY_PER_DIALOG]
    text = "\n".join(ab_text(result, {("m", DIALOG_LENGTH): 0.3}))
    line = next(x for x in text.splitlines() if x.strip().startswith("dialog_length"))
    assert "measured, not decided" in line and "--metric dialog_length" in line and "detects 30.0 %" in line
    assert float(line.split()[1]) > 60.0  # +100 % in truth: never silently hidden


def test_energy_per_dialog_is_a_default_gate_and_dialog_length_is_asked_for():
    assert ENERGY_PER_DIALOG in DEFAULT_METRICS and DIALOG_LENGTH not in DEFAULT_METRICS
    assert GATES[DIALOG_LENGTH].part == GATES[ENERGY_PER_DIALOG].part == "dialogs"  # the same dialogs


# --------------------------------------------------------------------------- the emulated build's knob

def test_a_speak_power_build_draws_more_only_while_speaking():
    data = write_artefact("llmrt x-emu", Behaviour(speak_power=1.04))
    assert read_artefact(data).manifest.behaviour.speak_power == 1.04
    assert behaviour_at(2, {1: {"speak_power": 1.02}, 2: {"speak_power": 1.02}})[0].speak_power == pytest.approx(1.0404)
    world = World(seed=3)
    before = {p: world.phase_power_w(p) for p in ("speak", "decode", "prefill", "audio")}
    world.build_speak_power = 1.1
    after = {p: world.phase_power_w(p) for p in before}
    assert after["speak"] > before["speak"] * 1.05
    assert {p: after[p] for p in ("decode", "prefill", "audio")} == {p: before[p] for p in ("decode", "prefill", "audio")}
    with pytest.raises(Exception, match="speak_power"):
        parse_manifest(b'format = "llmrt-build/1"\nversion = "v"\n[behaviour]\nspeak_power = 9.0\n')
