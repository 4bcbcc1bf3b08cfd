"""The bench's generic ASCII thermocouple board (a MAX31855-style board, K-type thermocouples).

This is the project's own contract, not a product: `*IDN?`, `CHAN?` -> `T1,T2,T3,REF,CJ`,
`READ?` -> `T1=25.25,...,CJ=24.1`, `STREAM <ms>` / `STREAM OFF` acknowledged `OK`, streamed lines
`<device_ms>,<T1>,...,<CJ>`; faults `nan` or `ERR:<code>`. A `REF` channel is a reference-grade
PT100 input (the reference for the thermocouple-offset calibration).
"""
from __future__ import annotations

import logging
from collections.abc import Callable

from phonebench.core.errors import ConfigError, InstrumentError, InvalidMeasurement
from .thermal import (
    POLL_RETRIES,
    GarbageCounter,
    SerialLine,
    ThermalReading,
    ThermalStream,
    split_valid,
    valid_or_none,
)
from .visa import parse_idn

log = logging.getLogger(__name__)

MAX_STOP_LINES = 10_000  # stream lines that may still be in flight when STREAM OFF is sent
MAX_SYNC_LINES = 1_000  # ... and after its acknowledgement, before the sync answer
REFERENCE_CHANNELS = {"REF": "PRT"}  # channel -> sensor; every other channel is a type K thermocouple


def _value(text: str) -> float | str:
    """A number, or the fault text when the probe reported one."""
    text = text.strip()
    if text.upper().startswith("ERR:"):
        return text
    return float(text)  # ValueError: garbage


class GenericAsciiProbe:
    """The bench's generic contract over a serial line (115200 baud 8N1 unless told)."""

    role = "thermal"
    family = "generic-ascii"

    def __init__(self, address: str, timeout_s: float = 2.0, baudrate: int = 115_200, port: object = None,
                 lock_wait_s: float | None = None) -> None:
        self.address = address
        self.name = f"{self.role} {self.family} at {address}"
        self.line = SerialLine(address, self.name, timeout_s, baudrate, port, lock_wait_s)
        try:
            self.identity = parse_idn(self.line.query("*IDN?"), address, self.role, self.family)
            names = [c.strip() for c in self.line.query("CHAN?").split(",") if c.strip()]
        except BaseException:
            self.line.close()
            raise
        if not names or "CJ" not in names:
            self.line.close()
            raise InstrumentError(f"{self.name}: CHAN? answered {names!r}; expected channel names ending in CJ",
                                  hint="the device does not speak the generic probe contract")
        self.channels = [c for c in names if c != "CJ"]
        self._fields = names
        self._sensors = {c: REFERENCE_CHANNELS.get(c, "K") for c in self.channels}
        self._streaming = False
        self._period_s = 0.0
        self.garbage_lines = 0

    def _reading(self, values: dict[str, float | str], device_time_s: float | None) -> ThermalReading:
        cj = values.pop("CJ", None)
        celsius, faults = split_valid(values, self._sensors)
        cold = valid_or_none(cj, "THERMISTOR") if isinstance(cj, float) else None
        return ThermalReading(celsius, faults, cold, device_time_s, self.name)

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
        counter = GarbageCounter(self.name)
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
        """STREAM OFF, then leave the line clean for the next command.

        The board's acknowledgement can overtake stream lines already queued for sending (a
        sample taken while the command was parsed), so lines after `OK` are not answers either:
        a `CHAN?` round trip marks the end, and everything before its known answer is dropped.
        """
        self.line.write("STREAM OFF")
        self._drain_until(lambda line: line == "OK", MAX_STOP_LINES, "STREAM OFF not acknowledged")
        self._streaming = False
        expected = ",".join(self._fields)
        self.line.write("CHAN?")
        self._drain_until(lambda line: line == expected, MAX_SYNC_LINES,
                          "no clean answer after STREAM OFF (stream lines keep coming)")

    def _drain_until(self, done: Callable[[str], bool], limit: int, failure: str) -> None:
        skipped = 0
        for _ in range(limit):
            line = self.line.read_line()  # a corrupted (non-ASCII) stream line is skipped like the others
            if line is None:
                break
            if done(line):
                if skipped:
                    log.debug("%s: skipped %d stream lines still in flight", self.name, skipped)
                return
            skipped += 1
        raise InstrumentError(f"{self.name}: {failure} (skipped {skipped} lines)",
                              hint="power-cycle the probe board")

    def close(self) -> None:
        try:
            if self._streaming:
                try:
                    self.stop_stream()
                except InstrumentError as exc:
                    log.warning("%s", exc)
        finally:
            self.line.close()

