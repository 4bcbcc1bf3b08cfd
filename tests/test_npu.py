"""The emulated NPU's accumulator semantics against a plain sequential reference."""
from __future__ import annotations

import numpy as np
from pathlib import Path

import pytest

from phonebench.emulation.npu import Accumulator, Int4Matrix, OverflowRule, RunVector, dot_runs, matmul, reduce_rows

RULES = list(OverflowRule)


def sequential(products, acc: Accumulator | None) -> int:
    """The definition: add products one at a time in index order."""
    total = 0
    for p in products:
        total += int(p)
        if acc is not None and acc.rule is OverflowRule.SATURATE:
            total = min(max(total, acc.lo), acc.hi)
    if acc is None:
        return total
    if acc.rule is OverflowRule.WRAP:
        return ((total - acc.lo) % (1 << acc.bits)) + acc.lo
    if acc.rule is OverflowRule.CLAMP_END:
        return min(max(total, acc.lo), acc.hi)
    return total


def tiled_sequential(products, acc, tile) -> int:
    return sum(sequential(products[s:s + tile], acc) for s in range(0, len(products), tile))


def _operands(rng, m, k, n, bias):
    x = np.clip(rng.integers(-8, 8, (m, k)) + bias, -8, 7)
    w = np.clip(rng.integers(-8, 8, (k, n)) + bias, -8, 7)
    return x, w


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("bits", [12, 16])
def test_matmul_matches_sequential_definition(rule, bits):
    rng = np.random.default_rng(bits)
    acc = Accumulator(bits, rule)
    for _ in range(12):
        k = int(rng.integers(1, 2500))
        x, w = _operands(rng, 3, k, 4, int(rng.integers(-4, 4)))
        got = matmul(x, Int4Matrix(w), acc)
        want = [[sequential(x[i] * w[:, j], acc) for j in range(4)] for i in range(3)]
        assert got.tolist() == want


@pytest.mark.parametrize("rule", RULES)
def test_tiled_matmul_sums_tile_partials_wide(rule):
    rng = np.random.default_rng(7)
    acc = Accumulator(14, rule)
    for _ in range(12):
        k, tile = int(rng.integers(2, 3000)), int(rng.integers(1, 900))
        x, w = _operands(rng, 2, k, 3, 3)
        got = matmul(x, Int4Matrix(w), acc, tile=tile)
        want = [[tiled_sequential(x[i] * w[:, j], acc, tile) for j in range(3)] for i in range(2)]
        assert got.tolist() == want


def test_golden_is_exact_and_wide():
    rng = np.random.default_rng(3)
    x, w = _operands(rng, 4, 20000, 5, 4)
    assert matmul(x, Int4Matrix(w)).tolist() == (x.astype(np.int64) @ w.astype(np.int64)).tolist()


def test_overflow_changes_results_and_a_safe_tile_removes_it():
    x = np.full((1, 1024), -8)
    w = Int4Matrix(np.full((1024, 1), -8))  # 1024 x 64 = 65536: beyond 16 bits
    exact = 65536
    assert matmul(x, w, Accumulator(16, "wrap"))[0, 0] == 0
    assert matmul(x, w, Accumulator(16, "saturate-each-step"))[0, 0] == 32767
    assert matmul(x, w, Accumulator(16, "clamp-at-end"))[0, 0] == 32767
    for rule in RULES:
        acc = Accumulator(16, rule)
        assert matmul(x, w, acc, tile=acc.safe_tile())[0, 0] == exact
        # A tile too long for the register is no protection (negative control).
        assert matmul(x, w, acc, tile=1024)[0, 0] != exact


def test_field_notes_order_dependent_probe():
    """600 x (+64) then 200 x (-56) at 16 bits: per-step saturation 21567, the rest 27200;
    reversed order 27200 for all."""
    a = RunVector(np.array([-8, -8]), np.array([600, 200]))
    b = RunVector(np.array([-8, 7]), np.array([600, 200]))
    rev_a = RunVector(np.array([-8, -8]), np.array([200, 600]))
    rev_b = RunVector(np.array([7, -8]), np.array([200, 600]))
    assert dot_runs(a, b, Accumulator(16, "saturate-each-step")) == 21567
    for rule in ("wrap", "clamp-at-end"):
        assert dot_runs(a, b, Accumulator(16, rule)) == 27200
    for rule in RULES:
        assert dot_runs(rev_a, rev_b, Accumulator(16, rule)) == 27200


@pytest.mark.parametrize("rule", RULES)
def test_run_vectors_match_dense_vectors(rule):
    rng = np.random.default_rng(11)
    acc = Accumulator(13, rule)
    for _ in range(20):
        runs = int(rng.integers(1, 12))
        a = RunVector(rng.integers(-8, 8, runs), rng.integers(1, 400, runs))
        perm = rng.permutation(a.length)
        b_dense = np.clip(rng.integers(-8, 8, a.length) + 2, -8, 7)[perm]
        b = RunVector(b_dense, np.ones(a.length, dtype=np.int64))
        products = a.dense() * b_dense
        assert dot_runs(a, b, acc) == sequential(products, acc)
        tile = int(rng.integers(1, 300))
        assert dot_runs(a, b, acc, tile=tile) == tiled_sequential(products, acc, tile)


