"""Thermal probes: what every family shares — readings, streams, the serial line, and the rule
that decides whether a number is a temperature at all.

The families live in their own modules: the bench's generic ASCII board (`thermal_generic`),
Fluke/Hart thermometers (`thermal_fluke`: the 1529 Chub-E4 and the 1521/1522 handhelds) and the
Keysight DAQ970A / 34970A data acquisition system with a thermocouple multiplexer (`daq970a`).

Serial addresses are pyserial URLs or device paths: `/dev/ttyUSB0`, `socket://127.0.0.1:PORT`,
`rfc2217://...`. A probe fault (`nan`, `ERR:<code>`, an open-sensor display), an overload
(9.9E37), inf, or a value outside the sensor's physical range flags that channel invalid; it never
becomes a number. Garbage lines on the serial link are skipped and counted, and only a persistent
stream of them is an error.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
import serial

from phonebench.core.errors import ConfigError, InstrumentError, InvalidMeasurement
from .locks import ResourceLock, acquire
from .visa import InstrumentIdentity

log = logging.getLogger(__name__)

MAX_GARBAGE_RUN = 10  # consecutive unparseable lines before the link is declared broken
MAX_GARBAGE_FRACTION = 0.5  # ... or this share of all lines once 20 have been seen
POLL_RETRIES = 3
OVERLOAD = 9.9e37  # SCPI instruments' "no valid reading" (overload, open thermocouple)
ABSOLUTE_ZERO_C = -273.15

# Physical ranges of the sensors (°C): thermocouple types after IEC 60584-1, PRTs after ITS-90 /
# IEC 60751. A reading outside them is a broken sensor, a wrong type setting or a corrupt line.
SENSOR_RANGES_C: dict[str, tuple[float, float]] = {
    "B": (0.0, 1820.0), "E": (-270.0, 1000.0), "J": (-210.0, 1200.0), "K": (-270.0, 1372.0),
    "N": (-270.0, 1300.0), "R": (-50.0, 1768.0), "S": (-50.0, 1768.0), "T": (-270.0, 400.0),
    "PRT": (-200.0, 962.0), "THERMISTOR": (-80.0, 150.0),
}


def invalid_reason(value: float, sensor: str = "K") -> str | None:
    """Why `value` (°C) cannot be a temperature of this sensor; None when it can."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return f"{value}"
    if abs(value) >= OVERLOAD * 0.99:
        return f"overload ({value:.4g})"
    if value < ABSOLUTE_ZERO_C:
        return f"{value:g} °C is below absolute zero"
    low, high = SENSOR_RANGES_C.get(sensor.upper(), (ABSOLUTE_ZERO_C, math.inf))
    if not low <= value <= high:
        return f"{value:g} °C is outside the {sensor} sensor's range ({low:g} to {high:g} °C)"
    return None


def split_valid(values: dict[str, float | str], sensors: dict[str, str] | str = "K",
                ) -> tuple[dict[str, float], dict[str, str]]:
    """(celsius, faults): numbers that are temperatures, and what the rest were."""
    celsius: dict[str, float] = {}
    faults: dict[str, str] = {}
    for channel, value in values.items():
        sensor = sensors if isinstance(sensors, str) else sensors.get(channel, "K")
        reason = value if isinstance(value, str) else invalid_reason(value, sensor)
        if reason is None:
            celsius[channel] = float(value)
        else:
            faults[channel] = reason
    return celsius, faults


def valid_or_none(value: float | None, sensor: str = "K") -> float | None:
    """A side value (cold junction, ...) that is a temperature, else None."""
    return None if value is None or invalid_reason(value, sensor) else value


@dataclass
class ThermalReading:
    """One reading of every channel. Index it by channel name: a faulted channel raises."""

    celsius: dict[str, float]  # valid channels only
    faults: dict[str, str] = field(default_factory=dict)  # channel -> what the probe reported
    cold_junction_c: float | None = None
    device_time_s: float | None = None  # the probe's own clock, when it has one
    instrument: str = ""

    @property
    def channels(self) -> list[str]:
        return sorted({*self.celsius, *self.faults})

    @property
    def valid(self) -> bool:
        return not self.faults

    def __getitem__(self, channel: str) -> float:
        if channel in self.faults:
            raise InvalidMeasurement(f"{self.instrument}: channel {channel} reading is invalid "
                                     f"({self.faults[channel]})",
                                     hint="check the sensor: open, shorted, unplugged or the wrong type configured")
        if channel not in self.celsius:
            raise ConfigError(f"{self.instrument}: no channel {channel!r}; channels: {self.channels}",
                              hint="use the probe's channel names (see .channels)")
        return self.celsius[channel]


@dataclass
class ThermalStream:
    samples: list[ThermalReading]
    garbage_lines: int = 0  # skipped, unparseable lines
    fault_lines: int = 0  # whole-board faults (ERR:<code> lines)
    period_s: float = 0.0

    def series(self, channel: str) -> tuple[np.ndarray, np.ndarray]:
        """(device seconds, °C) for one channel; NaN where the probe reported a fault."""
        times = [s.device_time_s if s.device_time_s is not None else i * self.period_s
                 for i, s in enumerate(self.samples)]
        values = [s.celsius.get(channel, math.nan) for s in self.samples]
        return np.array(times, dtype=float), np.array(values, dtype=float)


