"""Runtime builds the emulated phone can run: a build is a change of the phone, not of its words.

A lab's nightly asks whether tonight's runtime build regressed against the last accepted one. To
test that question the emulated phone runs a build whose NPU work takes longer (or draws more)
than the release's: the planted regression is seen only through the instruments and the host's
clock, while the version string the runtime reports names the build, as a real one's does.

What a phone runs comes from the artefact installed on it (emulation/build_artefact.py,
`llmrt install`). The station file's named builds (`[[emulated.phone]] build = "npu-slow-8pct"`)
are planted artefacts, built here on the fly and installed on the phone before its first boot.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from phonebench.core.errors import ConfigError
from .build_artefact import Behaviour, write_artefact


@dataclass(frozen=True)
class RuntimeBuild:
    """The build a runtime runs, on this phone: what it reports and how it behaves."""

    version: str       # what `llmrt identity` reports
    npu_time: float = 1.0   # NPU work (prompt processing and decode) takes this many times as long
    npu_power: float = 1.0  # dynamic power of NPU work
    speak_power: float = 1.0  # dynamic power while the assistant speaks an answer (a dialog's, not a generate's)


BUILDS: dict[str, RuntimeBuild] = {
    "": RuntimeBuild("llmrt 3.4.0-emu"),
    "3.4.1": RuntimeBuild("llmrt 3.4.1-emu"),  # a rebuild that changes nothing measurable
    "npu-slow-8pct": RuntimeBuild("llmrt 3.5.0-emu+npu-slow", npu_time=1.08),
    "npu-hungry-10pct": RuntimeBuild("llmrt 3.5.0-emu+npu-hungry", npu_power=1.10),
}


def runtime_build(name: str) -> RuntimeBuild:
    try:
        return BUILDS[name]
    except KeyError:
        raise ConfigError(f"unknown emulated runtime build {name!r}",
                          hint=f"build is one of: {', '.join(repr(b) for b in BUILDS)}") from None


@lru_cache(maxsize=None)
def planted_artefact(name: str) -> bytes:
    """The artefact of a named build (the same bytes every time: its SHA-256 names it)."""
    build = runtime_build(name)
    return write_artefact(build.version, Behaviour(npu_time=build.npu_time, npu_power=build.npu_power,
                                                   speak_power=build.speak_power))
