"""Emulated 4-channel oscilloscopes, one class per model, as the drivers (drivers/scope.py) have:

- `KeysightScopeServer` (keysight.py): Keysight InfiniiVision X, DSOX3024T;
- `RigolScopeServer` (rigol.py): Rigol DS1000Z, DS1104Z;

both on `ScopeServer` (base.py), what the two share. `scope_server(world, "rigol")` builds
one by its dialect name.
"""
from __future__ import annotations

from ...world import World
from .base import INPUT_DELAY_S, ScopeServer
from .keysight import KeysightScopeServer
from .rigol import RigolScopeServer

__all__ = ["INPUT_DELAY_S", "KeysightScopeServer", "RigolScopeServer", "ScopeServer", "scope_server"]

MODELS: dict[str, type[ScopeServer]] = {model.dialect: model for model in (KeysightScopeServer, RigolScopeServer)}


def scope_server(world: World, dialect: str, port: int = 0) -> ScopeServer:
    """A not yet started scope of `dialect` ("keysight" or "rigol") living in `world`."""
    if dialect not in MODELS:
        raise ValueError(f"unknown scope dialect {dialect!r}; known: {sorted(MODELS)}")
    return MODELS[dialect](world, port)
