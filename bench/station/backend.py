"""The station-backend hook: the one place the bench reaches the emulator.

A station is hardware described by a station file, or an emulated station (`[emulated]` in a
station file, or the default fleet when none is given). Either way the bench sees only a
StationConfig of addresses: whether a real phone or an emulated one answers at an address is
invisible to drivers, checks and suites. What the emulator hands the bench is typed and small:
addresses (a station file's worth), and `EmulatedPhoneInfo` for `bench emulate` to show.

`bench run` starts an emulated station as its own process (`launch_emulated`: `bench emulate
--write-station`) and runs against the station file it writes, the same path as on hardware.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from phonebench.core.errors import BenchError, ConfigError
from phonebench.core.station import (
    DutConfig,
    EmulatedConfig,
    EmulatedPhoneConfig,
    InstrumentConfig,
    StationConfig,
    load_station,
)

if TYPE_CHECKING:  # the line and its units, for annotations: the emulator is imported when a line starts
    from phonebench.emulation.line import EmulatedLine, LineUnit

log = logging.getLogger(__name__)

EMULATED_STARTUP_S = 120.0  # the emulated station's servers are up long before this on any machine


StationSource = str | Path | StationConfig | None  # a station file, or one already parsed (a session parses once)


def _config(source: StationSource, emulated: EmulatedConfig | None) -> StationConfig:
    if isinstance(source, StationConfig):
        config = copy.deepcopy(source)  # opening or planning fills it in: the parsed file stays as read
    else:
        config = load_station(source) if source else StationConfig(name="emulated", source=None)
    if emulated is not None:
        config.emulated = emulated
    elif not source:
        config.emulated = EmulatedConfig()
    return config


@contextlib.contextmanager
def open_station(path: StationSource = None, emulated: EmulatedConfig | None = None,
                 bay: str | None = None) -> Iterator[StationConfig]:
    """Yield a ready station config; an emulated one is started in this process (and stopped after).

    With `bay`, the config is that bay's view (its DUT, its instruments by role) and an emulated
    station starts that bay only.
    """
    config = _config(path, emulated)
    if config.emulated is None:
        yield _narrow(config, bay)
        return
    from phonebench.emulation.station import EmulatedStation

    with EmulatedStation(config.emulated, only_bay=bay, rooms=config.rooms) as station:
        yield _narrow(station.merge_into(config), bay)


def _narrow(config: StationConfig, bay: str | None) -> StationConfig:
    """A station of one bay is that bay's view (a legacy file without [[bay]] already is one)."""
    if bay is None and len(config.bays) == 1:
        bay = config.bays[0].name
    if bay is None or config.bay == bay:
        return config
    return config.for_bay(bay)


def plan_station(path: StationSource = None, emulated: EmulatedConfig | None = None,
                 bay: str | None = None) -> StationConfig:
    """The station's DUTs and instruments as a run would see them, without starting anything:
    what collection needs (`pytest --collect-only` starts no station and writes no run)."""
    config = _config(path, emulated)
    if config.emulated is None:
        return _narrow(config, bay)
    from phonebench.emulation.station import EMULATED_ROLES, NOT_STARTED

    duts = emulated_bay_duts(config.emulated)
    if bay is None and len(duts) != 1:
        return dataclasses.replace(config, duts=[DutConfig(n, NOT_STARTED, expected_serial=n)
                                                 for names in duts.values() for n in names])
    bay = bay or next(iter(duts))
    if bay not in duts:
        raise ConfigError(f"emulated station: no bay named {bay!r}", hint=f"bays: {', '.join(duts)}")
    serial = duts[bay][0]
    roles = EMULATED_ROLES if config.emulated.instruments else ("clock",)
    if config.emulated.instruments and "chamber" in config.emulated.families:
        roles = (*roles, "chamber")
    return dataclasses.replace(config, duts=[DutConfig(serial, NOT_STARTED, expected_serial=serial)], bay=bay,
                               instruments={r: InstrumentConfig(r, "emulated", NOT_STARTED, attached_to=serial)
                                            for r in roles})


def emulated_bay_duts(config: EmulatedConfig) -> dict[str, list[str]]:
    """Bay name -> the serials of the phones the emulated station puts in it."""
    from phonebench.emulation.station import bay_serials

    return {bay: [serial] for bay, serial in bay_serials(config).items()}


