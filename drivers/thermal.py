"""Thermal probe drivers over pyserial: the bench's generic ASCII contract and Fluke/Hart thermometers.

Addresses are pyserial URLs or device paths: `/dev/ttyUSB0`, `socket://127.0.0.1:PORT`,
`rfc2217://...`. A probe fault (`nan`, `ERR:<code>`, an open-sensor display) flags that channel
invalid; it never becomes a number. Garbage lines on the serial link are skipped and counted,
and only a persistent stream of them is an error.
"""
from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
import serial

from bench.core.errors import ConfigError, InstrumentError, InvalidMeasurement
from drivers.visa import InstrumentIdentity, parse_idn

log = logging.getLogger(__name__)

MAX_GARBAGE_RUN = 10  # consecutive unparseable lines before the link is declared broken
MAX_GARBAGE_FRACTION = 0.5  # ... or this share of all lines once 20 have been seen
POLL_RETRIES = 3


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
            raise InvalidMeasurement(f"{self.instrument}: channel {channel} reported a probe fault "
                                     f"({self.faults[channel]})",
                                     hint="check the thermocouple: open, shorted or unplugged")
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
    identity: InstrumentIdentity
    channels: list[str]

    def read(self) -> ThermalReading: ...

    def start_stream(self, period_s: float = 1.0) -> None: ...

    def stream(self, n: int | None = None, duration_s: float | None = None) -> ThermalStream:
        """n samples, or samples spanning duration_s of device time."""

    def stop_stream(self) -> None: ...

    def close(self) -> None: ...


class _GarbageCounter:
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


class SerialLine:
    """A "\\n"-terminated ASCII conversation over pyserial, with clear errors."""

    def __init__(self, address: str, name: str, timeout_s: float, baudrate: int, port: object = None) -> None:
        self.name = name
        self.timeout_s = timeout_s
        if port is not None:  # an already-open port (tests pass a scripted one)
            self.port = port
            return
        try:
            self.port = serial.serial_for_url(address, baudrate=baudrate, timeout=timeout_s,
                                              write_timeout=timeout_s)
        except (serial.SerialException, ValueError, OSError) as exc:
            raise InstrumentError(f"cannot open {name}: {exc}",
                                  hint="check the serial device or URL (/dev/ttyUSB0, socket://host:port)") from exc

    def write(self, text: str) -> None:
        try:
            self.port.write(text.encode("ascii") + b"\n")
        except (serial.SerialException, OSError) as exc:
            raise InstrumentError(f"{self.name}: write of {text!r} failed: {exc}", hint="reconnect the probe") from exc

    def read_line(self) -> str | None:
        """One line without its terminator; None when nothing complete arrived within the timeout."""
        try:
            raw = self.port.readline()
        except (serial.SerialException, OSError) as exc:
            raise InstrumentError(f"{self.name}: read failed: {exc}", hint="reconnect the probe") from exc
        if not raw.endswith(b"\n"):
            return None
        return raw.decode("ascii", "replace").strip()

    def query(self, text: str) -> str:
        self.write(text)
        line = self.read_line()
        if line is None:
            raise InstrumentError(f"{self.name}: no answer to {text!r} within {self.timeout_s:g} s",
                                  hint="the probe is silent: check power, cable and baud rate")
        return line

    def discard_input(self) -> None:
        self.port.reset_input_buffer()

    def close(self) -> None:
        self.port.close()


def _value(text: str) -> float | str:
    """A temperature, or the fault text when the probe reported one."""
    text = text.strip()
    if text.upper().startswith("ERR:"):
        return text
    value = float(text)  # ValueError: garbage
    return "nan" if math.isnan(value) else value


