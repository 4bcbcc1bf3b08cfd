"""Oscilloscope drivers: Keysight InfiniiVision X and Rigol DS1000Z behind one small interface.

A test asks for an `Oscilloscope`; the station decides which model. Waveforms arrive as
preamble + binary block and are decoded to seconds (relative to the trigger) and volts with
numpy; hole and clipped codes are counted and masked, never passed on as numbers.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Protocol, runtime_checkable

import numpy as np

from bench.core.errors import ConfigError, InstrumentError, InvalidMeasurement
from drivers.visa import DEFAULT_TIMEOUT_S, InstrumentIdentity, ScpiInstrument

log = logging.getLogger(__name__)

INVALID_THRESHOLD = 9.9e37  # scopes answer 9.9E+37 for a measurement they could not make
RIGOL_BATCH_POINTS = 250_000  # DS1000Z: at most this many BYTE points per :WAV:DATA?


@dataclass(frozen=True)
class Preamble:
    format: int
    type: int
    points: int
    count: int
    xincrement: float
    xorigin: float
    xreference: float
    yincrement: float
    yorigin: float
    yreference: float

    @classmethod
    def parse(cls, text: str, source: str) -> Preamble:
        fields = text.strip().split(",")
        if len(fields) != 10:
            raise InstrumentError(f"{source}: waveform preamble has {len(fields)} fields, expected 10: "
                                  f"{text[:120]!r}", hint="the scope answered something else; check its model")
        try:
            numbers = [float(f) for f in fields]
            if not all(math.isfinite(n) for n in numbers):
                raise ValueError("non-finite")
        except ValueError:
            raise InstrumentError(f"{source}: waveform preamble is not numeric: {text[:120]!r}",
                                  hint="the scope answered something else; check its model") from None
        pre = cls(int(numbers[0]), int(numbers[1]), int(numbers[2]), int(numbers[3]), *numbers[4:])
        if pre.points <= 0 or pre.xincrement <= 0 or pre.yincrement <= 0:
            raise InstrumentError(f"{source}: waveform preamble is inconsistent: {text[:120]!r}",
                                  hint="points, x and y increments must be positive")
        return pre


@dataclass
class Waveform:
    """One channel's record: the instrument's codes, decoded to volts and seconds on first use.

    Decoding is lazy and float32 for volts (8/16-bit data loses nothing), float64 for time
    (nanoseconds over seconds). Holes are NaN in `volts`; holes and clipped samples are False
    in `valid` and counted at construction.
    """

    channel: int
    preamble: Preamble
    codes: np.ndarray
    scheme: str  # "keysight": 0 hole, 1 / top clipped; "rigol": ADC rails clipped, no holes
    instrument: str = ""
    holes: int = field(init=False)
    clipped_low: int = field(init=False)
    clipped_high: int = field(init=False)

    def __post_init__(self) -> None:
        if self.codes.size != self.preamble.points:
            raise InstrumentError(f"{self.instrument}: waveform block has {self.codes.size} points, preamble "
                                  f"says {self.preamble.points}", hint="the preamble does not describe this "
                                                                      "block; re-read both")
        hole, low, high = self._special_codes()
        self.holes = self.clipped_low = self.clipped_high = 0
        if self.codes.size and (int(self.codes.min()) <= max(low, hole or 0) or int(self.codes.max()) >= high):
            # Only a record that touches a special code is counted in full (min/max are cheap).
            self.holes = int(np.count_nonzero(self.codes == hole)) if hole is not None else 0
            self.clipped_low = int(np.count_nonzero(self.codes == low))
            self.clipped_high = int(np.count_nonzero(self.codes == high))

    def _special_codes(self) -> tuple[int | None, int, int]:
        top = (1 << (8 * self.codes.dtype.itemsize)) - 1
        return (0, 1, top) if self.scheme == "keysight" else (None, 0, top)

    @cached_property
    def volts(self) -> np.ndarray:
        pre = self.preamble
        if self.scheme == "keysight":  # V = (code - yref) * yinc + yorigin
            offset = pre.yorigin - pre.yreference * pre.yincrement
        else:  # V = (code - yorigin - yref) * yinc
            offset = -(pre.yorigin + pre.yreference) * pre.yincrement
        volts = np.multiply(self.codes, np.float32(pre.yincrement), dtype=np.float32)
        volts += np.float32(offset)
        if self.holes:
            volts[self.codes == 0] = np.nan
        return volts

    @cached_property
    def t(self) -> np.ndarray:
        """Seconds relative to the trigger."""
        pre = self.preamble
        return (np.arange(self.codes.size) - pre.xreference) * pre.xincrement + pre.xorigin

    @cached_property
    def valid(self) -> np.ndarray:
        hole, low, high = self._special_codes()
        bad = (self.codes == low) | (self.codes == high)
        if hole is not None and self.holes:
            bad |= self.codes == hole
        return ~bad

    @property
    def clipped(self) -> int:
        return self.clipped_low + self.clipped_high

    @property
    def sample_interval_s(self) -> float:
        return self.preamble.xincrement

    def decimate(self, stride: int) -> Waveform:
        pre = replace(self.preamble, points=self.codes[::stride].size, xincrement=self.preamble.xincrement * stride)
        return Waveform(self.channel, pre, self.codes[::stride], self.scheme, self.instrument)

    def require_valid(self) -> Waveform:
        """Raise InvalidMeasurement unless every sample is a real, unclipped reading."""
        if self.holes or self.clipped:
            raise InvalidMeasurement(
                f"{self.instrument} channel {self.channel}: {self.clipped_low} samples clipped low, "
                f"{self.clipped_high} clipped high, {self.holes} holes in {self.codes.size}",
                hint="increase the channel's volts/div or adjust its offset so the signal stays on screen")
        return self


@runtime_checkable
class Oscilloscope(Protocol):
    identity: InstrumentIdentity

    def configure_channel(self, channel: int, scale_v_div: float, offset_v: float = 0.0,
                          coupling: str = "DC", probe: float = 1.0) -> None: ...

    def set_timebase(self, scale_s_div: float, center_s: float = 0.0) -> None:
        """Horizontal scale; center_s is the screen centre's time relative to the trigger."""

    def set_edge_trigger(self, channel: int, level_v: float, rising: bool = True) -> None: ...

    def single(self) -> None:
        """Arm one acquisition (returns once the scope has accepted it)."""

    def wait_triggered(self, timeout_s: float = 10.0) -> None:
        """Block until the armed acquisition is complete; InstrumentError on timeout."""

    def read_waveform(self, channel: int, points: int | None = None) -> Waveform: ...

    def set_deskew(self, channel: int, seconds: float) -> None: ...

    def measure_delay(self, channel_a: int, channel_b: int) -> float | None:
        """The scope's own edge-to-edge delay; None when it reports the measurement invalid."""

    def close(self) -> None: ...


