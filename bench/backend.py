"""The station-backend hook: the one place the bench reaches the emulator.

A station is either hardware described by a station file, or the embedded emulated station
(emulated phones behind real ADB daemons, emulated instruments behind real SCPI/serial servers).
Everything above this module sees only a StationConfig of addresses; whether a real phone or an
emulated one answers at an address is invisible to drivers, checks and suites.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from bench.core.station import LEGACY_BAY, EmulatedConfig, EmulatedPhoneConfig, StationConfig, load_station


@contextlib.contextmanager
def open_station(path: str | Path | None = None, emulated: EmulatedConfig | None = None,
                 bay: str | None = None) -> Iterator[StationConfig]:
    """Yield a ready station config; starts (and afterwards stops) the emulated station if needed.

    With `bay`, the config is that bay's view (its DUT, its instruments by role) and an emulated
    multi-bay fleet starts that bay only.
    """
    config = load_station(path) if path else StationConfig(name="emulated", source=None,
                                                           emulated=emulated or EmulatedConfig())
    if config.emulated is None:
        yield _narrow(config, bay)
        return
    from emulation.station import EmulatedStation  # only emulated runs need the emulator

    with EmulatedStation(config.emulated, only_bay=bay if config.emulated.bays else None) as station:
        yield _narrow(station.merge_into(config), bay)


def _narrow(config: StationConfig, bay: str | None) -> StationConfig:
    """A station of one bay is that bay's view; a legacy file (no [[bay]]) already is one."""
    if bay is None and len(config.bays) == 1:
        bay = config.bays[0].name
    if bay is None or [b.name for b in config.bays] == [LEGACY_BAY] == [bay]:
        return config
    return config.for_bay(bay)


def plan_station(path: str | Path | None = None, emulated: EmulatedConfig | None = None,
                 bay: str | None = None) -> StationConfig:
    """The station's DUTs and instruments as a run would see them, without starting anything:
    what collection needs (`pytest --collect-only` starts no station and writes no run)."""
    config = load_station(path) if path else StationConfig(name="emulated", source=None,
                                                           emulated=emulated or EmulatedConfig())
    if config.emulated is None:
        return _narrow(config, bay)
    if config.emulated.bays:
        return _plan_bays(config, bay)
    from emulation.station import plan_emulated

    return plan_emulated(config)


def _plan_bays(config: StationConfig, bay: str | None) -> StationConfig:
    """An emulated multi-bay fleet's plan: every bay's phone, or with `bay` that bay's phone and roles."""
    import dataclasses

    from bench.core.errors import ConfigError
    from bench.core.station import DutConfig, InstrumentConfig
    from emulation.station import EMULATED_ROLES, NOT_STARTED

    duts = emulated_bay_duts(config.emulated)
    if bay is None:
        return dataclasses.replace(config, duts=[DutConfig(n, NOT_STARTED, expected_serial=n)
                                                 for names in duts.values() for n in names])
    if bay not in duts:
        raise ConfigError(f"emulated fleet: no bay named {bay!r}", hint=f"bays: {', '.join(duts)}")
    serial = duts[bay][0]
    roles = EMULATED_ROLES if config.emulated.instruments else ()
    return dataclasses.replace(config, duts=[DutConfig(serial, NOT_STARTED, expected_serial=serial)], bay=bay,
                               instruments={r: InstrumentConfig(r, "emulated", NOT_STARTED, attached_to=serial)
                                            for r in roles})


def emulated_fleet(persona: str | None = None, faults: Sequence[str] = ()) -> EmulatedConfig:
    """The embedded station's default fleet, every phone with `persona` and `faults` added."""
    from emulation.npu_personas import default_fleet

    return EmulatedConfig(phones=[
        EmulatedPhoneConfig(serial=s.serial, npu_persona=s.npu_persona, seed=s.seed,
                            sla_persona=persona or s.sla_persona, faults=[*s.faults, *faults])
        for s in default_fleet()])


def emulated_line(**kwargs: Any) -> Any:
    """An emulated production line (emulation.line.EmulatedLine: units, a fixture, its instruments)."""
    from emulation.line import EmulatedLine

    return EmulatedLine(**kwargs)


def default_line_faults() -> tuple[str, ...]:
    """The fault kinds the emulated line gives its faulty units in turn."""
    from emulation.line import DEFAULT_FAULTS

    return tuple(DEFAULT_FAULTS)


def emulated_bay_duts(config: EmulatedConfig) -> dict[str, list[str]]:
    """Bay name -> the serial of the phone an emulated multi-bay fleet puts in it."""
    from bench.core.station import emulated_bay_names
    from emulation.npu_personas import default_fleet

    serials = [p.serial for p in config.phones] or [s.serial for s in default_fleet()]
    return {bay: [serial] for bay, serial in zip(emulated_bay_names(config.bays), serials)}


def emulated_choices() -> tuple[list[str], list[str]]:
    """(personas, faults) the emulated phones understand: for option help and error messages."""
    from emulation.station import known_faults, sla_personas

    return sorted(sla_personas()), sorted(known_faults())
