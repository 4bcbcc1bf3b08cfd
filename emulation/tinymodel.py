"""A small INT4-quantised transformer in numpy: the model the emulated runtime really runs.

Deterministic weights from a seed; every INT4 linear layer (attention projections, MLP, LM head)
goes through an NPU matmul, so a narrow accumulator really changes the tokens. Attention itself
runs in floating point, as on real NPUs (FP16 there). The golden reference is the same model
with exact wide accumulation (`npu_matmul=None`).

Shapes are chosen for the numerics, not for language: the residual stream is narrow (fast), but
the MLP reduces over 16384 hidden units, the reduction length of a real ~30B model's MLP. Hidden
activations are statically quantised so most sit at the INT4 edge (7), and a few output channels
are outlier features with same-signed weights, as real LLMs have. Their partial sums reach
~540 000 (just over 2^19): beyond 16-20 bit accumulators, far inside int32 (tests/test_tinymodel.py).
"""
from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import numpy as np

from .npu import INT4_MAX, INT4_MIN, Int4Matrix, matmul

log = logging.getLogger(__name__)

# (activation codes M x K, weights) -> int64 accumulator results M x N
NpuMatmul = Callable[[np.ndarray, Int4Matrix], np.ndarray]

MODEL_NAME = "phonebench-tiny-int4"


@dataclass(frozen=True)
class ModelConfig:
    vocab: int = 512
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ffn: int = 16384
    max_seq: int = 256
    outlier_channels: tuple[int, ...] = (5, 37)
    hidden_saturation: float = 0.72  # share of active hidden units quantised to the INT4 edge
    outlier_gain: float = 4.0  # outlier ("massive activation") channels' size in the residual stream
    seed: int = 20260611


@dataclass
class _Linear:
    weight: Int4Matrix
    scale: np.ndarray  # per output channel


def _quantize_columns(w: np.ndarray) -> _Linear:
    scale = np.abs(w).max(axis=0) / INT4_MAX
    scale[scale == 0] = 1.0
    codes = np.clip(np.rint(w / scale), INT4_MIN, INT4_MAX)
    return _Linear(Int4Matrix(codes), scale)


def _rmsnorm(x: np.ndarray) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-6)