def _delay_value(scope: ScpiInstrument, command: str) -> float | None:
    value = scope.query_float(command)
    if not np.isfinite(value) or abs(value) >= INVALID_THRESHOLD:
        log.info("%s: `%s` reported an invalid measurement (%s)", scope.name, command, value)
        return None
    return value


def _poll(scope: ScpiInstrument, command: str, done: set[str], timeout_s: float, poll_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if scope.query(command).strip().upper() in done:
            return
        if time.monotonic() >= deadline:
            raise InstrumentError(f"{scope.name}: no trigger within {timeout_s:g} s (`{command}`)",
                                  hint="check the trigger source, level and slope, and that the stimulus fired")
        time.sleep(poll_s)


class KeysightInfiniiVision(ScpiInstrument):
    role = "scope"
    family = "keysight-infiniivision"

    def __init__(self, address: str, poll_s: float = 0.02, points_mode: str = "RAW", waveform_format: str = "BYTE",
                 backend: str = "@py", timeout_s: float = DEFAULT_TIMEOUT_S, resource: object = None) -> None:
        if waveform_format not in ("BYTE", "WORD"):
            raise ConfigError(f"scope waveform_format {waveform_format!r}",
                              hint="BYTE (8-bit) or WORD (16-bit, for averaged / high-resolution modes)")
        super().__init__(address, backend, timeout_s, resource)
        self.poll_s = poll_s
        self.points_mode = points_mode
        self.waveform_format = waveform_format

    def configure_channel(self, channel: int, scale_v_div: float, offset_v: float = 0.0,
                          coupling: str = "DC", probe: float = 1.0) -> None:
        self.configure(f":CHANnel{channel}:DISPlay ON", f":CHANnel{channel}:PROBe {probe:g}",
                       f":CHANnel{channel}:SCALe {scale_v_div:g}", f":CHANnel{channel}:OFFSet {offset_v:g}",
                       f":CHANnel{channel}:COUPling {coupling}")

    def set_timebase(self, scale_s_div: float, center_s: float = 0.0) -> None:
        self.configure(":TIMebase:REFerence CENTer", f":TIMebase:SCALe {scale_s_div:g}",
                       f":TIMebase:POSition {center_s:g}")

    def set_edge_trigger(self, channel: int, level_v: float, rising: bool = True) -> None:
        self.configure(":TRIGger:MODE EDGE", f":TRIGger:EDGE:SOURce CHANnel{channel}",
                       f":TRIGger:EDGE:LEVel {level_v:g}",
                       f":TRIGger:EDGE:SLOPe {'POSitive' if rising else 'NEGative'}", ":TRIGger:SWEep NORMal")

    def single(self) -> None:
        self.configure(":SINGle")

    def wait_triggered(self, timeout_s: float = 10.0) -> None:
        _poll(self, ":TER?", {"+1", "1"}, timeout_s, self.poll_s)

    def read_waveform(self, channel: int, points: int | None = None) -> Waveform:
        setup = [f":WAVeform:SOURce CHANnel{channel}", f":WAVeform:FORMat {self.waveform_format}",
                 ":WAVeform:UNSigned ON", ":WAVeform:BYTeorder LSBFirst", f":WAVeform:POINts:MODE {self.points_mode}"]
        if points is not None:
            setup.append(f":WAVeform:POINts {points}")
        preamble = Preamble.parse(self.setup_and_query(setup, ":WAVeform:PREamble?"), self.name)
        codes = self.query_block(":WAVeform:DATA?", np.uint8 if preamble.format == 0 else "<u2")
        return Waveform(channel, preamble, codes, "keysight", self.name)

    def set_deskew(self, channel: int, seconds: float) -> None:
        self.configure(f":CHANnel{channel}:PROBe:SKEW {seconds:g}")

    def measure_delay(self, channel_a: int, channel_b: int) -> float | None:
        return _delay_value(self, f":MEASure:DELay? CHANnel{channel_a},CHANnel{channel_b}")


class RigolDS1000Z(ScpiInstrument):
    role = "scope"
    family = "rigol-ds1000z"

    def __init__(self, address: str, poll_s: float = 0.02, memory_depth: int | str = "AUTO", backend: str = "@py",
                 timeout_s: float = DEFAULT_TIMEOUT_S, resource: object = None) -> None:
        super().__init__(address, backend, timeout_s, resource)
        self.poll_s = poll_s
        self.configure(f":ACQuire:MDEPth {memory_depth}")

    def configure_channel(self, channel: int, scale_v_div: float, offset_v: float = 0.0,
                          coupling: str = "DC", probe: float = 1.0) -> None:
        self.configure(f":CHANnel{channel}:DISPlay ON", f":CHANnel{channel}:PROBe {probe:g}",
                       f":CHANnel{channel}:SCALe {scale_v_div:g}", f":CHANnel{channel}:OFFSet {offset_v:g}",
                       f":CHANnel{channel}:COUPling {coupling}")

    def set_timebase(self, scale_s_div: float, center_s: float = 0.0) -> None:
        self.configure(f":TIMebase:MAIN:SCALe {scale_s_div:g}", f":TIMebase:MAIN:OFFSet {center_s:g}")

    def set_edge_trigger(self, channel: int, level_v: float, rising: bool = True) -> None:
        self.configure(":TRIGger:MODE EDGE", f":TRIGger:EDGe:SOURce CHANnel{channel}",
                       f":TRIGger:EDGe:LEVel {level_v:g}",
                       f":TRIGger:EDGe:SLOPe {'POSitive' if rising else 'NEGative'}", ":TRIGger:SWEep NORMal")

    def single(self) -> None:
        self.configure(":SINGle")

    def wait_triggered(self, timeout_s: float = 10.0) -> None:
        _poll(self, ":TRIGger:STATus?", {"STOP"}, timeout_s, self.poll_s)

    def _record_points(self) -> int:
        rate = self.query_float(":ACQuire:SRATe?")
        scale = self.query_float(":TIMebase:MAIN:SCALe?")
        return int(round(rate * scale * 12))

    def read_waveform(self, channel: int, points: int | None = None) -> Waveform:
        """The whole RAW record, read in batches; `points` decimates it on the host."""
        self.configure(f":WAVeform:SOURce CHANnel{channel}", ":WAVeform:MODE RAW", ":WAVeform:FORMat BYTE")
        record = self._record_points()
        parts, preamble = [], None
        for start in range(1, record + 1, RIGOL_BATCH_POINTS):
            stop = min(start + RIGOL_BATCH_POINTS - 1, record)
            batch_pre = Preamble.parse(self.setup_and_query(
                [f":WAVeform:STARt {start}", f":WAVeform:STOP {stop}"], ":WAVeform:PREamble?"), self.name)
            preamble = preamble or batch_pre
            codes = self.query_block(":WAVeform:DATA?", np.uint8)
            if codes.size != stop - start + 1:
                raise InstrumentError(f"{self.name}: batch {start}-{stop} returned {codes.size} points",
                                      hint="the transfer is corrupt; retry it")
            parts.append(codes)
        assert preamble is not None
        codes = np.concatenate(parts)
        preamble = replace(preamble, points=codes.size)
        waveform = Waveform(channel, preamble, codes, "rigol", self.name)
        if points is not None and points < codes.size:
            waveform = waveform.decimate(codes.size // points)
        return waveform

    def set_deskew(self, channel: int, seconds: float) -> None:
        self.configure(f":CHANnel{channel}:TCALibrate {seconds:g}")

    def measure_delay(self, channel_a: int, channel_b: int) -> float | None:
        return _delay_value(self, f":MEASure:ITEM? RDELay,CHANnel{channel_a},CHANnel{channel_b}")


def decode_keysight(codes: np.ndarray, preamble: Preamble, channel: int, source: str = "") -> Waveform:
    """InfiniiVision unsigned codes: 0 = hole, 1 = clipped low, top code = clipped high."""
    return Waveform(channel, preamble, codes, "keysight", source)


def decode_rigol(codes: np.ndarray, preamble: Preamble, channel: int, source: str = "") -> Waveform:
    """DS1000Z codes: V = (code - yorigin - yref) * yinc; the ADC rails 0 and 255 are clipped."""
    return Waveform(channel, preamble, codes, "rigol", source)
