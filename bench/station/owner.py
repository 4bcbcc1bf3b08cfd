"""The one owner of a station's resources.

A station (or one bay of it) opened from its config owns the phones, opened by their `transport`
(the host's adb server, or direct), the instruments by role, their identities and the station
clock, and closes them. The pytest plugin, the preflight, acceptance, the line, calibration and
the fingerprint command get phones and instruments from here and from nowhere else: this is the
only module that calls `phonebench.drivers.adb_server.open_phone` or `phonebench.drivers.registry.open_instrument`.

    with StationOwner(station) as owner:
        phone = owner.phone("EMU0001").device
        scope = owner.instrument("scope")
"""
from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from phonebench.core.errors import BenchError, ConfigError
from phonebench.core.station import DutConfig, InstrumentConfig, StationConfig
from phonebench.drivers.chamber import Chamber
from phonebench.drivers.clock import StationClock
from phonebench.drivers.device import Device
from phonebench.drivers.fixture import FixtureControl
from ..phone.identity import DutIdentity, collect_identity

log = logging.getLogger(__name__)

PhoneListener = Callable[["PhoneSlot"], None]
InstrumentListener = Callable[[str, InstrumentConfig, Any], None]


@dataclass
class PhoneSlot:
    """One phone's connection and identity, opened once per owner; an opening error is kept."""

    name: str
    config: DutConfig
    device: Device | None = None
    identity: DutIdentity | None = None
    error: BenchError | None = None

    def opened(self) -> Device:
        """The phone's driver: a slot `StationOwner.phone` returns has one (it raises the error instead)."""
        if self.device is None:
            raise self.error or BenchError(f"{self.name}: the phone is not open")
        return self.device

    def identified(self) -> DutIdentity:
        """Who the phone says it is: a slot `StationOwner.phone` returns has read it (or raises)."""
        if self.identity is None:
            raise self.error or BenchError(f"{self.name}: the phone was not identified")
        return self.identity


