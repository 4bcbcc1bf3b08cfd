"""Oscilloscope drivers: Keysight InfiniiVision X and Rigol DS1000Z behind one small interface.

A test asks for an `Oscilloscope`; the station decides which model. Each family is a table of
its channel, timebase, trigger and waveform commands (phonebench.drivers.scpi_table) plus its quirks in
code; waveforms arrive as preamble + binary block and are decoded by phonebench.drivers.waveform.

`single()` returns only once the scope is armed: the pre-trigger part of the record has to fill
before a trigger is seen, so a stimulus fired earlier would be missed. On the InfiniiVision the
latched :TER?/:AER? event registers are read (cleared) with the scope stopped before :SINGle, or
a scope left running would report a trigger at once; the DS1000Z is polled until :SINGle has
taken effect (WAIT), since its status shows the previous state for a while. Every wait is
bounded and fails with the instrument's address and identity and what to check.
"""
from __future__ import annotations

import logging
from dataclasses import replace
from typing import ClassVar, Protocol, runtime_checkable

import numpy as np

from phonebench.core.errors import ConfigError, InstrumentError
from .scpi_table import Bound, Channel, Setting, Table, fixed, number_of
from .visa import DEFAULT_TIMEOUT_S, InstrumentIdentity, ScpiInstrument
from .waveform import INVALID_THRESHOLD, Preamble, Waveform

__all__ = ["KeysightInfiniiVision", "Oscilloscope", "Preamble", "RigolDS1000Z", "Waveform"]
log = logging.getLogger(__name__)

RIGOL_BATCH_POINTS = 250_000  # DS1000Z: at most this many BYTE points per :WAV:DATA?
ON_OFF = {True: "ON", False: "OFF"}
SLOPE = {True: "POSitive", False: "NEGative"}
COUPLING = ("DC", "AC", "GND")


def _channel_table(skew: str) -> Table:
    """Both families share the channel commands; only the deskew command differs."""
    return {"display": Setting(":CHANnel{ch}:DISPlay {}", choices=ON_OFF, default=True),
            "probe": Setting(":CHANnel{ch}:PROBe {:g}", ":CHANnel{ch}:PROBe?", "ratio", (1e-4, 1e4)),
            "scale": Setting(":CHANnel{ch}:SCALe {:g}", ":CHANnel{ch}:SCALe?", "V/div", (1e-4, 1e4)),
            "offset": Setting(":CHANnel{ch}:OFFSet {:g}", ":CHANnel{ch}:OFFSet?", "V"),
            "coupling": Setting(":CHANnel{ch}:COUPling {}", choices=COUPLING),
            "skew": Setting(skew + " {:g}", skew + "?", "s")}


def _trigger_table(edge: str) -> Table:
    return {"mode": fixed(":TRIGger:MODE EDGE"),
            "source": Setting(f":TRIGger:{edge}:SOURce CHANnel{{}}", limits=(1, 4)),
            "level": Setting(f":TRIGger:{edge}:LEVel {{:g}}", f":TRIGger:{edge}:LEVel?", "V"),
            "slope": Setting(f":TRIGger:{edge}:SLOPe {{}}", choices=SLOPE),
            "sweep": fixed(":TRIGger:SWEep NORMal")}


KEYSIGHT: dict[str, Table] = {
    "channel": _channel_table(":CHANnel{ch}:PROBe:SKEW"),
    "timebase": {"reference": fixed(":TIMebase:REFerence CENTer"),
                 "scale": Setting(":TIMebase:SCALe {:g}", ":TIMebase:SCALe?", "s/div", (1e-12, 100)),
                 "center": Setting(":TIMebase:POSition {:g}", ":TIMebase:POSition?", "s")},
    "trigger": _trigger_table("EDGE"),
    "waveform": {"source": Setting(":WAVeform:SOURce CHANnel{}", limits=(1, 4)),
                 "format": Setting(":WAVeform:FORMat {}", choices=("BYTE", "WORD")),
                 "unsigned": fixed(":WAVeform:UNSigned ON"), "byteorder": fixed(":WAVeform:BYTeorder LSBFirst"),
                 "points_mode": Setting(":WAVeform:POINts:MODE {}", choices=("NORMal", "MAXimum", "RAW")),
                 "points": Setting(":WAVeform:POINts {}")},
}
RIGOL: dict[str, Table] = {
    "channel": _channel_table(":CHANnel{ch}:TCALibrate"),
    "timebase": {"scale": Setting(":TIMebase:MAIN:SCALe {:g}", ":TIMebase:MAIN:SCALe?", "s/div", (1e-12, 100)),
                 "center": Setting(":TIMebase:MAIN:OFFSet {:g}", ":TIMebase:MAIN:OFFSet?", "s")},
    "trigger": _trigger_table("EDGe"),
    # One command per message: the DS1000Z parser is not relied on for ";"-joined units.
    "waveform": {"stop": fixed(":STOP"), "source": Setting(":WAVeform:SOURce CHANnel{}", limits=(1, 4)),
                 "mode": fixed(":WAVeform:MODE RAW"), "format": fixed(":WAVeform:FORMat BYTE"),
                 "start": Setting(":WAVeform:STARt {}"), "end": Setting(":WAVeform:STOP {}")},
}


