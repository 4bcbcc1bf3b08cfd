"""The tiny INT4 model: deterministic, overflow-prone only where accumulators are narrow, and
bit-exact with the golden reference through a safe tiling."""
from __future__ import annotations

import numpy as np
import pytest

from phonebench.emulation.npu import Accumulator, matmul
from phonebench.emulation.npu_personas import PERSONAS
from phonebench.emulation.tinymodel import ModelConfig, TinyModel, _rmsnorm, golden_tokens, prompt_tokens, shared_model

PROMPT = prompt_tokens(12, 1)
TOKENS = 24
SIGNATURES = sorted({(p.accumulator.bits, p.accumulator.rule.value) for p in PERSONAS.values()})


@pytest.fixture(scope="module")
def model() -> TinyModel:
    return shared_model()


@pytest.fixture(scope="module")
def golden(model) -> list[int]:
    return model.generate(PROMPT, TOKENS, seed=1)


def _run(model, acc: Accumulator, tile: int | None = None) -> list[int]:
    return model.generate(PROMPT, TOKENS, seed=1, npu_matmul=lambda x, w: matmul(x, w, acc, tile))


def _diverges(model, golden, acc: Accumulator, tile: int | None = None) -> bool:
    """Stream tokens and stop at the first one that differs from the golden reference."""
    stream = model.stream(PROMPT, TOKENS, seed=1, npu_matmul=lambda x, w: matmul(x, w, acc, tile))
    return any(token != want for token, want in zip(stream, golden))


def test_weights_and_tokens_are_deterministic(model, golden):
    again = TinyModel()
    assert again.sha256 == model.sha256
    assert again.generate(PROMPT, TOKENS, seed=1) == golden
    assert golden_tokens(PROMPT, TOKENS, seed=1) == golden
    assert TinyModel(ModelConfig(seed=1, d_ffn=512)).sha256 != TinyModel(ModelConfig(seed=2, d_ffn=512)).sha256
    assert len(set(golden)) > 5  # not stuck on one token


def test_mlp_partial_sums_overflow_narrow_but_never_int32(model):
    """The realistic layer: the 16384-long MLP reduction reaches beyond 2^19 (20-bit range) on
    outlier channels, stays inside 2^23 (24 bits), and 64 x K can never reach 2^31."""
    tokens = np.array(PROMPT)
    x = model.embedding[tokens] + model.positions[: tokens.size]
    layer = model.layers[0]
    up = model._linear(_rmsnorm(x), layer["up"], None) + layer["up_bias"]
    hidden = model._hidden_codes(up, layer)
    assert (hidden == 7).mean() > 0.4  # activations sit at the INT4 edge
    outliers = list(model.config.outlier_channels)
    products = hidden[:, :, None].astype(np.int64) * layer["down"].weight.codes[:, outliers][None]
    running = np.abs(np.cumsum(products, axis=1)).max()
    assert (1 << 19) < running < (1 << 23)
    assert 64 * model.config.d_ffn < (1 << 31)
    others = np.delete(matmul(hidden, layer["down"].weight), outliers, axis=1)
    assert np.abs(others).max() < (1 << 15)  # ordinary channels fit even 16 bits


@pytest.mark.parametrize("bits,rule", SIGNATURES, ids=[f"{b}-{r}" for b, r in SIGNATURES])
def test_every_persona_signature_against_golden(model, golden, bits, rule):
    acc = Accumulator(bits, rule)
    if bits <= 20:
        assert _diverges(model, golden, acc), "a narrow accumulator must change the tokens (negative control)"
    else:
        assert _run(model, acc) == golden, "24 and 32-bit accumulators never overflow this model"
    assert _run(model, acc, tile=acc.safe_tile()) == golden


def test_a_tile_too_long_for_the_register_is_no_adapter(model, golden):
    acc = Accumulator(16, "wrap")
    assert _diverges(model, golden, acc, tile=4 * acc.safe_tile())


def test_bad_prompts_are_rejected(model):
    with pytest.raises(ValueError):
        model.generate([], 4)
    with pytest.raises(ValueError):
        model.generate([model.config.vocab], 4)
    with pytest.raises(ValueError):
        model.generate([1] * 10, model.config.max_seq)