class GenericAsciiProbe:
    """The bench's generic contract: READ? -> `T1=25.25,...,CJ=24.1`, stream `<ms>,<T1>,...,<CJ>`."""

    role = "thermal"
    family = "generic-ascii"

    def __init__(self, address: str, timeout_s: float = 2.0, baudrate: int = 115_200, port: object = None) -> None:
        self.address = address
        self.name = f"{self.role} {self.family} at {address}"
        self.line = SerialLine(address, self.name, timeout_s, baudrate, port)
        self.identity = parse_idn(self.line.query("*IDN?"), address, self.role, self.family)
        names = [c.strip() for c in self.line.query("CHAN?").split(",") if c.strip()]
        if not names or "CJ" not in names:
            raise InstrumentError(f"{self.name}: CHAN? answered {names!r}; expected channel names ending in CJ",
                                  hint="the device does not speak the generic probe contract")
        self.channels = [c for c in names if c != "CJ"]
        self._fields = names
        self._streaming = False
        self._period_s = 0.0
        self.garbage_lines = 0

    def _reading(self, values: dict[str, float | str], device_time_s: float | None) -> ThermalReading:
        cj = values.pop("CJ", None)
        celsius = {k: v for k, v in values.items() if isinstance(v, float)}
        faults = {k: v for k, v in values.items() if isinstance(v, str)}
        return ThermalReading(celsius, faults, cj if isinstance(cj, float) else None, device_time_s, self.name)

    def _parse_poll(self, line: str) -> ThermalReading | None:
        values: dict[str, float | str] = {}
        try:
            for part in line.split(","):
                key, sep, text = part.partition("=")
                if not sep or key.strip() not in self._fields:
                    return None
                values[key.strip()] = _value(text)
        except ValueError:
            return None
        return self._reading(values, None) if set(values) == set(self._fields) else None

    def read(self) -> ThermalReading:
        if self._streaming:
            raise ConfigError(f"{self.name}: read() while streaming", hint="call stop_stream() first")
        for _ in range(POLL_RETRIES):
            line = self.line.query("READ?")
            if line.upper().startswith("ERR:"):
                raise InvalidMeasurement(f"{self.name}: READ? reported {line}",
                                         hint="the probe board reports a fault; check its supply and sensors")
            reading = self._parse_poll(line)
            if reading is not None:
                return reading
            self.garbage_lines += 1
            log.debug("%s: skipped garbage answer %r", self.name, line[:60])
        raise InstrumentError(f"{self.name}: {POLL_RETRIES} READ? answers in a row were garbage",
                              hint="check the baud rate, cable and grounding of the probe's serial link")

    def start_stream(self, period_s: float = 1.0) -> None:
        answer = self.line.query(f"STREAM {int(round(period_s * 1000))}")
        if answer != "OK":
            raise InstrumentError(f"{self.name}: STREAM {period_s:g} s refused: {answer}",
                                  hint="the generic contract accepts periods of 100 ms to 60 s")
        self._streaming, self._period_s = True, period_s

    def _parse_stream(self, line: str) -> ThermalReading | None:
        parts = line.split(",")
        if len(parts) != 1 + len(self._fields) or not parts[0].isdigit():
            return None
        try:
            values = {name: _value(text) for name, text in zip(self._fields, parts[1:], strict=True)}
        except ValueError:
            return None
        return self._reading(values, int(parts[0]) / 1000.0)

    def stream(self, n: int | None = None, duration_s: float | None = None) -> ThermalStream:
        if not self._streaming:
            raise ConfigError(f"{self.name}: stream() before start_stream()", hint="start the stream first")
        if n is None and duration_s is None:
            raise ConfigError("stream() needs n or duration_s", hint="e.g. stream(n=60)")
        result = ThermalStream([], period_s=self._period_s)
        counter = _GarbageCounter(self.name)
        while True:
            if n is not None and len(result.samples) >= n:
                return result
            if duration_s is not None and len(result.samples) >= 2:
                first, last = result.samples[0].device_time_s, result.samples[-1].device_time_s
                if first is not None and last is not None and last - first >= duration_s:
                    return result
            line = self.line.read_line()
            if line is None:
                raise InstrumentError(f"{self.name}: no stream data within {self.line.timeout_s:g} s "
                                      f"after {len(result.samples)} samples",
                                      hint="the probe stopped streaming, or (emulated) no simulated time passed")
            if line.upper().startswith("ERR:"):
                result.fault_lines += 1
                counter.good()
                continue
            sample = self._parse_stream(line)
            if sample is None:
                result.garbage_lines += 1
                self.garbage_lines += 1
                counter.bad(line)
                continue
            counter.good()
            result.samples.append(sample)

    def stop_stream(self) -> None:
        self.line.write("STREAM OFF")
        for _ in range(10_000):  # skip stream lines still in flight until the acknowledgement
            line = self.line.read_line()
            if line is None:
                raise InstrumentError(f"{self.name}: STREAM OFF not acknowledged", hint="power-cycle the probe board")
            if line == "OK":
                self._streaming = False
                return
        raise InstrumentError(f"{self.name}: STREAM OFF not acknowledged", hint="power-cycle the probe board")

    def close(self) -> None:
        if self._streaming:
            try:
                self.stop_stream()
            except InstrumentError as exc:
                log.warning("%s", exc)
        self.line.close()