@runtime_checkable
class Oscilloscope(Protocol):
    name: str  # names it in every message: role, family, address (and model, serial once known)
    identity: InstrumentIdentity

    def channel(self, number: int) -> Channel:
        """Input `number` (from 1): what the methods below take, with its own settings
        (`scope.channel(2).scale`)."""

    def configure_channel(self, channel: Channel, scale_v_div: float, offset_v: float = 0.0,
                          coupling: str = "DC", probe: float = 1.0) -> None: ...

    def set_timebase(self, scale_s_div: float, center_s: float = 0.0) -> None:
        """Horizontal scale; center_s is the screen centre's time relative to the trigger."""

    def set_edge_trigger(self, channel: Channel, level_v: float, rising: bool = True) -> None: ...

    def single(self) -> None:
        """Arm one acquisition; returns once the scope is armed (its pre-trigger part filled)."""

    def wait_triggered(self, timeout_s: float = 10.0) -> None:
        """Block until the armed acquisition is complete; InstrumentError on timeout."""

    def read_waveform(self, channel: Channel, points: int | None = None) -> Waveform: ...

    def set_deskew(self, channel: Channel, seconds: float) -> None: ...

    def measure_delay(self, channel_a: Channel, channel_b: Channel) -> float | None:
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


class _TableScope(ScpiInstrument):
    """The interface's set-up methods, once, from the family's table."""

    role = "scope"
    table: ClassVar[dict[str, Table]]
    divisions: ClassVar[int]  # horizontal divisions on screen
    delay_query: ClassVar[str]

    def __init__(self, address: str, poll_s: float, backend: str, timeout_s: float, resource: object) -> None:
        super().__init__(address, backend, timeout_s, resource)
        self.poll_s = poll_s
        self._pretrigger = 0.0
        self.timebase = Bound(self, self.table["timebase"])
        self.trigger = Bound(self, self.table["trigger"])

    def channel(self, number: int) -> Channel:
        return Channel(self, number, self.table["channel"])

    def configure_channel(self, channel: int | Channel, scale_v_div: float, offset_v: float = 0.0,
                          coupling: str = "DC", probe: float = 1.0) -> None:
        self.channel(number_of(channel)).setup(probe=probe, scale=scale_v_div, offset=offset_v, coupling=coupling)

    def set_timebase(self, scale_s_div: float, center_s: float = 0.0) -> None:
        self.timebase.setup(scale=scale_s_div, center=center_s)
        # Seconds of record before the (centred) trigger reference: what must fill before arming.
        self._pretrigger = max(0.0, self.divisions * scale_s_div / 2 - center_s)

    def set_edge_trigger(self, channel: int | Channel, level_v: float, rising: bool = True) -> None:
        self.trigger.setup(source=number_of(channel), level=level_v, slope=rising)

    def set_deskew(self, channel: int | Channel, seconds: float) -> None:
        self.channel(number_of(channel)).skew = seconds

    def measure_delay(self, channel_a: int | Channel, channel_b: int | Channel) -> float | None:
        return _delay_value(self, self.delay_query.format(number_of(channel_a), number_of(channel_b)))


