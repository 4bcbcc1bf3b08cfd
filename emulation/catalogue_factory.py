"""Build catalogues of emulated runtime builds for tests and benchmarks, as a lab's build system
would fill one (docs/builds.md): a catalogue.toml and an artefact per build.

    write_catalogue(folder, n_builds=32, culprits={17: {"npu_time": 1.06, "models": ["SM8650"]}},
                    broken={5: "missing-artefact", 9: "crash-on-start"})

Positions count from 0, oldest first. A culprit is the build that introduced a change: it and
every later build carry it (changes multiply), on the named product or SoC models only when
`models` is given. A broken build carries the changes before it too, but cannot be installed:
"missing-artefact" (listed, never built), "bad-signature" (signed with a key the phone does not
trust), "crash-on-start", "disk-full" (it needs more room than a phone has), "digest-mismatch"
(the catalogue's digest is not the artefact's).
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from .build_artefact import Behaviour, write_artefact

BROKEN_KINDS = ("missing-artefact", "bad-signature", "crash-on-start", "disk-full", "digest-mismatch")
CULPRIT_KEYS = ("npu_time", "npu_power", "speak_power", "models")
START_DATE = dt.date(2026, 11, 1)
DISK_FULL_BYTES = 1 << 40  # no phone has a terabyte free
# A key of its own, the same every time (artefacts are reproducible): not the phone's vendor key.
_STRANGER = Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"phonebench: not the vendor key").digest())


def write_catalogue(folder: str | Path, n_builds: int = 32, culprits: Mapping[int, Mapping[str, Any]] | None = None,
                    *, broken: Mapping[int, str] | None = None, version: str = "3.6.0-dev",
                    start: dt.date = START_DATE, payload_bytes: int = 16 << 10) -> Path:
    """Write folder/catalogue.toml and folder/artefacts/*.tar; returns the catalogue file."""
    culprits, broken = dict(culprits or {}), dict(broken or {})
    for position in [*culprits, *broken]:
        if not 0 <= position < n_builds:
            raise ValueError(f"position {position} is not a build of 0..{n_builds - 1}")
    for position, change in culprits.items():
        unknown = set(change) - set(CULPRIT_KEYS)
        if unknown:
            raise ValueError(f"culprit {position}: unknown keys {sorted(unknown)} (known: {', '.join(CULPRIT_KEYS)})")
    for position, kind in broken.items():
        if kind not in BROKEN_KINDS:
            raise ValueError(f"broken {position}: {kind!r} is not one of {', '.join(BROKEN_KINDS)}")
    folder = Path(folder)
    (folder / "artefacts").mkdir(parents=True, exist_ok=True)
    lines = ['format = "phonebench-catalogue/1"', ""]
    for position in range(n_builds):
        ident = f"{version}.{position + 1:03d}"
        kind = broken.get(position)
        base, models = behaviour_at(position, culprits)
        artefact = folder / "artefacts" / f"{ident}.tar"
        data = write_artefact(f"llmrt {ident}-emu", replace(base, crash_on_start=kind == "crash-on-start"),
                              {m: replace(b, crash_on_start=kind == "crash-on-start") for m, b in models.items()},
                              payload_bytes=payload_bytes, install_bytes=DISK_FULL_BYTES if kind == "disk-full" else None,
                              key=_STRANGER if kind == "bad-signature" else None)
        digest = hashlib.sha256(data).hexdigest()
        if kind == "missing-artefact":
            artefact.unlink(missing_ok=True)
        else:
            artefact.write_bytes(data)
        if kind == "digest-mismatch":
            digest = hashlib.sha256(data + b"rebuilt").hexdigest()
        # Nothing in the catalogue tells where a change was planted: a bisection must find it.
        lines += ["[[build]]", f"id = {json.dumps(ident)}", f"order = {10 * (position + 1)}",
                  f"date = {start + dt.timedelta(days=position)}", f"artefact = {json.dumps(f'artefacts/{ident}.tar')}",
                  f"sha256 = {json.dumps(digest)}", f"notes = {json.dumps(f'nightly build {position + 1}')}", ""]
    path = folder / "catalogue.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def behaviour_at(position: int, culprits: Mapping[int, Mapping[str, Any]]) -> tuple[Behaviour, dict[str, Behaviour]]:
    """The behaviour of the build at `position`: every culprit at or before it, on every model
    (the base) or on its named models."""
    base = Behaviour()
    models: dict[str, Behaviour] = {}
    for at in sorted(p for p in culprits if p <= position):
        change = culprits[at]
        named = list(change.get("models") or [])
        for model in named:
            models.setdefault(model, base)
        targets = named or [None, *models]
        for model in targets:
            current = base if model is None else models[model]
            updated = replace(current, npu_time=current.npu_time * float(change.get("npu_time", 1.0)),
                              npu_power=current.npu_power * float(change.get("npu_power", 1.0)),
                              speak_power=current.speak_power * float(change.get("speak_power", 1.0)))
            if model is None:
                base = updated
            else:
                models[model] = updated
    return base, models