def _quantize_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dynamic per-token INT4 quantisation (abs-max to 7)."""
    scale = np.abs(x).max(axis=-1, keepdims=True) / INT4_MAX
    scale[scale == 0] = 1.0
    return np.clip(np.rint(x / scale), INT4_MIN, INT4_MAX).astype(np.int8), scale


class TinyModel:
    def __init__(self, config: ModelConfig = ModelConfig()) -> None:
        self.config = c = config
        rng = np.random.default_rng(c.seed)
        d, f = c.d_model, c.d_ffn
        self.embedding = rng.normal(0.0, 1.0, (c.vocab, d))
        self.positions = rng.normal(0.0, 0.3, (c.max_seq, d))
        self.layers = []
        for _ in range(c.n_layers):
            layer = {name: _quantize_columns(rng.normal(0.0, d ** -0.5, (d, d))) for name in ("q", "k", "v", "o")}
            layer["up"] = _quantize_columns(rng.normal(0.0, d ** -0.5, (d, f)))
            layer["up_bias"] = rng.normal(0.9, 0.6, f)
            down = rng.normal(0.0, 1.0, (f, d))
            down[:, list(c.outlier_channels)] = rng.uniform(0.93, 1.0, (f, len(c.outlier_channels)))
            layer["down"] = _quantize_columns(down)
            self.layers.append(layer)
        self.lm_head = _quantize_columns(rng.normal(0.0, d ** -0.5, (d, c.vocab)))
        self._calibrate(rng)
        self.sha256 = self._digest()

    # --- construction -------------------------------------------------------------------
    def _calibrate(self, rng: np.random.Generator) -> None:
        """Static hidden-activation scales and down-projection output scales, from sample tokens."""
        tokens = rng.integers(0, self.config.vocab, 48)
        x = self.embedding[tokens] + self.positions[: tokens.size]
        for layer in self.layers:
            up = self._linear(_rmsnorm(x), layer["up"], None) + layer["up_bias"]
            active = up[up > 0]
            layer["hidden_scale"] = float(np.quantile(active, 1.0 - self.config.hidden_saturation)) / INT4_MAX
            hidden = self._hidden_codes(up, layer)
            acc = matmul(hidden, layer["down"].weight).astype(np.float64)
            # Outputs of a unit-ish magnitude; outlier channels keep their integer size on the NPU.
            layer["down_scale"] = 1.0 / np.maximum(np.abs(acc).mean(axis=0), 1.0)
            layer["down_scale"][list(self.config.outlier_channels)] *= self.config.outlier_gain
            x = x + acc * layer["down_scale"]

    def _digest(self) -> str:
        h = hashlib.sha256(repr(self.config).encode())
        for layer in self.layers:
            for name in ("q", "k", "v", "o", "up", "down"):
                h.update(layer[name].weight.codes.tobytes())
        h.update(self.lm_head.weight.codes.tobytes())
        return h.hexdigest()

    # --- compute ------------------------------------------------------------------------
    @staticmethod
    def _linear(x: np.ndarray, lin: _Linear, npu_matmul: NpuMatmul | None) -> np.ndarray:
        codes, scale = _quantize_rows(x)
        acc = npu_matmul(codes, lin.weight) if npu_matmul else matmul(codes, lin.weight)
        return acc * scale * lin.scale

    @staticmethod
    def _hidden_codes(up: np.ndarray, layer: dict) -> np.ndarray:
        return np.clip(np.rint(np.maximum(up, 0.0) / layer["hidden_scale"]), 0, INT4_MAX).astype(np.int8)

    def _forward(self, tokens: np.ndarray, start: int, cache: list[dict], npu_matmul: NpuMatmul | None) -> np.ndarray:
        """Logits of the last position, extending each layer's KV cache."""
        c = self.config
        heads, hd = c.n_heads, c.d_model // c.n_heads
        x = self.embedding[tokens] + self.positions[start:start + tokens.size]
        for layer, kv in zip(self.layers, cache):
            h = _rmsnorm(x)
            q, k, v = (self._linear(h, layer[n], npu_matmul) for n in ("q", "k", "v"))
            kv["k"] = np.concatenate([kv["k"], k]) if "k" in kv else k
            kv["v"] = np.concatenate([kv["v"], v]) if "v" in kv else v
            total = kv["k"].shape[0]
            qh = q.reshape(-1, heads, hd).transpose(1, 0, 2)
            kh = kv["k"].reshape(total, heads, hd).transpose(1, 0, 2)
            vh = kv["v"].reshape(total, heads, hd).transpose(1, 0, 2)
            scores = qh @ kh.transpose(0, 2, 1) / np.sqrt(hd)
            causal = np.arange(total)[None, :] > (start + np.arange(tokens.size))[:, None]
            scores = np.where(causal[None], -np.inf, scores)
            weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
            weights /= weights.sum(axis=-1, keepdims=True)
            attn = (weights @ vh).transpose(1, 0, 2).reshape(tokens.size, c.d_model)
            x = x + self._linear(attn, layer["o"], npu_matmul)
            up = self._linear(_rmsnorm(x), layer["up"], npu_matmul) + layer["up_bias"]
            hidden = self._hidden_codes(up, layer)
            acc = npu_matmul(hidden, layer["down"].weight) if npu_matmul else matmul(hidden, layer["down"].weight)
            x = x + acc * layer["down_scale"]
        return self._linear(_rmsnorm(x[-1:]), self.lm_head, npu_matmul)[0]

    def stream(self, prompt: Sequence[int], max_tokens: int, seed: int = 0, temperature: float = 0.7,
               npu_matmul: NpuMatmul | None = None) -> Iterator[int]:
        """Yield generated token ids: one prefill over the prompt, then one decode step per token."""
        c = self.config
        prompt = np.asarray(prompt, dtype=np.int64)
        if prompt.size == 0 or prompt.min() < 0 or prompt.max() >= c.vocab:
            raise ValueError(f"prompt must be 1+ token ids in [0, {c.vocab})")
        if prompt.size + max_tokens > c.max_seq:
            raise ValueError(f"prompt + max_tokens exceeds the context of {c.max_seq}")
        rng = np.random.default_rng(seed)
        cache: list[dict] = [{} for _ in self.layers]
        logits = self._forward(prompt, 0, cache, npu_matmul)
        position = prompt.size
        for _ in range(max_tokens):
            noise = rng.gumbel(size=c.vocab)  # drawn every step so sampling stays aligned across runs
            token = int(np.argmax(logits / temperature + noise)) if temperature > 0 else int(np.argmax(logits))
            yield token
            logits = self._forward(np.array([token]), position, cache, npu_matmul)
            position += 1

    def generate(self, prompt: Sequence[int], max_tokens: int, seed: int = 0, temperature: float = 0.7,
                 npu_matmul: NpuMatmul | None = None) -> list[int]:
        return list(self.stream(prompt, max_tokens, seed, temperature, npu_matmul))


def prompt_tokens(n: int, seed: int, vocab: int = ModelConfig.vocab) -> list[int]:
    """The deterministic prompt a runtime uses for `generate --prompt-tokens n --seed s`."""
    return [int(t) for t in np.random.default_rng([seed, 0x9E3779B9]).integers(0, vocab, n)]


_MODELS: dict[ModelConfig, TinyModel] = {}


def shared_model(config: ModelConfig = ModelConfig()) -> TinyModel:
    """One model instance per config per process (building one takes ~0.1 s)."""
    if config not in _MODELS:
        _MODELS[config] = TinyModel(config)
    return _MODELS[config]


def golden_tokens(prompt: Sequence[int], max_tokens: int, seed: int = 0, temperature: float = 0.7) -> list[int]:
    """The golden reference: the shared model with exact wide accumulation."""
    return shared_model().generate(prompt, max_tokens, seed, temperature)
