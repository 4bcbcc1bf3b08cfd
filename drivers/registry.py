"""Open an instrument by role and family: what a station file names, what a test asks for.

    scope = open_instrument("scope", "keysight-infiniivision", "TCPIP::10.0.0.7::5025::SOCKET")

The returned object satisfies the role's Protocol (Oscilloscope, PowerAnalyzer, ThermalProbe,
AudioStimulus, StationClock, FixtureControl, Chamber); options go to the driver (e.g. backend="@sim", timeout_s=10, channel=1).
"""
from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from phonebench.core.errors import ConfigError
from .chamber import Chamber
from .chamber_f4t import WatlowF4T
from .clock import HostClock, ScpiClock, StationClock
from .otii import QoitechOtii
from .power import KeysightN6705C, PowerAnalyzer
from .scope import KeysightInfiniiVision, Oscilloscope, RigolDS1000Z
from .stimulus import AudioStimulus, Keysight33500B
from .daq970a import KeysightDaq970a
from .fixture import FixtureControl, ScpiFixture
from .thermal import ThermalProbe
from .thermal_fluke import Fluke1521, Fluke1529
from .thermal_generic import GenericAsciiProbe

FAMILIES: dict[str, dict[str, Callable[..., Any]]] = {
    "scope": {"keysight-infiniivision": KeysightInfiniiVision, "rigol-ds1000z": RigolDS1000Z},
    "supply": {"keysight-n6705c": KeysightN6705C, "qoitech-otii": QoitechOtii},
    # "fluke-hart" is the 1529's older name in station files.
    "thermal": {"keysight-daq970a": KeysightDaq970a, "fluke-1529": Fluke1529, "fluke-hart": Fluke1529,
                "fluke-1521": Fluke1521, "generic-ascii": GenericAsciiProbe},
    "stimulus": {"keysight-33500b": Keysight33500B},
    "clock": {"host": HostClock, "phonebench-clock": ScpiClock},
    "fixture": {"phonebench-fixture": ScpiFixture},
    "chamber": {"watlow-f4t": WatlowF4T},
}
PROTOCOLS = {"scope": Oscilloscope, "supply": PowerAnalyzer, "thermal": ThermalProbe, "stimulus": AudioStimulus,
             "clock": StationClock, "fixture": FixtureControl, "chamber": Chamber}


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
    _check_option_types(driver, role, family, address, options)
    return driver(address, **options)


_SIMPLE = {"int": (int,), "float": (int, float), "str": (str,), "bool": (bool,)}


def _check_option_types(driver: Callable[..., Any], role: str, family: str, address: str,
                        options: dict[str, Any]) -> None:
    """Options from a station file against the driver's annotations (int, float, str, bool and
    their unions): a wrong type is the station file's mistake, named, not a TypeError deep inside."""
    parameters = inspect.signature(driver).parameters
    for key, value in options.items():
        annotation = parameters[key].annotation if key in parameters else inspect.Parameter.empty
        names = [part.strip() for part in str(annotation).split("|")] if isinstance(annotation, str) else []
        if not names or any(n not in _SIMPLE and n != "None" for n in names):
            continue  # not a simple annotation: the driver checks it
        allowed = tuple(t for n in names if n != "None" for t in _SIMPLE[n])
        if (value is None and "None" in names) or (isinstance(value, allowed)
                                                    and not (isinstance(value, bool) and bool not in allowed)):
            continue
        raise ConfigError(f"{role} {family} at {address}: option {key} = {value!r} is a {type(value).__name__}, "
                          f"expected {' or '.join(names)}", hint="fix the instrument's options in the station file")
