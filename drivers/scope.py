"""Oscilloscope drivers: Keysight InfiniiVision X and Rigol DS1000Z behind one small interface.

A test asks for an `Oscilloscope`; the station decides which model. Waveforms arrive as
preamble + binary block and are decoded to seconds (relative to the trigger) and volts with
numpy; hole and clipped codes are counted and masked, never passed on as numbers.

`single()` returns only once the scope is armed: the pre-trigger part of the record has to fill
before a trigger is seen, so a stimulus fired earlier would be missed. On the InfiniiVision the
latched :TER?/:AER? event registers are read (cleared) with the scope stopped before :SINGle, or
a scope left running would report a trigger at once; the DS1000Z is polled until :SINGle has
taken effect (WAIT), since its status shows the previous state for a while. Every wait is
bounded and fails with the instrument's address and identity and what to check.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Protocol, runtime_checkable

import numpy as np

from phonebench.core.errors import ConfigError, InstrumentError, InvalidMeasurement
from phonebench.drivers.visa import DEFAULT_TIMEOUT_S, InstrumentIdentity, ScpiInstrument

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
        except ValueError:
            raise InstrumentError(f"{source}: waveform preamble is not numeric: {text[:120]!r}",
                                  hint="the scope answered something else; check its model") from None
        if not all(np.isfinite(numbers)) or any(abs(n) >= INVALID_THRESHOLD for n in numbers):
            raise InstrumentError(f"{source}: waveform preamble has NaN, infinite or 9.9E37 fields: {text[:120]!r}",
                                  hint="the scope has no valid acquisition for this source; acquire again")
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
        # A plain conversion then two in-place float32 passes: ~25 % faster than a mixed-type multiply,
        # which numpy runs through its buffered casting loop.
        volts = self.codes.astype(np.float32)
        volts *= np.float32(pre.yincrement)
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
        """Arm one acquisition; returns once the scope is armed (its pre-trigger part filled)."""

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


TRIGGER_HINT = "check the trigger source, level and slope, and that the stimulus fired after single() returned"
ARM_HINT = ("the scope did not arm: check it is not in a menu or remote-locked, that the timebase's pre-trigger "
            "time is what the test expects, and power-cycle it if it stays stuck")
ARM_MARGIN_S = 5.0  # arming takes the pre-trigger time plus at most this


def _is_one(answer: str) -> bool:
    return answer.strip() in ("+1", "1")


def _pretrigger_s(span_s: float, center_s: float) -> float:
    """Seconds of record before the trigger for a centred reference: what must fill before arming."""
    return max(0.0, span_s / 2 - center_s)


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
        self._pretrigger = 0.0

    def configure_channel(self, channel: int, scale_v_div: float, offset_v: float = 0.0,
                          coupling: str = "DC", probe: float = 1.0) -> None:
        self.configure(f":CHANnel{channel}:DISPlay ON", f":CHANnel{channel}:PROBe {probe:g}",
                       f":CHANnel{channel}:SCALe {scale_v_div:g}", f":CHANnel{channel}:OFFSet {offset_v:g}",
                       f":CHANnel{channel}:COUPling {coupling}")

    def set_timebase(self, scale_s_div: float, center_s: float = 0.0) -> None:
        self.configure(":TIMebase:REFerence CENTer", f":TIMebase:SCALe {scale_s_div:g}",
                       f":TIMebase:POSition {center_s:g}")
        self._pretrigger = _pretrigger_s(10 * scale_s_div, center_s)

    def set_edge_trigger(self, channel: int, level_v: float, rising: bool = True) -> None:
        self.configure(":TRIGger:MODE EDGE", f":TRIGger:EDGE:SOURce CHANnel{channel}",
                       f":TRIGger:EDGE:LEVel {level_v:g}",
                       f":TRIGger:EDGE:SLOPe {'POSitive' if rising else 'NEGative'}", ":TRIGger:SWEep NORMal")

    def single(self) -> None:
        """Stop, clear the latched trigger and arm events, :SINGle, and wait until armed."""
        self.configure(":STOP")
        self.query(":TER?")  # event registers stay set until read: a running scope left both set
        self.query(":AER?")
        self.configure(":SINGle")
        self.poll_until(":AER?", _is_one, self._pretrigger + ARM_MARGIN_S, self.poll_s,
                        "arming after :SINGle (`:AER?` = 1)", ARM_HINT)

    def wait_triggered(self, timeout_s: float = 10.0) -> None:
        self.poll_until(":TER?", _is_one, timeout_s, self.poll_s, "trigger (`:TER?` = 1)", TRIGGER_HINT)

    def read_waveform(self, channel: int, points: int | None = None) -> Waveform:
        setup = [f":WAVeform:SOURce CHANnel{channel}", f":WAVeform:FORMat {self.waveform_format}",
                 ":WAVeform:UNSigned ON", ":WAVeform:BYTeorder LSBFirst", f":WAVeform:POINts:MODE {self.points_mode}"]
        if points is not None:
            setup.append(f":WAVeform:POINts {points}")
        # Settings, preamble, data and the error check in one message: one round trip per channel.
        text, codes = self.query_with_block(setup + [":WAVeform:PREamble?"], ":WAVeform:DATA?",
                                            np.uint8 if self.waveform_format == "BYTE" else "<u2")
        preamble = Preamble.parse(text, self.name)
        if preamble.format != (0 if self.waveform_format == "BYTE" else 1):
            raise InstrumentError(f"{self.name}: preamble format {preamble.format} after :WAVeform:FORMat "
                                  f"{self.waveform_format}", hint="the scope did not take the format setting")
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
        self._pretrigger = 0.0
        self.configure(f":ACQuire:MDEPth {memory_depth}")

    def configure_channel(self, channel: int, scale_v_div: float, offset_v: float = 0.0,
                          coupling: str = "DC", probe: float = 1.0) -> None:
        self.configure(f":CHANnel{channel}:DISPlay ON", f":CHANnel{channel}:PROBe {probe:g}",
                       f":CHANnel{channel}:SCALe {scale_v_div:g}", f":CHANnel{channel}:OFFSet {offset_v:g}",
                       f":CHANnel{channel}:COUPling {coupling}")

    def set_timebase(self, scale_s_div: float, center_s: float = 0.0) -> None:
        self.configure(f":TIMebase:MAIN:SCALe {scale_s_div:g}", f":TIMebase:MAIN:OFFSet {center_s:g}")
        self._pretrigger = _pretrigger_s(12 * scale_s_div, center_s)

    def set_edge_trigger(self, channel: int, level_v: float, rising: bool = True) -> None:
        self.configure(":TRIGger:MODE EDGE", f":TRIGger:EDGe:SOURce CHANnel{channel}",
                       f":TRIGger:EDGe:LEVel {level_v:g}",
                       f":TRIGger:EDGe:SLOPe {'POSitive' if rising else 'NEGative'}", ":TRIGger:SWEep NORMal")

    def single(self) -> None:
        """:SINGle, then wait until the status says WAIT: taken effect and armed."""
        self.configure(":SINGle")
        # Until :SINGle takes effect the status still shows the previous state (often STOP).
        self.poll_until(":TRIGger:STATus?", lambda a: a.strip().upper() == "WAIT",
                        self._pretrigger + ARM_MARGIN_S, self.poll_s, "arming after :SINGle (status WAIT)", ARM_HINT)

    def wait_triggered(self, timeout_s: float = 10.0) -> None:
        self.poll_until(":TRIGger:STATus?", lambda a: a.strip().upper() == "STOP", timeout_s, self.poll_s,
                        "trigger and completed acquisition (status STOP)", TRIGGER_HINT)

    def _record_points(self) -> int:
        rate = self.query_finite(":ACQuire:SRATe?", "the sample rate", positive=True)
        scale = self.query_finite(":TIMebase:MAIN:SCALe?", "the timebase scale", positive=True)
        return int(round(rate * scale * 12))

    def read_waveform(self, channel: int, points: int | None = None) -> Waveform:
        """The whole RAW record, read in batches with the scope stopped; `points` decimates it on the host.

        Commands go one per message (the DS1000Z parser is not relied on for ";"-joined units).
        """
        self.configure(":STOP", f":WAVeform:SOURce CHANnel{channel}", ":WAVeform:MODE RAW", ":WAVeform:FORMat BYTE")
        record = self._record_points()
        parts, preamble = [], None
        for start in range(1, record + 1, RIGOL_BATCH_POINTS):
            stop = min(start + RIGOL_BATCH_POINTS - 1, record)
            self.configure(f":WAVeform:STARt {start}", f":WAVeform:STOP {stop}")
            batch_pre = Preamble.parse(self.query(":WAVeform:PREamble?"), self.name)
            preamble = preamble or batch_pre
            codes = self.query_block(":WAVeform:DATA?", np.uint8)
            if codes.size != stop - start + 1:
                raise InstrumentError(f"{self.name}: batch {start}-{stop} returned {codes.size} points",
                                      hint="the transfer is corrupt; retry it")
            parts.append(codes)
        assert preamble is not None
        self.check_errors(f"RAW read of channel {channel}")
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
