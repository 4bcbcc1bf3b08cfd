"""Fluke/Hart thermometer readouts over RS-232.

- 1529 Chub-E4 (family `fluke-1529`, also `fluke-hart`): four channels, SCPI-like commands, one
  command per line (no `;` compounds), 9600 baud. `FETC? <n>` (= `MEAS?` = `READ?`: none of them
  waits) answers the channel's most recent measurement as a bare number in the display unit; with
  `FORM:STAM ON` the answer is `<new>,<channel>,<value>,<scale>,<h>,<m>,<s>,<year>,<month>,<day>`,
  where <new> is 1 for a measurement not read before. The driver turns the stamp on, so it knows
  which channel answered, in which unit, when, and whether the value is fresh.
- 1521 / 1522 handhelds (family `fluke-1521`): one channel, 2400 baud, plain commands: `fetch?`
  -> `t: 25.587 C`, `*ver` -> `ver.1521,<firmware>`. There is no fresh-reading flag, so the
  handheld gives readings, not paced streams.
"""
from __future__ import annotations

import datetime as dt
import logging
import math
import re

from phonebench.core.errors import ConfigError, InstrumentError
from .thermal import (
    OVERLOAD,
    POLL_RETRIES,
    GarbageCounter,
    SerialLine,
    ThermalReading,
    ThermalStream,
    invalid_reason,
    split_valid,
)
from .visa import InstrumentIdentity, parse_idn

log = logging.getLogger(__name__)

_SCALES = {"C": lambda v: v, "F": lambda v: (v - 32) * 5 / 9, "K": lambda v: v - 273.15}
FRESH_POLL_FACTOR = 3.0  # a fresh reading must arrive within this many sample periods


def _celsius(value: float, scale: str) -> float | str:
    if not math.isfinite(value) or abs(value) >= OVERLOAD * 0.99:
        return invalid_reason(value) or "overload"  # before conversion: 9.9E37 °F is no temperature either
    convert = _SCALES.get(scale.upper())
    if convert is None:
        return f"reading in {scale}, not a temperature"  # ohms or mV: the channel is set to raw input
    return convert(value)


class Fluke1529:
    """Hart Scientific / Fluke 1529 Chub-E4 four-channel thermometer readout."""

    role = "thermal"
    family = "fluke-1529"

    def __init__(self, address: str, channels: int = 4, sensor: str = "PRT", timeout_s: float = 2.0,
                 baudrate: int = 9600, port: object = None, lock_wait_s: float | None = None) -> None:
        if not 1 <= channels <= 4:
            raise ConfigError(f"{self.family} at {address}: channels={channels}; the 1529 has 1 to 4",
                              hint="set options.channels to the number of probes plugged in")
        self.address = address
        self.name = f"{self.role} {self.family} at {address}"
        self.line = SerialLine(address, self.name, timeout_s, baudrate, port, lock_wait_s)
        try:
            self.identity = parse_idn(self.line.query("*IDN?"), address, self.role, self.family)
            if "1529" not in self.identity.model:
                raise InstrumentError(f"{self.name}: *IDN? says {self.identity}, not a 1529",
                                      hint="for a 1521/1522 handheld use family fluke-1521; "
                                           "otherwise check the port")
            self._command("FORM:STAM ON")
        except BaseException:
            self.line.close()
            raise
        self._numbers = list(range(1, channels + 1))
        self.channels = [f"T{n}" for n in self._numbers]
        self._sensor = sensor
        self._period_s = 1.0
        self.garbage_lines = 0

    def _command(self, command: str) -> None:
        """A setting, then its error check (the 1529 takes one command per line)."""
        self.line.write(command)
        answer = self.line.query("SYST:ERR?")
        if not answer.lstrip("+").startswith("0"):
            raise InstrumentError(f"{self.name}: `{command}` failed: {answer}",
                                  hint="see the thermometer's message; fix the setting")

    def _fetch(self, number: int, counter: GarbageCounter) -> tuple[bool, float | str, float | None]:
        """(fresh, °C or fault text, device seconds) of one channel's most recent measurement."""
        for _ in range(POLL_RETRIES):
            line = self.line.query(f"FETC? {number}")
            parts = [p.strip() for p in line.split(",")]
            try:
                fresh, channel, value = int(parts[0]), int(parts[1]), float(parts[2])
                stamp = dt.datetime(int(parts[7]), int(parts[8]), int(parts[9]),
                                    int(parts[4]), int(parts[5]), int(float(parts[6])), tzinfo=dt.timezone.utc)
                if len(parts) != 10 or channel != number or fresh not in (0, 1):
                    raise ValueError(line)
                device_s = stamp.timestamp()
            except (ValueError, IndexError, OverflowError):  # inf or huge date fields: a garbled line
                self.garbage_lines += 1
                counter.bad(line)
                continue
            counter.good()
            return bool(fresh), _celsius(value, parts[3]), device_s
        raise InstrumentError(f"{self.name}: {POLL_RETRIES} answers to 'FETC? {number}' in a row were not "
                              "'<new>,<channel>,<value>,<unit>,<h>,<m>,<s>,<y>,<m>,<d>'",
                              hint="check the baud rate and cable; the thermometer may be another model")

    def _reading(self, values: dict[str, float | str], device_time_s: float | None) -> ThermalReading:
        celsius, faults = split_valid(values, self._sensor)
        return ThermalReading(celsius, faults, None, device_time_s, self.name)

    def read(self) -> ThermalReading:
        """The most recent measurement of every channel (fresh or not)."""
        counter = GarbageCounter(self.name)
        values: dict[str, float | str] = {}
        when: float | None = None
        for number in self._numbers:
            _, values[f"T{number}"], when = self._fetch(number, counter)
        return self._reading(values, when)

    def _fresh(self, number: int, counter: GarbageCounter) -> tuple[float | str, float | None]:
        """Poll one channel until it shows a measurement not read before (bounded)."""
        poll_s = 50 * 10 / self.line.baudrate  # a FETC? round trip: ~50 characters at 10 bits each
        limit = int(FRESH_POLL_FACTOR * self._period_s * len(self._numbers) / poll_s) + 10
        for _ in range(limit):
            fresh, value, when = self._fetch(number, counter)
            if fresh:
                return value, when
        raise InstrumentError(f"{self.name}: channel {number} showed no new measurement in {limit} polls",
                              hint="the thermometer is not measuring that channel: enable it and check the probe")

    def start_stream(self, period_s: float = 1.0) -> None:
        """Readings are taken when the thermometer has new ones; its sample period sets the pace."""
        self._command(f"SENS:APER {period_s:g}")
        self._period_s = period_s

    def stream(self, n: int | None = None, duration_s: float | None = None) -> ThermalStream:
        if n is None and duration_s is None:
            raise ConfigError("stream() needs n or duration_s", hint="e.g. stream(n=60)")
        count = n if n is not None else int(math.ceil((duration_s or 0.0) / self._period_s)) + 1
        counter = GarbageCounter(self.name)
        samples, start = [], None
        for _ in range(count):
            values: dict[str, float | str] = {}
            when: float | None = None
            for number in self._numbers:
                values[f"T{number}"], when = self._fresh(number, counter)
            start = when if start is None else start
            samples.append(self._reading(values, None if when is None or start is None else when - start))
        return ThermalStream(samples, counter.garbage, 0, self._period_s)

    def stop_stream(self) -> None:
        """Nothing to stop: the thermometer is only polled."""

    def close(self) -> None:
        self.line.close()


