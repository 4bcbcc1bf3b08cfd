"""Golden token references: what a model must generate, computed off the phone with exact (wide)
accumulation and shipped as data (suites/data/golden/*.json), found by model name and digest.

A lab adds a file per model it tests: {"model", "model_sha256", "max_tokens", "cases": [{"seed",
"prompt", "golden"}]}. The bench never asks the phone for its own reference.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from phonebench.core.errors import ConfigError
from phonebench.core.paths import data_dir

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GoldenCase:
    seed: int
    prompt: tuple[int, ...]
    golden: tuple[int, ...]


@dataclass(frozen=True)
class GoldenReference:
    model: str
    model_sha256: str
    max_tokens: int
    cases: tuple[GoldenCase, ...]
    source: Path


def golden_folder() -> Path:
    return data_dir("suites") / "data" / "golden"


def load_reference(path: Path) -> GoldenReference:
    try:
        doc = json.loads(path.read_bytes().decode("utf-8"))
        cases = tuple(GoldenCase(int(c["seed"]), tuple(int(t) for t in c["prompt"]), tuple(int(t) for t in c["golden"]))
                      for c in doc["cases"])
        return GoldenReference(str(doc["model"]), str(doc["model_sha256"]), int(doc["max_tokens"]), cases, path)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"golden reference {path}: unreadable ({type(exc).__name__}: {exc})",
                          hint="a reference file is JSON with model, model_sha256, max_tokens and cases "
                               "[{seed, prompt, golden}]") from None


def find_reference(model: str, model_sha256: str, folders: tuple[Path, ...] = ()) -> GoldenReference | None:
    """The reference for exactly this model build (name and weights digest), or None."""
    for folder in (*folders, golden_folder()):
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
            ref = load_reference(path)
            if ref.model == model and ref.model_sha256 == model_sha256:
                return ref
    return None
