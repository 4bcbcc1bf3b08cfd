"""Corrected instruments: thin wrappers that apply a role's current corrections to what its
driver measures, and pass everything else through unchanged.

- scope: the channel-2 deskew is programmed into the instrument (`:CHANnel2:PROBe:SKEW`), so its
  own measurements are corrected too; the fixture delay is exposed as `fixture_delay_s` for the
  voice-latency check to subtract;
- supply: the current zero offset is subtracted from every current reading and digitized sample;
- thermal: each channel's offset against the reference thermometer is subtracted.

A test asks for "the scope" and gets a corrected one; calibration procedures use `uncorrected()`.
"""
from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Any, Generic, TypeVar, cast

import numpy as np

from phonebench.drivers.power import PowerAnalyzer
from phonebench.drivers.scope import Oscilloscope
from phonebench.drivers.thermal import ThermalProbe, ThermalReading, ThermalStream
from phonebench.drivers.trace import Trace
from .state import RoleCalibration

log = logging.getLogger(__name__)

# Adjustment keys (what calibration records make current).
DESKEW_KEY = "ch{}_deskew_s"
FIXTURE_DELAY_KEY = "fixture_delay_s"
CURRENT_ZERO_KEY = "current_zero_a"
OFFSET_KEY = "{}_offset_c"


# The role protocol a wrapper corrects (its driver satisfies it; the wrapper passes the rest through).
_Driver = TypeVar("_Driver")


class Corrected(Generic[_Driver]):
    """Delegates every attribute to the driver; subclasses override what a correction changes."""

    def __init__(self, driver: _Driver, calibration: RoleCalibration) -> None:
        self._driver = driver
        self.calibration = calibration

    @property
    def raw(self) -> _Driver:
        return self._driver

    @property
    def corrections(self) -> dict[str, float]:
        return dict(self.calibration.corrections)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._driver, name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._driver!r}, {self.calibration.state})"


class CorrectedScope(Corrected[Oscilloscope]):
    def __init__(self, driver: Oscilloscope, calibration: RoleCalibration) -> None:
        super().__init__(driver, calibration)
        for key, value in calibration.corrections.items():
            channel = _deskew_channel(key)
            if channel is not None:
                driver.set_deskew(driver.channel(channel), value)
                log.info("%s: channel %d deskew %.3g s programmed from calibration", driver.name, channel, value)

    @property
    def fixture_delay_s(self) -> float | None:
        return self.calibration.corrections.get(FIXTURE_DELAY_KEY)


class CorrectedSupply(Corrected[PowerAnalyzer]):
    @property
    def current_zero_a(self) -> float:
        return self.calibration.corrections.get(CURRENT_ZERO_KEY, 0.0)

    def measure_current(self) -> float:
        return self._driver.measure_current() - self.current_zero_a

    def _correct(self, trace: Trace) -> Trace:
        if trace.current_a is None or not self.current_zero_a:
            return trace
        return dataclasses.replace(trace, current_a=(trace.current_a - np.float32(self.current_zero_a)))

    def fetch(self) -> Trace:
        return self._correct(self._driver.fetch())

    def digitize(self, points: int, interval_s: float, pretrigger_points: int = 0,
                 quantities: Sequence[str] = ("current", "voltage")) -> Trace:
        return self._correct(self._driver.digitize(points, interval_s, pretrigger_points, quantities))


class CorrectedThermal(Corrected[ThermalProbe]):
    def offset_c(self, channel: str) -> float:
        return self.calibration.corrections.get(OFFSET_KEY.format(channel), 0.0)

    def _correct(self, reading: ThermalReading) -> ThermalReading:
        celsius = {ch: value - self.offset_c(ch) for ch, value in reading.celsius.items()}
        return dataclasses.replace(reading, celsius=celsius)

    def read(self) -> ThermalReading:
        return self._correct(self._driver.read())

    def stream(self, n: int | None = None, duration_s: float | None = None) -> ThermalStream:
        stream = self._driver.stream(n, duration_s)
        return dataclasses.replace(stream, samples=[self._correct(s) for s in stream.samples])


WRAPPERS = {"scope": CorrectedScope, "supply": CorrectedSupply, "thermal": CorrectedThermal}


def corrected(role: str, driver: object, calibration: RoleCalibration) -> object:
    """The driver with the role's corrections applied (unchanged for a role that needs none)."""
    wrapper = WRAPPERS.get(role)
    if wrapper is None:
        return driver
    # The owner opened `role`'s driver from registry.FAMILIES[role]: it is the protocol this wrapper takes.
    return wrapper(cast(Any, driver), calibration)


def uncorrected(driver: object) -> object:
    """The bare driver under a corrected wrapper (what calibration procedures measure with)."""
    return driver.raw if isinstance(driver, Corrected) else driver


def _deskew_channel(key: str) -> int | None:
    if key.startswith("ch") and key.endswith("_deskew_s"):
        number = key[2:-len("_deskew_s")]
        return int(number) if number.isdigit() else None
    return None