def phone_bays(config: StationConfig) -> dict[str, str]:
    """Phone -> the bay it is tested in, as `bench run` runs the station: the file's bays, or the
    emulated station's (the default fleet has a bay per phone)."""
    if config.emulated is not None:
        return {serial: bay for bay, serials in emulated_bay_duts(config.emulated).items() for serial in serials}
    return {dut: bay.name for bay in config.bays for dut in bay.duts}


def emulated_fleet(persona: str | None = None, faults: Sequence[str] = ()) -> EmulatedConfig:
    """The default fleet, every phone with `persona` and `faults` added."""
    from phonebench.emulation.npu_personas import default_fleet

    return EmulatedConfig(phones=[
        EmulatedPhoneConfig(serial=s.serial, npu_persona=s.npu_persona, seed=s.seed,
                            sla_persona=persona or s.sla_persona, faults=[*s.faults, *faults])
        for s in default_fleet()])


def with_behaviour(emulated: EmulatedConfig, persona: str | None, faults: Sequence[str]) -> EmulatedConfig:
    """The same emulated station with `persona` and `faults` given to every phone."""
    if not (persona or faults):
        return emulated
    phones = emulated.phones or emulated_fleet().phones
    return dataclasses.replace(emulated, phones=[
        dataclasses.replace(p, sla_persona=persona or p.sla_persona, faults=[*p.faults, *faults]) for p in phones])


def validate_emulated(emulated: EmulatedConfig) -> None:
    """ConfigError for an unknown persona or fault of an emulated phone, before anything starts."""
    from phonebench.emulation.station import EmulatedStation

    EmulatedStation(emulated)._specs()


@contextlib.contextmanager
def running_emulated(emulated: EmulatedConfig, config: StationConfig | None = None) -> Iterator[tuple[StationConfig, list[Any]]]:
    """An emulated station started here: its address config and what to show of each phone."""
    from phonebench.emulation.station import EmulatedStation

    base = config or StationConfig(name="emulated", source=None)
    with EmulatedStation(emulated, rooms=base.rooms) as station:
        yield station.merge_into(base), station.phones()


@contextlib.contextmanager
def launch_emulated(config: StationConfig, folder: Path) -> Iterator[Path]:
    """Start the emulated station of `config` as its own process (`bench emulate`) and yield the
    station file it writes, which reaches it as a lab's file reaches hardware; stop it after."""
    from phonebench.core.station_writer import write_emulated_station

    if config.emulated is None:
        raise ConfigError(f"station {config.name!r}: no [emulated] table, nothing to start")
    folder.mkdir(parents=True, exist_ok=True)
    wanted, live, log_path = folder / "emulated.toml", folder / "station.toml", folder / "emulator.log"
    write_emulated_station(wanted, config, config.emulated)
    with open(log_path, "ab") as out:
        # --with-parent: a run killed outright (SIGKILL, a crash) closes the pipe and the station stops
        proc = subprocess.Popen([sys.executable, "-m", "phonebench.bench.cli", "emulate", "--station", str(wanted),
                                 "--write-station", str(live), "--with-parent"], stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.PIPE, start_new_session=True)
    try:
        _wait_for(live, proc, log_path)
        yield live
    finally:
        _stop(proc)


def _wait_for(live: Path, proc: subprocess.Popen, log_path: Path) -> None:
    deadline = time.monotonic() + EMULATED_STARTUP_S
    while not live.exists():
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace").strip().splitlines()[-3:]
            raise BenchError(f"the emulated station stopped before it was ready (exit {proc.returncode}): "
                             + " | ".join(tail), hint=f"its log: {log_path}")
        if time.monotonic() > deadline:
            raise BenchError(f"the emulated station was not ready within {EMULATED_STARTUP_S:g} s",
                             hint=f"its log: {log_path}")
        time.sleep(0.05)


def _stop(proc: subprocess.Popen) -> None:
    if proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def emulated_line(**kwargs: Any) -> EmulatedLine:
    """An emulated production line (phonebench.emulation.line.EmulatedLine: units, a fixture, its instruments)."""
    from phonebench.emulation.line import EmulatedLine

    return EmulatedLine(**kwargs)


def default_line_faults() -> tuple[str, ...]:
    """The fault kinds the emulated line gives its faulty units in turn."""
    from phonebench.emulation.line import DEFAULT_FAULTS

    return tuple(DEFAULT_FAULTS)


def emulated_choices() -> tuple[list[str], list[str]]:
    """(personas, faults) the emulated phones understand: for option help and error messages."""
    from phonebench.emulation.station import known_faults, sla_personas

    return sorted(sla_personas()), sorted(known_faults())