class StationOwner:
    """Opens, keeps and closes a station's phones and instruments (a bay's view of them)."""

    def __init__(self, station: StationConfig, *, on_phone: PhoneListener | None = None,
                 on_instrument: InstrumentListener | None = None, phone_wait_s: float | None = None,
                 on_wait: Callable[[str], None] | None = None) -> None:
        self.station = station
        self.phone_wait_s, self._on_wait = phone_wait_s, on_wait
        self.phones: dict[str, PhoneSlot] = {}
        self.instruments: dict[str, Any] = {}
        self.instrument_errors: dict[str, BenchError] = {}
        self._in_use: set[str] = set()  # shared roles inside instrument_use now
        self._on_phone, self._on_instrument = on_phone, on_instrument
        self._stack = contextlib.ExitStack()

    # --- phones --------------------------------------------------------------------------------
    def phone(self, name: str) -> PhoneSlot:
        """The named phone, connected and identified, held against other benches until close;
        raises its error (phonebench.drivers.locks.PhoneBusy when another bench holds it past the wait)."""
        from phonebench.drivers.locks import hold_phone

        slot = self.phones.get(name)
        if slot is None:
            slot = self.phones[name] = PhoneSlot(name, self.station.dut(name))
            try:  # another bench driving this phone: wait for it (bounded), then PhoneBusy names it
                self._stack.enter_context(hold_phone(slot.config.address, name, self.phone_wait_s, self._on_wait))
                slot.device = self._open_phone(slot.config)
                slot.identity = collect_identity(slot.device, name, slot.config.address)
                _check_serial(slot.config, slot.identity.serial)
            except BenchError as exc:
                slot.error = exc
                if slot.device is not None:
                    with contextlib.suppress(Exception):
                        slot.device.close()
                    slot.device = None
            if self._on_phone is not None:
                self._on_phone(slot)
        if slot.error is not None:
            raise slot.error
        return slot

    @contextlib.contextmanager
    def connected(self, name: str, **options: float | int) -> Iterator[Device]:
        """The named phone for one short use (a preflight look, a serial read), closed after it;
        a phone another bench holds is PhoneBusy at once. Options go to the driver (connect_timeout_s=)."""
        from phonebench.drivers.locks import hold_phone

        cfg = self.station.dut(name)
        with hold_phone(cfg.address, name, wait_s=0.0):
            device = self._open_phone(cfg, **options)
            try:
                yield device
            finally:
                device.close()

    def drop_phone(self, name: str, error: BenchError) -> None:
        """The phone is broken for the rest of this owner's life: close it, keep why."""
        slot = self.phones.get(name)
        if slot is None:
            return
        slot.error = error
        if slot.device is not None:
            with contextlib.suppress(Exception):
                slot.device.close()
            slot.device = None

    def _open_phone(self, cfg: DutConfig, **options: float | int) -> Device:
        from phonebench.drivers.adb_server import open_phone

        device = open_phone(cfg.address, cfg.transport, key=cfg.key, name=cfg.name, **options)
        try:
            device.connect()
        except BaseException:
            with contextlib.suppress(Exception):
                device.close()
            raise
        return device

    # --- instruments ---------------------------------------------------------------------------
    def instrument(self, role: str) -> Any:
        """The driver of this bay's instrument in `role` (opened once; a shared one only inside
        `instrument_use`, which holds it for that use and closes it after, so no bay keeps it)."""
        if role in self.instrument_errors:
            raise self.instrument_errors[role]
        cfg = self.station.instruments[role]
        if cfg.shared and role not in self._in_use:
            raise ConfigError(f"the {role} at {cfg.address} is shared with other bays: use it inside "
                              f"`owner.instrument_use({role!r})`, which holds it for that use only",
                              hint="a shared instrument held outside a use would hold off every other bay")
        if role not in self.instruments:
            try:
                driver = open_configured(cfg)
            except BenchError as exc:
                self.instrument_errors[role] = exc
                raise
            if not cfg.shared:
                self._stack.callback(driver.close)
            self.instruments[role] = driver
            if self._on_instrument is not None:
                self._on_instrument(role, cfg, driver)
        return self.instruments[role]

    @contextlib.contextmanager
    def instrument_use(self, role: str) -> Iterator[None]:
        """One use of an instrument: a shared one is locked, opened and closed around it, so the
        other bays are held off only while this bay measures."""
        from phonebench.drivers.bay_view import shared_use

        cfg = self.station.instruments.get(role)
        if cfg is None or not cfg.shared:
            yield
            return
        with shared_use(cfg.address):
            self._in_use.add(role)
            try:
                yield
            finally:
                self._in_use.discard(role)
                driver = self.instruments.pop(role, None)
                if driver is not None:
                    with contextlib.suppress(Exception):
                        driver.close()

    def identity(self, role: str) -> Any:
        """Who answers in `role` (a shared instrument is held only while it is asked)."""
        with self.instrument_use(role):
            return self.instrument(role).identity

    @contextlib.contextmanager
    def using(self, roles: Iterable[str]) -> Iterator[dict[str, Any]]:
        """Several instruments for one use (a calibration): the shared ones held until it ends."""
        with contextlib.ExitStack() as uses:
            drivers = {}
            for role in roles:
                uses.enter_context(self.instrument_use(role))
                drivers[role] = self.instrument(role)
            yield drivers

    def clock(self, dut: str | None = None) -> StationClock:
        """The station clock: the station's [instruments.clock], else, in a session over every bay
        of a station wired per bay, the clock wired to `dut`'s bay (an emulated bay's world keeps
        its own time), else the host's monotonic clock."""
        from phonebench.drivers.clock import HostClock

        if "clock" in self.station.instruments:
            return self.instrument("clock")
        bay = self._bay_of(dut)
        cfg = None if bay is None else self.station.for_bay(bay).instruments.get("clock")
        if cfg is None:
            return HostClock()
        key = f"clock@{bay}"
        if key not in self.instruments:
            driver = open_configured(cfg)
            self._stack.callback(driver.close)
            self.instruments[key] = driver
        return self.instruments[key]

    def _bay_of(self, dut: str | None) -> str | None:
        """`dut`'s bay when this session holds every bay of a station (no --bay), else None."""
        if dut is None or self.station.bay is not None or not self.station.multi_bay:
            return None
        return next((b.name for b in self.station.bays if dut in b.duts), None)

    def fixture(self) -> FixtureControl | None:
        """The fixture's controller (loopback relays, reference probe placement), if the station has one."""
        return self.instrument("fixture") if "fixture" in self.station.instruments else None

    def chamber(self) -> Chamber | None:
        """The thermal chamber around this bay's phone (drivers/chamber.py), if the station has one."""
        return self.instrument("chamber") if "chamber" in self.station.instruments else None

    # --- life ----------------------------------------------------------------------------------
    def close(self) -> None:
        for slot in self.phones.values():
            if slot.device is not None:
                with contextlib.suppress(Exception):
                    slot.device.close()
        self._stack.close()
        for role, driver in list(self.instruments.items()):  # shared ones still open after a failed use
            if self.station.instruments.get(role) is not None and self.station.instruments[role].shared:
                with contextlib.suppress(Exception):
                    driver.close()
        self.instruments.clear()

    def __enter__(self) -> StationOwner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_configured(cfg: InstrumentConfig) -> Any:
    """An instrument's driver as the station file configures it: its family at its address with its
    options; a bay's channels of a shared probe board shown as the bay's own. Owners call this; so
    does the preflight, which looks at every instrument of the inventory once."""
    from phonebench.drivers.bay_view import BayChannels
    from phonebench.drivers.registry import open_instrument

    try:
        driver = open_instrument(cfg.role, cfg.family, cfg.address, **cfg.options)
    except ConfigError as exc:  # the option is the station file's: name the section it is written in
        if not cfg.name:
            raise
        raise ConfigError(f"station file [instruments.{cfg.name}]: {exc.message}", hint=exc.hint) from None
    if cfg.role == "thermal" and cfg.channel is not None:
        return BayChannels(driver, cfg.channel)
    return driver


def _check_serial(cfg: DutConfig, serial: str) -> None:
    if cfg.expected_serial and serial != cfg.expected_serial:
        raise BenchError(f"{cfg.name} at {cfg.address}: serial {serial!r} is not the expected "
                         f"{cfg.expected_serial!r}", hint="wrong unit on this fixture? check the station file")
