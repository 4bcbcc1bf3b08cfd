"""Open an instrument by role and family: what a station file names, what a test asks for.

    scope = open_instrument("scope", "keysight-infiniivision", "TCPIP::10.0.0.7::5025::SOCKET")

The returned object satisfies the role's Protocol (Oscilloscope, PowerAnalyzer, ThermalProbe,
AudioStimulus, StationClock); options go to the driver (e.g. backend="@sim", timeout_s=10, channel=1).
"""
from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from bench.core.errors import ConfigError
from drivers.clock import HostClock, ScpiClock, StationClock
from drivers.power import KeysightN6705C, PowerAnalyzer
from drivers.scope import KeysightInfiniiVision, Oscilloscope, RigolDS1000Z
from drivers.stimulus import AudioStimulus, Keysight33500B
from drivers.thermal import FlukeHart, GenericAsciiProbe, ThermalProbe

FAMILIES: dict[str, dict[str, Callable[..., Any]]] = {
    "scope": {"keysight-infiniivision": KeysightInfiniiVision, "rigol-ds1000z": RigolDS1000Z},
    "supply": {"keysight-n6705c": KeysightN6705C},
    "thermal": {"generic-ascii": GenericAsciiProbe, "fluke-hart": FlukeHart},
    "stimulus": {"keysight-33500b": Keysight33500B},
    "clock": {"host": HostClock, "phonebench-clock": ScpiClock},
}
PROTOCOLS = {"scope": Oscilloscope, "supply": PowerAnalyzer, "thermal": ThermalProbe, "stimulus": AudioStimulus,
             "clock": StationClock}


def known_families() -> dict[str, list[str]]:
    return {role: sorted(families) for role, families in FAMILIES.items()}


def open_instrument(role: str, family: str, address: str, **options: Any) -> Any:
    """Connect to an instrument; raises ConfigError for an unknown role/family, InstrumentError if unreachable."""
    if role not in FAMILIES:
        raise ConfigError(f"unknown instrument role {role!r}", hint=f"roles: {', '.join(sorted(FAMILIES))}")
    families = FAMILIES[role]
    if family not in families:
        known = "; ".join(f"{r}: {', '.join(f)}" for r, f in known_families().items())
        raise ConfigError(f"unknown {role} family {family!r}", hint=f"known families — {known}")
    driver = families[family]
    try:
        inspect.signature(driver).bind(address, **options)
    except TypeError as exc:
        raise ConfigError(f"{role} {family} at {address}: bad option ({exc})",
                          hint="check the instrument's options in the station file") from exc
    return driver(address, **options)