_HANDHELD_ANSWER = re.compile(r"^\s*t:\s*(\S+)\s*([CFK])\s*$")
_VERSION = re.compile(r"^\s*ver\.(\w+),(\S+)\s*$")


class Fluke1521:
    """Fluke/Hart 1521 or 1522 handheld readout: one channel, `fetch?` -> `t: 25.587 C`."""

    role = "thermal"
    family = "fluke-1521"

    def __init__(self, address: str, sensor: str = "PRT", timeout_s: float = 2.0, baudrate: int = 2400,
                 port: object = None, lock_wait_s: float | None = None) -> None:
        self.address = address
        self.name = f"{self.role} {self.family} at {address}"
        self.line = SerialLine(address, self.name, timeout_s, baudrate, port, lock_wait_s)
        try:
            answer = self.line.query("*ver")
        except BaseException:
            self.line.close()
            raise
        m = _VERSION.match(answer)
        if m is None:
            self.line.close()
            raise InstrumentError(f"{self.name}: *ver answered {answer[:60]!r}, not 'ver.<model>,<firmware>'",
                                  hint="for a 1529 use family fluke-1529; otherwise check the port (2400 baud)")
        self.identity = InstrumentIdentity("Fluke", m.group(1), "", m.group(2), address, self.role, self.family)
        self.channels = ["T1"]
        self._sensor = sensor
        self.garbage_lines = 0

    def read(self) -> ThermalReading:
        counter = GarbageCounter(self.name)
        for _ in range(POLL_RETRIES):
            line = self.line.query("fetch?")
            m = _HANDHELD_ANSWER.match(line)
            if m is None:
                self.garbage_lines += 1
                counter.bad(line)
                continue
            try:
                value: float | str = _celsius(float(m.group(1)), m.group(2))
            except ValueError:
                value = m.group(1)  # the display's open/fault text
            celsius, faults = split_valid({"T1": value}, self._sensor)
            return ThermalReading(celsius, faults, None, None, self.name)
        raise InstrumentError(f"{self.name}: {POLL_RETRIES} answers to 'fetch?' in a row were garbage",
                              hint="check the cable; the handheld talks 2400 baud 8N1")

    def _no_stream(self) -> ConfigError:
        return ConfigError(f"{self.name}: the handheld has no paced stream (no new-reading flag)",
                           hint="poll read(), or use a 1529 or a DAQ970A for streams")

    def start_stream(self, period_s: float = 1.0) -> None:
        raise self._no_stream()

    def stream(self, n: int | None = None, duration_s: float | None = None) -> ThermalStream:
        raise self._no_stream()

    def stop_stream(self) -> None:
        """Nothing to stop."""

    def close(self) -> None:
        self.line.close()
