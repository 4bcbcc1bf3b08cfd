"""Which emulated instrument families each role can be built with, and the factory that builds one.

    server = make_server("scope", "rigol-ds1000z", world)

The family names are the station file's (drivers/registry.py), so an emulated station built
with a family is reached by the driver a lab would use for the real instrument.
"""
from __future__ import annotations

from collections.abc import Callable

from phonebench.core.errors import ConfigError
from .awg import AwgServer
from .clock import ClockServer
from .daq970a import Daq970aServer
from .f4t import F4TServer
from .fixture import FixtureServer
from .otii import OtiiServer
from .power_analyzer import PowerAnalyzerServer
from .scope import KeysightScopeServer, RigolScopeServer
from .server import LineServer
from .thermal_probe import ThermalProbeServer
from ..world import World

Factory = Callable[[World], "LineServer | F4TServer"]  # the F4T speaks Modbus/TCP, not lines

FACTORIES: dict[str, dict[str, Factory]] = {
    "scope": {"keysight-infiniivision": KeysightScopeServer, "rigol-ds1000z": RigolScopeServer},
    "supply": {"keysight-n6705c": PowerAnalyzerServer, "qoitech-otii": OtiiServer},
    "thermal": {"keysight-daq970a": Daq970aServer,
                "fluke-1529": lambda world: ThermalProbeServer(world, "fluke"),
                "fluke-1521": lambda world: ThermalProbeServer(world, "fluke1521"),
                "generic-ascii": lambda world: ThermalProbeServer(world, "generic")},
    "stimulus": {"keysight-33500b": AwgServer},
    "clock": {"phonebench-clock": ClockServer},
    "fixture": {"phonebench-fixture": FixtureServer},
    "chamber": {"watlow-f4t": F4TServer},
}
# What an emulated station builds for a role its [emulated] table does not name.
DEFAULT_FAMILIES = {"scope": "keysight-infiniivision", "supply": "keysight-n6705c", "thermal": "keysight-daq970a",
                    "stimulus": "keysight-33500b", "clock": "phonebench-clock", "fixture": "phonebench-fixture",
                    "chamber": "watlow-f4t"}


def emulated_families() -> dict[str, list[str]]:
    """Role -> the families the emulated station can build for it."""
    return {role: sorted(families) for role, families in FACTORIES.items()}


def make_server(role: str, family: str | None, world: World) -> LineServer | F4TServer:
    """A not yet started server of `family` (None: the role's default) living in `world`."""
    if role not in FACTORIES:
        raise ConfigError(f"no emulated instrument role {role!r}", hint=f"roles: {', '.join(FACTORIES)}")
    family = family or DEFAULT_FAMILIES[role]
    factory = FACTORIES[role].get(family)
    if factory is None:
        raise ConfigError(f"no emulated {role} of family {family!r}",
                          hint=f"emulated {role} families: {', '.join(emulated_families()[role])}")
    return factory(world)