class KeysightInfiniiVision(_TableScope):
    family = "keysight-infiniivision"
    table, divisions, delay_query = KEYSIGHT, 10, ":MEASure:DELay? CHANnel{},CHANnel{}"

    def __init__(self, address: str, poll_s: float = 0.02, points_mode: str = "RAW", waveform_format: str = "BYTE",
                 backend: str = "@py", timeout_s: float = DEFAULT_TIMEOUT_S, resource: object = None) -> None:
        if waveform_format not in ("BYTE", "WORD"):
            raise ConfigError(f"scope waveform_format {waveform_format!r}",
                              hint="BYTE (8-bit) or WORD (16-bit, for averaged / high-resolution modes)")
        super().__init__(address, poll_s, backend, timeout_s, resource)
        self.points_mode = points_mode
        self.waveform_format = waveform_format

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

    def read_waveform(self, channel: int | Channel, points: int | None = None) -> Waveform:
        channel = number_of(channel)
        setup = Bound(self, self.table["waveform"]).commands(
            True, source=channel, format=self.waveform_format, points_mode=self.points_mode, points=points)
        # Settings, preamble, data and the error check in one message: one round trip per channel.
        text, codes = self.query_with_block(setup + [":WAVeform:PREamble?"], ":WAVeform:DATA?",
                                            np.uint8 if self.waveform_format == "BYTE" else "<u2")
        preamble = Preamble.parse(text, self.name)
        if preamble.format != (0 if self.waveform_format == "BYTE" else 1):
            raise InstrumentError(f"{self.name}: preamble format {preamble.format} after :WAVeform:FORMat "
                                  f"{self.waveform_format}", hint="the scope did not take the format setting")
        return Waveform(channel, preamble, codes, "keysight", self.name)


class RigolDS1000Z(_TableScope):
    family = "rigol-ds1000z"
    table, divisions, delay_query = RIGOL, 12, ":MEASure:ITEM? RDELay,CHANnel{},CHANnel{}"

    def __init__(self, address: str, poll_s: float = 0.02, memory_depth: int | str = "AUTO", backend: str = "@py",
                 timeout_s: float = DEFAULT_TIMEOUT_S, resource: object = None) -> None:
        super().__init__(address, poll_s, backend, timeout_s, resource)
        self.configure(f":ACQuire:MDEPth {memory_depth}")

    def single(self) -> None:
        """:SINGle, then wait until the status says WAIT: taken effect and armed."""
        self.configure(":SINGle")
        # Until :SINGle takes effect the status still shows the previous state (often STOP).
        self.poll_until(":TRIGger:STATus?", lambda a: a.strip().upper() == "WAIT",
                        self._pretrigger + ARM_MARGIN_S, self.poll_s, "arming after :SINGle (status WAIT)", ARM_HINT)

    def wait_triggered(self, timeout_s: float = 10.0) -> None:
        self.poll_until(":TRIGger:STATus?", lambda a: a.strip().upper() == "STOP", timeout_s, self.poll_s,
                        "trigger and completed acquisition (status STOP)", TRIGGER_HINT)

    def read_waveform(self, channel: int | Channel, points: int | None = None) -> Waveform:
        """The whole RAW record, read in batches with the scope stopped; `points` decimates it on the host."""
        channel = number_of(channel)
        wave = Bound(self, self.table["waveform"])
        wave.setup(source=channel)
        rate = self.query_finite(":ACQuire:SRATe?", "the sample rate", positive=True)
        record = int(round(rate * self.query_finite(":TIMebase:MAIN:SCALe?", "the timebase scale", positive=True)
                           * self.divisions))
        parts, preamble = [], None
        for start in range(1, record + 1, RIGOL_BATCH_POINTS):
            end = min(start + RIGOL_BATCH_POINTS - 1, record)
            wave.apply(start=start, end=end)
            batch_preamble = Preamble.parse(self.query(":WAVeform:PREamble?"), self.name)  # each one checked
            preamble = preamble or batch_preamble
            parts.append(self.query_block(":WAVeform:DATA?", np.uint8))
            if parts[-1].size != end - start + 1:
                raise InstrumentError(f"{self.name}: batch {start}-{end} returned {parts[-1].size} points",
                                      hint="the transfer is corrupt; retry it")
        assert preamble is not None
        self.check_errors(f"RAW read of channel {channel}")
        codes = np.concatenate(parts)
        waveform = Waveform(channel, replace(preamble, points=codes.size), codes, "rigol", self.name)
        return waveform.decimate(codes.size // points) if points is not None and points < codes.size else waveform
