"""The bench's own implementation of the model the phones serve, for references on fresh prompts.

Golden files (phonebench.bench.specs.references) cover fixed prompts; a phone that has seen them can replay them.
Token checks draw prompts and seeds per run, so the bench computes each reference itself: this
module is an independent implementation of the published model (phonebench-tiny-int4: weights
from its seed, INT4 linear layers, exact wide accumulation), sharing no code with any phone.
`tests/test_reference_model.py` holds it to the shipped golden file.

A model the bench has no implementation of has no reference: a check then cannot tell the
model's tokens from invented ones, and says so.
"""
from __future__ import annotations

import hashlib
import logging
import secrets
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np

log = logging.getLogger(__name__)

MODEL_NAME = "phonebench-tiny-int4"
_Q = 7  # INT4 code range [-8, 7]; abs-max quantisation maps to 7


@dataclass(frozen=True)
class ModelConfig:  # field names and order are the published config; its repr enters the digest
    vocab: int = 512
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ffn: int = 16384
    max_seq: int = 256
    outlier_channels: tuple[int, ...] = (5, 37)
    hidden_saturation: float = 0.72
    outlier_gain: float = 4.0
    seed: int = 20260611


def _quantised_columns(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(INT4 codes held as float32, ready for exact BLAS; per-column scale)."""
    scale = np.abs(w).max(axis=0) / _Q
    scale[scale == 0] = 1.0
    return np.clip(np.rint(w / scale), -8, _Q).astype(np.float32), scale


def _rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    scale = np.abs(x).max(axis=-1, keepdims=True) / _Q
    scale[scale == 0] = 1.0
    return np.clip(np.rint(x / scale), -8, _Q), scale


def _norm(x: np.ndarray) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-6)


def _exact(codes: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Integer dot products, exact: every partial sum of INT4 products over at most 16384 terms
    stays below 2^24, which float32 holds exactly (in any summation order)."""
    return (codes.astype(np.float32) @ weights).astype(np.float64)


class ReferenceModel:
    """The model with exact accumulation: what a correct phone streams for a prompt and seed."""

    name = MODEL_NAME

    def __init__(self, config: ModelConfig = ModelConfig()) -> None:
        self.config = c = config
        rng = np.random.default_rng(c.seed)
        d, f = c.d_model, c.d_ffn
        self.embedding = rng.normal(0.0, 1.0, (c.vocab, d))
        self.positions = rng.normal(0.0, 0.3, (c.max_seq, d))
        self.layers: list[dict] = []
        for _ in range(c.n_layers):
            layer: dict = {n: _quantised_columns(rng.normal(0.0, d ** -0.5, (d, d))) for n in ("q", "k", "v", "o")}
            layer["up"] = _quantised_columns(rng.normal(0.0, d ** -0.5, (d, f)))
            layer["up_bias"] = rng.normal(0.9, 0.6, f)
            down = rng.normal(0.0, 1.0, (f, d))
            down[:, list(c.outlier_channels)] = rng.uniform(0.93, 1.0, (f, len(c.outlier_channels)))
            layer["down"] = _quantised_columns(down)
            self.layers.append(layer)
        self.lm_head = _quantised_columns(rng.normal(0.0, d ** -0.5, (d, c.vocab)))
        self._calibrate(rng)
        self.sha256 = self._digest()
        self._streams: dict[tuple, list[int]] = {}

    def _calibrate(self, rng: np.random.Generator) -> None:
        tokens = rng.integers(0, self.config.vocab, 48)
        x = self.embedding[tokens] + self.positions[: tokens.size]
        for layer in self.layers:
            up = self._linear(_norm(x), layer["up"]) + layer["up_bias"]
            layer["hidden_scale"] = float(np.quantile(up[up > 0], 1.0 - self.config.hidden_saturation)) / _Q
            acc = _exact(self._hidden(up, layer), layer["down"][0])
            layer["down_scale"] = 1.0 / np.maximum(np.abs(acc).mean(axis=0), 1.0)
            layer["down_scale"][list(self.config.outlier_channels)] *= self.config.outlier_gain
            x = x + acc * layer["down_scale"]

    def _digest(self) -> str:
        h = hashlib.sha256(repr(self.config).encode())
        for layer in self.layers:
            for name in ("q", "k", "v", "o", "up", "down"):
                h.update(layer[name][0].astype(np.int8).tobytes())
        h.update(self.lm_head[0].astype(np.int8).tobytes())
        return h.hexdigest()

    @staticmethod
    def _linear(x: np.ndarray, lin: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        codes, scale = _rows(x)
        return _exact(codes, lin[0]) * scale * lin[1]

    @staticmethod
    def _hidden(up: np.ndarray, layer: dict) -> np.ndarray:
        return np.clip(np.rint(np.maximum(up, 0.0) / layer["hidden_scale"]), 0, _Q)

    def _forward(self, tokens: np.ndarray, start: int, cache: list[dict]) -> np.ndarray:
        c = self.config
        heads, hd = c.n_heads, c.d_model // c.n_heads
        x = self.embedding[tokens] + self.positions[start:start + tokens.size]
        for layer, kv in zip(self.layers, cache):
            h = _norm(x)
            q, k, v = (self._linear(h, layer[n]) for n in ("q", "k", "v"))
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
            x = x + self._linear((weights @ vh).transpose(1, 0, 2).reshape(tokens.size, c.d_model), layer["o"])
            up = self._linear(_norm(x), layer["up"]) + layer["up_bias"]
            x = x + _exact(self._hidden(up, layer), layer["down"][0]) * layer["down_scale"]
        return self._linear(_norm(x[-1:]), self.lm_head)[0]

    def tokens(self, prompt: Sequence[int], max_tokens: int, seed: int, temperature: float = 0.7) -> list[int]:
        """The model's answer: one prefill, then one sampled token per step (Gumbel noise from the seed,
        drawn every step). Kept per (prompt, seed, temperature), extended when asked for more."""
        key = (tuple(int(t) for t in prompt), int(seed), float(temperature))
        known = self._streams.get(key, [])
        if len(known) >= max_tokens:
            return known[:max_tokens]
        c = self.config
        rng = np.random.default_rng(seed)
        cache: list[dict] = [{} for _ in self.layers]
        logits = self._forward(np.asarray(key[0], dtype=np.int64), 0, cache)
        out: list[int] = []
        for position in range(len(key[0]), len(key[0]) + max_tokens):
            noise = rng.gumbel(size=c.vocab)
            token = int(np.argmax(logits / temperature + noise)) if temperature > 0 else int(np.argmax(logits))
            out.append(token)
            if len(out) < max_tokens:
                logits = self._forward(np.array([token]), position, cache)
        self._streams[key] = out
        return out


@lru_cache(maxsize=1)
def reference_model() -> ReferenceModel:
    return ReferenceModel()


def reference_for(model: str, model_sha256: str | None) -> ReferenceModel | None:
    """The bench's implementation of exactly this model build, or None (no reference)."""
    if model != MODEL_NAME:
        return None
    ref = reference_model()
    return ref if model_sha256 == ref.sha256 else None


@dataclass(frozen=True)
class PromptCase:
    """A prompt and sampling seed drawn for one run: recorded, never reused across runs."""

    prompt: tuple[int, ...]
    seed: int

    def as_dict(self) -> dict[str, object]:
        return {"prompt": list(self.prompt), "seed": self.seed}


def fresh_cases(n: int, prompt_tokens: int, vocab: int = ModelConfig.vocab,
                rng: np.random.Generator | None = None) -> list[PromptCase]:
    """n prompts and seeds from the operating system's entropy (unless a generator is given), so no
    phone can have seen them before the run."""
    rng = rng or np.random.default_rng(secrets.randbits(128))
    return [PromptCase(tuple(int(t) for t in rng.integers(0, vocab, prompt_tokens)), int(rng.integers(0, 2**31 - 1)))
            for _ in range(n)]
