"""Which phone model and which runtime build a run's phone record names: the keys a nightly pools
and compares by (a claim is about a runtime build on a phone model)."""
from __future__ import annotations

from typing import Any, Mapping


def phone_model(identity: Mapping[str, Any] | None, fallback: str = "(unknown model)") -> str:
    """The product model the phone's identity names, else its SoC, else `fallback`."""
    ident = identity or {}
    return str(ident.get("product_model") or ident.get("soc_model") or fallback)


def phone_build(identity: Mapping[str, Any] | None) -> str | None:
    """The runtime build (version string) the phone ran, as its identity recorded it."""
    build = (identity or {}).get("runtime_version")
    return str(build) if build else None


def run_models(data: Mapping[str, Any]) -> dict[str, list[str]]:
    """model -> the run's phones of that model (phones whose identity could not be read left out)."""
    models: dict[str, list[str]] = {}
    for dut, ident in (data.get("duts") or {}).items():
        if isinstance(ident, Mapping) and not ident.get("error"):
            models.setdefault(phone_model(ident, dut), []).append(str(dut))
    return models


def run_builds(data: Mapping[str, Any], model: str) -> list[str]:
    """The distinct builds a run's phones of `model` ran."""
    duts = data.get("duts") or {}
    return sorted({b for d in run_models(data).get(model, []) if (b := phone_build(duts.get(d)))})