def test_long_runs_are_cheap_and_exact():
    """A 2^25 + 1 term probe (the 32-bit width probe) runs as one run."""
    a = RunVector(np.array([-8]), np.array([(1 << 25) + 1]))
    assert dot_runs(a, a, None) == (1 << 31) + 64
    assert dot_runs(a, a, Accumulator(32, "wrap")) == -(1 << 31) + 64
    assert dot_runs(a, a, Accumulator(32, "saturate-each-step")) == (1 << 31) - 1
    assert dot_runs(a, a, Accumulator(32, "saturate-each-step"), tile=1 << 16) == (1 << 31) + 64


def test_reduce_rows_with_counts():
    values = np.array([[64, -56, 64]])
    counts = np.array([[600, 200, 1]])
    assert reduce_rows(values, Accumulator(16, "saturate-each-step"), counts)[0] == 32767 - 11200 + 64


def test_invalid_inputs_are_rejected():
    with pytest.raises(ValueError):
        Accumulator(4, "wrap")
    with pytest.raises(ValueError):
        Accumulator(16, "round-to-even")
    with pytest.raises(ValueError):
        Int4Matrix(np.array([[8]]))
    with pytest.raises(ValueError):
        matmul(np.zeros((1, 3)), Int4Matrix(np.zeros((4, 1))), Accumulator(16, "wrap"))
    with pytest.raises(ValueError):
        RunVector(np.array([1]), np.array([0]))
    with pytest.raises(ValueError):
        dot_runs(RunVector(np.array([1]), np.array([3])), RunVector(np.array([1]), np.array([4])), None)


def test_persona_catalogue_covers_the_claim():
    from phonebench.emulation.npu_personas import PERSONAS

    regular = [p for p in PERSONAS.values() if not p.note]
    socs = {p.soc.model: p.soc.vendor for p in regular}
    assert len(socs) >= 12 and set(socs.values()) == {"Qualcomm", "MediaTek", "HiSilicon"}
    for model in socs:
        assert {p.stage for p in regular if p.soc.model == model} == {"ES", "MP"}
    assert all(p.accumulator.rule is OverflowRule.WRAP for p in regular if p.stage == "ES")
    assert {p.accumulator.rule for p in regular} == set(OverflowRule)
    assert min(p.accumulator.bits for p in regular) == 16 and max(p.accumulator.bits for p in regular) == 32
    assert len({p.microcode for p in regular}) == len(regular)  # every build reports its own string
    liars = [p for p in PERSONAS.values() if p.note and any(p.microcode == q.microcode for q in regular)]
    claimed = {p.name: next(q for q in regular if q.microcode == p.microcode) for p in liars}
    # A liar behaves unlike the build it claims: its overflow rule, or (relabelled) its die's speed.
    assert liars and all(p.accumulator != claimed[p.name].accumulator
                         or p.die.npu_gmac_per_s != claimed[p.name].die.npu_gmac_per_s for p in liars)
    relabelled = PERSONAS["SM8650-ES-RELABEL"]
    assert relabelled.accumulator == claimed[relabelled.name].accumulator and relabelled.die.model == "MT6989"


def test_phone_spec_and_default_fleet():
    from phonebench.core.errors import ConfigError
    from phonebench.emulation.npu_personas import default_fleet, phone_spec

    spec = phone_spec("MT6991-MP", "S1", seed=4)
    assert (spec.soc_manufacturer, spec.soc_model, spec.board_platform, spec.npu_persona, spec.seed) == \
        ("Mediatek", "MT6991", "mt6991", "MT6991-MP", 4)
    fleet = [s.npu_persona for s in default_fleet()]
    assert fleet[0] == "SM8650-MP" and {"SM8650-ES", "MT6989-MP", "MT6991-MP"} <= set(fleet)
    assert "SM8650-MP2" not in fleet  # an untrusted build streams tokens that are not the model's
    assert "MT6989-ES-RELABEL" not in fleet  # the default fleet is healthy: `make run` is green
    from phonebench.core.station import load_station

    showcase = load_station(Path(__file__).resolve().parent / "data" / "stations" / "relabelled-fleet.toml")
    assert {p.npu_persona for p in showcase.emulated.phones} >= {"SM8650-MP2", "MT6989-ES-RELABEL", "SM8650-ES-RELABEL"}
    assert {p.expected_soc for p in showcase.emulated.phones if p.npu_persona == "SM8650-ES-RELABEL"} == {"MT6989"}
    with pytest.raises(ConfigError, match="unknown NPU persona 'SM0000'"):
        phone_spec("SM0000", "S1")