_FLUKE_ANSWER = re.compile(r"^\s*t:\s*(\S+)\s*([CFK])\s*$")


class FlukeHart:
    """Fluke/Hart multi-channel thermometer (1529-style): `FETC? n` -> `t: 25.587 C`."""

    role = "thermal"
    family = "fluke-hart"

    def __init__(self, address: str, channels: int = 4, timeout_s: float = 2.0, baudrate: int = 9600,
                 port: object = None) -> None:
        self.address = address
        self.name = f"{self.role} {self.family} at {address}"
        self.line = SerialLine(address, self.name, timeout_s, baudrate, port)
        self.identity = parse_idn(self.line.query("*IDN?"), address, self.role, self.family)
        self._numbers = [str(n) for n in range(1, channels + 1)]
        self.channels = [f"T{n}" for n in self._numbers]
        self._period_s = 1.0
        self.garbage_lines = 0

    def _check_errors(self, context: str) -> None:
        answer = self.line.query("SYST:ERR?")
        if not answer.lstrip("+").startswith("0"):
            raise InstrumentError(f"{self.name}: `{context}` failed: {answer}",
                                  hint="see the thermometer's message; fix the setting")

    def _channel(self, command: str, counter: _GarbageCounter) -> float | str:
        for _ in range(POLL_RETRIES):
            line = self.line.query(command)
            m = _FLUKE_ANSWER.match(line)
            if m is None:
                self.garbage_lines += 1
                counter.bad(line)
                continue
            counter.good()
            try:
                value = float(m.group(1))
            except ValueError:
                return m.group(1)  # the display's open/fault text
            if math.isnan(value):
                return "nan"
            return {"C": value, "F": (value - 32) * 5 / 9, "K": value - 273.15}[m.group(2)]
        raise InstrumentError(f"{self.name}: {POLL_RETRIES} answers to {command!r} in a row were garbage",
                              hint="check the baud rate and cable of the thermometer's serial link")

    def _read(self, fresh: bool, counter: _GarbageCounter) -> ThermalReading:
        values: dict[str, float | str] = {}
        for i, number in enumerate(self._numbers):
            verb = "READ?" if (fresh and i == 0) else "FETC?"  # READ? waits for a new measurement
            values[f"T{number}"] = self._channel(f"{verb} {number}", counter)
        celsius = {k: v for k, v in values.items() if isinstance(v, float)}
        faults = {k: v for k, v in values.items() if isinstance(v, str)}
        return ThermalReading(celsius, faults, None, None, self.name)

    def read(self) -> ThermalReading:
        return self._read(False, _GarbageCounter(self.name))

    def start_stream(self, period_s: float = 1.0) -> None:
        self.line.write(f"SENS:APER {period_s:g}")
        self._check_errors(f"SENS:APER {period_s:g}")
        self._period_s = period_s

    def stream(self, n: int | None = None, duration_s: float | None = None) -> ThermalStream:
        """Paced polls: each sample waits for the thermometer's next measurement."""
        if n is None and duration_s is None:
            raise ConfigError("stream() needs n or duration_s", hint="e.g. stream(n=60)")
        count = n if n is not None else int(math.ceil((duration_s or 0.0) / self._period_s)) + 1
        counter = _GarbageCounter(self.name)
        samples = [self._read(True, counter) for _ in range(count)]
        return ThermalStream(samples, counter.garbage, 0, self._period_s)

    def stop_stream(self) -> None:
        """Nothing to stop: the thermometer is only polled."""

    def close(self) -> None:
        self.line.close()