@runtime_checkable
class ThermalProbe(Protocol):
    name: str  # names it in every message: role, family, address (and model, serial once known)
    identity: InstrumentIdentity
    channels: list[str]

    def read(self) -> ThermalReading: ...

    def start_stream(self, period_s: float = 1.0) -> None: ...

    def stream(self, n: int | None = None, duration_s: float | None = None) -> ThermalStream:
        """n samples, or samples spanning duration_s of device time."""

    def stop_stream(self) -> None: ...

    def close(self) -> None: ...


class GarbageCounter:
    def __init__(self, name: str) -> None:
        self.name = name
        self.total = 0
        self.garbage = 0
        self.run = 0

    def good(self) -> None:
        self.total += 1
        self.run = 0

    def bad(self, line: str) -> None:
        self.total += 1
        self.garbage += 1
        self.run += 1
        log.debug("%s: skipped garbage line %r", self.name, line[:60])
        if self.run > MAX_GARBAGE_RUN or (self.total >= 20 and self.garbage > MAX_GARBAGE_FRACTION * self.total):
            raise InstrumentError(f"{self.name}: {self.garbage} of {self.total} serial lines were garbage "
                                  f"({self.run} in a row)",
                                  hint="check the baud rate, cable and grounding of the probe's serial link")


class NonAscii(Exception):
    """A line with bytes outside 7-bit ASCII: the caller decides whether that is garbage or fatal."""

    def __init__(self, raw: bytes) -> None:
        super().__init__(raw)
        self.raw = raw


class SerialLine:
    """A "\\n"-terminated ASCII conversation over pyserial, with clear errors.

    Opening it takes the bench's exclusive lock on the port (phonebench.drivers.locks): no other bench
    process can interleave commands with ours until close().
    """

    def __init__(self, address: str, name: str, timeout_s: float, baudrate: int, port: object = None,
                 lock_wait_s: float | None = None) -> None:
        self.address = address
        self.name = name
        self.timeout_s = timeout_s
        self.baudrate = baudrate
        self._lock: ResourceLock | None = None
        if port is not None:  # an already-open port (tests pass a scripted one)
            self.port = port
            return
        self._lock = acquire(address, name, lock_wait_s)
        try:
            self.port = serial.serial_for_url(address, baudrate=baudrate, timeout=timeout_s,
                                              write_timeout=timeout_s)
        except (serial.SerialException, ValueError, OSError) as exc:
            self._lock.release()
            raise InstrumentError(f"cannot open {name}: {exc}",
                                  hint="check the serial device or URL (/dev/ttyUSB0, socket://host:port)") from exc

    def write(self, text: str) -> None:
        try:
            self.port.write(text.encode("ascii") + b"\n")
        except (serial.SerialException, OSError) as exc:
            raise InstrumentError(f"{self.name}: write of {text!r} failed: {exc}", hint="reconnect the probe") from exc

    def read_raw_line(self) -> str | None:
        """One line without its terminator; None when nothing complete arrived within the timeout.

        Raises NonAscii for a line with bytes outside 7-bit ASCII."""
        try:
            raw = self.port.readline()
        except (serial.SerialException, OSError) as exc:
            raise InstrumentError(f"{self.name}: read failed: {exc}", hint="reconnect the probe") from exc
        if not raw.endswith(b"\n"):
            return None
        try:
            return raw.decode("ascii").strip()
        except UnicodeDecodeError:
            raise NonAscii(raw) from None

    def non_ascii_error(self, raw: bytes, context: str) -> InstrumentError:
        return InstrumentError(f"{self.name}: {context} contains non-ASCII bytes {raw[:24]!r} on port {self.address}",
                               hint=f"the line speaks another baud rate or protocol (this driver talks "
                                    f"{self.baudrate} baud, 8N1), or another device is on this port")

    def read_line(self) -> str | None:
        """Like read_raw_line, but a non-ASCII line comes back as text with U+FFFD (garbage)."""
        try:
            return self.read_raw_line()
        except NonAscii as exc:
            return exc.raw.decode("ascii", "replace").strip()

    def query(self, text: str) -> str:
        self.write(text)
        try:
            line = self.read_raw_line()
        except NonAscii as exc:
            raise self.non_ascii_error(exc.raw, f"the answer to {text!r}") from None
        if line is None:
            raise InstrumentError(f"{self.name}: no answer to {text!r} within {self.timeout_s:g} s",
                                  hint="the probe is silent: check power, cable and baud rate")
        return line

    def discard_input(self) -> None:
        self.port.reset_input_buffer()

    def close(self) -> None:
        try:
            self.port.close()
        finally:
            if self._lock is not None:
                self._lock.release()
                self._lock = None
