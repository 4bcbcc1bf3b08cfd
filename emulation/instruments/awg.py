"""Emulated Keysight 33500B-series waveform generator (a two-channel 33522B): the audio stimulus.

Modelled after the 33500 Series Operating and Service Guide's SCPI reference, per channel
(`SOURce1`/`SOURce2`, `OUTPut1`/`OUTPut2`, `TRIGger1`/`TRIGger2`; no suffix = channel 1), each
channel with its own settings and its own volatile arb memory:

- Waveforms: `FUNCtion SINusoid|SQUare|TRIangle|RAMP|PULSe|PRBS|NOISe|ARB|DC` (queries answer the
  short forms `SIN`, `SQU`, `TRI`, ...), `FREQuency`, `PHASe`, `FUNCtion:SQUare:DCYCle`,
  `FUNCtion:RAMP:SYMMetry`, `FUNCtion:PULSe:WIDTh`, `APPLy:<function> [f[,amp[,offset]]]`, `APPLy?`.
- Levels: `VOLTage` (in `VOLTage:UNIT VPP|VRMS|DBM`), `VOLTage:OFFSet`, `VOLTage:HIGH|LOW`, into the
  load set with `OUTPut:LOAD` (50 Ω at power-on, 1 Ω to 10 kΩ or INFinity). Amplitude and offset are
  bound together: |offset| + Vpp/2 <= 5 V into 50 Ω (10 V into high impedance); a setting past it is
  clipped to the limit and queues -222 "Data out of range". Changing the load rescales the displayed
  levels, the signal at the connector stays the same (no error).
- Arbs: `DATA:ARBitrary name,<values or float32 block>`, `DATA:ARBitrary:DAC name,<int16 list or block>`
  (byte order `FORMat:BORDer`), `DATA:VOLatile:CLEar|CATalog?|FREE?`, `FUNCtion:ARBitrary name`,
  `FUNCtion:ARBitrary:SRATe|POINts?|ADVance|FILTer`.
- Burst: `BURSt:STATe|MODE|NCYCles|INTernal:PERiod|PHASe`; triggers: `TRIGger:SOURce IMMediate|EXTernal|
  TIMer|BUS`, `TRIGger:SLOPe`, `TRIGger:DELay`, `TRIGger[:IMMediate]`, `*TRG` (every channel on BUS).
- Output: `OUTPut ON|OFF`, `OUTPut:LOAD`, `OUTPut:POLarity`; `SYSTem:BEEP`, `DISPlay:TEXT[:CLEar]`.
- Stored and answered back, acting on nothing modelled: burst gate polarity, output mode, sync
  and trigger out, trigger count/level/timer, voltage limits and autorange, `*PSC`.

The fixture is wired to channel 1's output (`WIRED_CHANNEL`): a bus-triggered burst there puts
its waveform (the arb clip or `NCYCles` periods of the built-in function) into the world at that
simulated instant - it shows on scope channel 1 and the phone hears it. Channel 2 drives nothing
the world can see, as on a bench wired to channel 1. A continuous (un-bursted) output is not put
into the world. VOLT is the amplitude into the set load; the fixture is high impedance, so the
connector's open-circuit voltage is what it sees (twice the 50 Ω setting).
"""
from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .scpi import (
    HEADER_SUFFIX,
    ILLEGAL_VALUE,
    OUT_OF_RANGE,
    SETTINGS_CONFLICT,
    TRIGGER_IGNORED,
    Call,
    Handler,
    ScpiError,
    short_form,
)
from .server import InstrumentServer, Kind, enumerated, fixed, numeric, on_off
from ..world import World

log = logging.getLogger(__name__)

IDN = "Keysight Technologies,33522B,MY57301234,4.03-1.19-2.00-52-00"
OPTIONS = "MEM"  # *OPT?: the 16 MSa memory option
CHANNELS = (1, 2)
WIRED_CHANNEL = 1  # the output the fixture's scope input and speaker amplifier hang on
MIN_POINTS, MAX_POINTS = 8, 1_000_000
MAX_ARBS = 32
SOURCE_OHM = 50.0
MAX_V_50_OHM = 5.0  # |offset| + Vpp/2 into 50 ohm
MIN_VPP_50_OHM = 1e-3
FUNCTIONS = ("SINusoid", "SQUare", "TRIangle", "RAMP", "PULSe", "PRBS", "NOISe", "ARB", "DC")
MAX_FREQUENCY = {"SINusoid": 30e6, "SQUare": 30e6, "TRIangle": 200e3, "RAMP": 200e3, "PULSe": 30e6,
                 "PRBS": 30e6, "NOISe": 30e6, "ARB": 30e6, "DC": 30e6}
MIN_FREQUENCY = 1e-6
BURST_RENDER_RATE = 200_000.0  # samples/s at which a built-in burst is put into the world
MAX_RENDER_SAMPLES = 2_000_000
INFINITE = 9.9e37


@dataclass
class Arb:
    samples: np.ndarray  # normalised to [-1, 1]


@dataclass
class Channel:
    """One output's settings (power-on / *RST values)."""

    function: str = "SINusoid"
    frequency: float = 1e3
    vpp: float = 0.1  # into the set load
    offset: float = 0.0
    phase: float = 0.0
    unit: str = "VPP"
    duty: float = 50.0
    symmetry: float = 100.0
    pulse_width: float = 100e-6
    output_on: bool = False
    load_ohm: float | None = 50.0  # None = INFinity
    polarity: str = "NORMal"
    burst_on: bool = False
    burst_mode: str = "TRIGgered"
    burst_cycles: float = 1.0
    burst_period: float = 10e-3
    burst_phase: float = 0.0
    trigger_source: str = "IMMediate"
    trigger_slope: str = "POSitive"
    trigger_delay: float = 0.0
    arb_name: str = ""
    srate: float = 40_000.0
    arb_advance: str = "SRATe"
    arb_filter: str = "NORMal"
    arbs: dict[str, Arb] = field(default_factory=dict)  # each channel has its own volatile memory

    def v_max(self) -> float:
        """Largest |level| into the set load: 5 V into 50 ohm, 10 V open circuit."""
        return MAX_V_50_OHM * self.gain()

    def gain(self) -> float:
        """Displayed volts per volt into 50 ohm for the set load (1 at 50 ohm, 2 at INFinity)."""
        if self.load_ohm is None:
            return 2.0
        return 2.0 * self.load_ohm / (self.load_ohm + SOURCE_OHM)

    def open_circuit_peak(self) -> float:
        """Peak volts at a high-impedance input (the fixture) for the set amplitude."""
        return self.vpp / 2 * 2.0 / self.gain()


class AwgServer(InstrumentServer):
    family = "keysight-33500b"
    idn = IDN
    options = OPTIONS
    SAVED_STATE = ("channels",)
    SAVE_SLOTS = range(5)  # 0 is the power-down state, 1-4 the user's
    COMMAND_LATENCY_S = 1e-3  # simulated time a command unit takes (a *TRG plays this much later)

    def __init__(self, world: World, port: int = 0) -> None:
        super().__init__(port)
        self.world = world
        self.played: list[float] = []  # world times of each burst onset on the wired output, for tests
        self.reset()
        self._register()

    def reset(self) -> None:
        self.channels = {n: Channel() for n in CHANNELS}
        self.big_endian = True
        self.display_text = ""

    @property
    def arbs(self) -> dict[str, Arb]:
        """Channel 1's volatile memory (the wired channel's clips, for tests)."""
        return self.channels[WIRED_CHANNEL].arbs

    def elapse(self, seconds: float) -> None:
        self.world.wait(seconds)

    # --- triggering ------------------------------------------------------------------------
    def bus_trigger(self) -> None:
        """*TRG: every channel whose trigger source is BUS and which is in triggered burst."""
        taken = [n for n, ch in self.channels.items()
                 if ch.trigger_source == "BUS" and ch.burst_on and ch.burst_mode == "TRIGgered"]
        if not taken:
            raise ScpiError(TRIGGER_IGNORED, "no channel in triggered burst with TRIG:SOUR BUS")
        for n in taken:
            self._fire(n)

    def _trigger_channel(self, n: int) -> None:
        ch = self.channels[n]
        if not (ch.burst_on and ch.burst_mode == "TRIGgered"):
            raise ScpiError(TRIGGER_IGNORED, f"channel {n} is not in triggered burst")
        self._fire(n)

    def _fire(self, n: int) -> None:
        ch = self.channels[n]
        if not ch.output_on:
            log.info("%s: channel %d triggered with its output off: nothing plays", self.family, n)
            return
        samples, rate = self._burst_waveform(ch)
        if n != WIRED_CHANNEL:
            log.info("%s: channel %d burst; the fixture hangs on channel %d", self.family, n, WIRED_CHANNEL)
            return
        if ch.polarity == "INVerted":
            samples = -samples
        self.played.append(self.world.clock.now())
        self.world.play_stimulus(samples, rate, ch.open_circuit_peak())

    def _burst_waveform(self, ch: Channel) -> tuple[np.ndarray, float]:
        """(samples in [-1, 1], sample rate) of one triggered burst."""
        if ch.function == "ARB":
            if ch.arb_name not in ch.arbs:
                raise ScpiError(SETTINGS_CONFLICT, "no arb selected (FUNC:ARB <name>)")
            cycles = max(1, int(ch.burst_cycles))
            return np.tile(ch.arbs[ch.arb_name].samples, cycles), ch.srate
        if ch.function in ("NOISe", "PRBS", "DC"):
            raise ScpiError(SETTINGS_CONFLICT, f"a burst of {short_form(ch.function)} is not modelled")
        rate = max(BURST_RENDER_RATE, 20 * ch.frequency)
        count = int(round(ch.burst_cycles * rate / ch.frequency))
        if count > MAX_RENDER_SAMPLES:
            raise ScpiError(SETTINGS_CONFLICT, f"a burst of {count} samples is not modelled")
        cycle = (np.arange(count) * ch.frequency / rate + (ch.burst_phase + ch.phase) / 360.0) % 1.0
        shape = {
            "SINusoid": lambda x: np.sin(2 * np.pi * x),
            "SQUare": lambda x: np.where(x < ch.duty / 100, 1.0, -1.0),
            "PULSe": lambda x: np.where(x < ch.pulse_width * ch.frequency, 1.0, -1.0),
            "TRIangle": lambda x: 1 - 4 * np.abs(((x + 0.25) % 1.0) - 0.5),
            "RAMP": lambda x: _ramp(x, ch.symmetry / 100),
        }[ch.function]
        return shape(cycle), rate

    # --- levels ------------------------------------------------------------------------------
    def _amplitude_display(self, ch: Channel) -> float:
        """The amplitude in the channel's VOLT:UNIT."""
        if ch.unit == "VPP":
            return ch.vpp
        vrms = ch.vpp / _crest(ch.function)
        if ch.unit == "VRMS":
            return vrms
        assert ch.load_ohm is not None  # DBM needs a finite load (refused otherwise)
        return 10 * math.log10(vrms ** 2 / ch.load_ohm / 1e-3)

    def _vpp_from(self, ch: Channel, value: float) -> float:
        if ch.unit == "VPP":
            return value
        if ch.unit == "DBM":
            if ch.load_ohm is None:
                raise ScpiError(SETTINGS_CONFLICT, "dBm needs a finite OUTP:LOAD")
            value = math.sqrt(10 ** (value / 10) * 1e-3 * ch.load_ohm)
        return value * _crest(ch.function)

    def _set_levels(self, ch: Channel, vpp: float | None = None, offset: float | None = None) -> None:
        """Apply amplitude and/or offset within |offset| + Vpp/2 <= Vmax; a value past the limit is
        clipped to it and -222 queued, as the instrument does."""
        v_max = ch.v_max()
        min_vpp = MIN_VPP_50_OHM * ch.gain()
        if vpp is not None:
            limit = 2 * (v_max - abs(ch.offset if offset is None else offset))
            if vpp > limit or vpp < min_vpp:
                clipped = max(min(vpp, limit), min_vpp)
                self.push_error(ScpiError(OUT_OF_RANGE, f"amplitude {vpp:g} Vpp clipped to {clipped:g}"))
                vpp = clipped
            ch.vpp = vpp
        if offset is not None:
            limit = max(v_max - ch.vpp / 2, 0.0)
            if abs(offset) > limit:
                clipped = math.copysign(limit, offset)
                self.push_error(ScpiError(OUT_OF_RANGE, f"offset {offset:g} V clipped to {clipped:g}"))
                offset = clipped
            ch.offset = offset

    def _set_load(self, ch: Channel, load: float | None) -> None:
        """The displayed levels follow the load; the connector's voltage stays (no error)."""
        ratio = 1.0 / ch.gain()
        ch.load_ohm = load
        ratio *= ch.gain()
        ch.vpp *= ratio
        ch.offset *= ratio

    def _set_frequency(self, ch: Channel, value: float) -> None:
        top = MAX_FREQUENCY[ch.function]
        if not MIN_FREQUENCY <= value <= top:
            clipped = min(max(value, MIN_FREQUENCY), top)
            self.push_error(ScpiError(OUT_OF_RANGE, f"frequency {value:g} Hz clipped to {clipped:g}"))
            value = clipped
        ch.frequency = value

    # --- commands ----------------------------------------------------------------------------
    def _register(self) -> None:
        t = self.tree

        def chan(call: Call) -> Channel:
            n = call.suffixes[0] if call.suffixes else 1
            if n not in self.channels:
                raise ScpiError(HEADER_SUFFIX, f"channel {n}; the 33522B has channels 1 and 2")
            return self.channels[n]

        def number_setter(attr: str, lo: float, hi: float, default: float) -> Handler:
            return lambda c: setattr(chan(c), attr, c.number(0, lo, hi, default))

        def option_setter(attr: str, *options: str) -> Handler:
            return lambda c: setattr(chan(c), attr, c.option(0, *options))

        def number_query(read: Callable[[Channel], float], lo: float | None = None, hi: float | None = None
                         ) -> Handler:
            def handler(call: Call) -> str:
                if call.has(0):  # FREQ? MIN / MAX
                    return _num(call.keyword_number(0, lo, hi))
                return _num(read(chan(call)))
            return handler

        def flag_query(attr: str) -> Handler:
            return lambda c: str(int(getattr(chan(c), attr)))

        def store(ch: Channel, name_arg: str, samples: np.ndarray) -> None:
            name = name_arg.strip().strip('"').upper()
            if not name or len(name) > 12 or not name[0].isalpha():
                raise ScpiError(ILLEGAL_VALUE, f"arb name {name_arg!r}")
            if not MIN_POINTS <= samples.size <= MAX_POINTS:
                raise ScpiError(OUT_OF_RANGE, f"{samples.size} points; {MIN_POINTS}..{MAX_POINTS}")
            if name not in ch.arbs and len(ch.arbs) >= MAX_ARBS:
                raise ScpiError(OUT_OF_RANGE, "volatile memory full (DATA:VOL:CLE)")
            ch.arbs[name] = Arb(samples)

        def arb_values(call: Call, width: int, kind: str) -> np.ndarray:
            """DATA:ARB[:DAC] values: one block of `width`-byte numbers (FORM:BORD order) or a list."""
            values = call.rest(1)
            if len(values) == 1 and isinstance(values[0], bytes):
                block = values[0]
                if len(block) % width:
                    raise ScpiError(ILLEGAL_VALUE, f"the block must hold {8 * width}-bit values")
                order = ">" if self.big_endian else "<"
                return np.frombuffer(block, dtype=f"{order}{kind}{width}").astype(np.float64)
            return np.array([_value(v) for v in values])

        def data_dac(call: Call) -> None:
            codes = arb_values(call, 2, "i")
            if codes.size and (np.max(np.abs(codes)) > 32767 or np.any(codes != np.round(codes))):
                raise ScpiError(OUT_OF_RANGE, "DAC codes are integers from -32767 to +32767")
            store(chan(call), call.arg(0), np.clip(codes / 32767.0, -1.0, 1.0))

        def data_float(call: Call) -> None:
            samples = arb_values(call, 4, "f")
            if samples.size and np.max(np.abs(samples)) > 1.0:
                raise ScpiError(OUT_OF_RANGE, "arb values must lie in [-1, 1]")
            store(chan(call), call.arg(0), samples)

        def clear(call: Call) -> None:
            ch = chan(call)
            ch.arbs.clear()
            ch.arb_name = ""

        def select(call: Call) -> None:
            ch = chan(call)
            name = call.arg(0).strip().strip('"').upper()
            if name not in ch.arbs:
                raise ScpiError(ILLEGAL_VALUE, f"no arb named {name} in this channel's volatile memory")
            ch.arb_name = name

        def function(call: Call) -> None:
            ch = chan(call)
            ch.function = call.option(0, *FUNCTIONS)
            if ch.frequency > MAX_FREQUENCY[ch.function]:
                ch.frequency = MAX_FREQUENCY[ch.function]
                self.push_error(ScpiError(SETTINGS_CONFLICT, "frequency clipped to the function's limit"))

        def frequency(call: Call) -> None:
            ch = chan(call)
            self._set_frequency(ch, call.keyword_number(0, MIN_FREQUENCY, MAX_FREQUENCY[ch.function], 1e3))

        def voltage(call: Call) -> None:
            ch = chan(call)
            top = 2 * ch.v_max()
            value = call.keyword_number(0, self._amplitude_display_of(ch, MIN_VPP_50_OHM * ch.gain()),
                                        self._amplitude_display_of(ch, top), self._amplitude_display_of(ch, 0.1))
            self._set_levels(ch, vpp=self._vpp_from(ch, value))

        def offset(call: Call) -> None:
            ch = chan(call)
            limit = max(ch.v_max() - ch.vpp / 2, 0.0)
            self._set_levels(ch, offset=call.keyword_number(0, -limit, limit, 0.0))

        def high(call: Call) -> None:
            ch = chan(call)
            low = ch.offset - ch.vpp / 2
            level = call.keyword_number(0, -ch.v_max(), ch.v_max(), 0.05)
            self._high_low(ch, level, low)

        def low(call: Call) -> None:
            ch = chan(call)
            top = ch.offset + ch.vpp / 2
            level = call.keyword_number(0, -ch.v_max(), ch.v_max(), -0.05)
            self._high_low(ch, top, level)

        def unit(call: Call) -> None:
            ch = chan(call)
            value = call.option(0, "VPP", "VRMS", "DBM")
            if value == "DBM" and ch.load_ohm is None:
                raise ScpiError(SETTINGS_CONFLICT, "dBm needs a finite OUTP:LOAD")
            ch.unit = value

        def load(call: Call) -> None:
            text = call.arg(0).strip().upper()
            value = None if text in ("INF", "INFINITY", "9.9E37", "9.9E+37") else call.number(0, 1.0, 10_000.0, 50.0)
            ch = chan(call)
            if value is None and ch.unit == "DBM":
                ch.unit = "VPP"  # dBm means nothing into an open circuit; the unit falls back to Vpp
            self._set_load(ch, value)

        def cycles(call: Call) -> None:
            text = call.arg(0).strip().upper()
            chan(call).burst_cycles = INFINITE if text in ("INF", "INFINITY") else float(int(
                call.number(0, 1, 1e8, 1)))

        def trigger_source(call: Call) -> None:
            chan(call).trigger_source = call.option(0, "IMMediate", "EXTernal", "TIMer", "BUS")

        def apply(shape: str) -> Handler:
            def handler(call: Call) -> None:
                ch = chan(call)
                ch.function = shape
                if call.has(0) and call.arg(0).strip().upper() not in ("DEF", "DEFAULT"):
                    self._set_frequency(ch, call.keyword_number(0, MIN_FREQUENCY, MAX_FREQUENCY[shape], 1e3))
                if call.has(1) and call.arg(1).strip().upper() not in ("DEF", "DEFAULT"):
                    self._set_levels(ch, vpp=self._vpp_from(ch, call.keyword_number(1, None, None, 0.1)))
                if call.has(2) and call.arg(2).strip().upper() not in ("DEF", "DEFAULT"):
                    self._set_levels(ch, offset=call.keyword_number(2, None, None, 0.0))
                ch.burst_on = False  # APPLy turns burst off and the output on
                ch.output_on = True
            return handler

        def apply_arb(call: Call) -> None:
            ch = chan(call)
            if call.has(0) and call.arg(0).strip().upper() not in ("DEF", "DEFAULT"):
                ch.srate = call.number(0, 1e-6, 250e6, 40e3)
            rest = Call(call.header, ["DEF", *call.args[1:]], call.suffixes)
            apply("ARB")(rest)
            call.used = max(call.used, rest.used)

        def apply_query(call: Call) -> str:
            ch = chan(call)
            return (f'"{short_form(ch.function)} {_num(ch.frequency)},{_num(self._amplitude_display(ch))},'
                    f'{_num(ch.offset)}"')

        def trigger(call: Call) -> None:
            n = call.suffixes[0] if call.suffixes else 1
            chan(call)
            self._trigger_channel(n)

        s = "[SOURce<n>]"
        t.add(f"{s}:FUNCtion[:SHAPe]", function)
        t.add(f"{s}:FUNCtion[:SHAPe]?", lambda c: short_form(chan(c).function))
        t.add(f"{s}:FREQuency[:CW]", frequency)
        t.add(f"{s}:FREQuency[:CW]?", number_query(lambda ch: ch.frequency, MIN_FREQUENCY, 30e6))
        t.add(f"{s}:PHASe[:ADJust]", number_setter("phase", -360.0, 360.0, 0.0))
        t.add(f"{s}:PHASe[:ADJust]?", number_query(lambda ch: ch.phase, -360.0, 360.0))
        t.add(f"{s}:PHASe:SYNChronize", fixed(None, chan))
        t.add(f"{s}:FUNCtion:SQUare:DCYCle", number_setter("duty", 0.01, 99.99, 50.0))
        t.add(f"{s}:FUNCtion:SQUare:DCYCle?", number_query(lambda ch: ch.duty, 0.01, 99.99))
        t.add(f"{s}:FUNCtion:RAMP:SYMMetry", number_setter("symmetry", 0.0, 100.0, 100.0))
        t.add(f"{s}:FUNCtion:RAMP:SYMMetry?", number_query(lambda ch: ch.symmetry, 0.0, 100.0))
        t.add(f"{s}:FUNCtion:PULSe:WIDTh", number_setter("pulse_width", 16e-9, 1e6, 100e-6))
        t.add(f"{s}:FUNCtion:PULSe:WIDTh?", number_query(lambda ch: ch.pulse_width))
        t.add(f"{s}:VOLTage[:LEVel][:IMMediate][:AMPLitude]", voltage)
        t.add(f"{s}:VOLTage[:LEVel][:IMMediate][:AMPLitude]?", number_query(self._amplitude_display))
        t.add(f"{s}:VOLTage[:LEVel][:IMMediate]:OFFSet", offset)
        t.add(f"{s}:VOLTage[:LEVel][:IMMediate]:OFFSet?", number_query(lambda ch: ch.offset))
        t.add(f"{s}:VOLTage[:LEVel][:IMMediate]:HIGH", high)
        t.add(f"{s}:VOLTage[:LEVel][:IMMediate]:HIGH?", number_query(lambda ch: ch.offset + ch.vpp / 2))
        t.add(f"{s}:VOLTage[:LEVel][:IMMediate]:LOW", low)
        t.add(f"{s}:VOLTage[:LEVel][:IMMediate]:LOW?", number_query(lambda ch: ch.offset - ch.vpp / 2))
        t.add(f"{s}:VOLTage:UNIT", unit)
        t.add(f"{s}:VOLTage:UNIT?", lambda c: chan(c).unit)
        t.add(f"{s}:DATA:VOLatile:CLEar", clear)
        t.add(f"{s}:DATA:VOLatile:CATalog?", lambda c: ",".join(f'"{n}"' for n in chan(c).arbs) or '""')
        t.add(f"{s}:DATA:VOLatile:FREE?", lambda c: f"+{MAX_ARBS - len(chan(c).arbs)}")
        t.add(f"{s}:DATA:ARBitrary:DAC", data_dac)
        t.add(f"{s}:DATA:ARBitrary", data_float)
        t.add(f"{s}:FUNCtion:ARBitrary", select)
        t.add(f"{s}:FUNCtion:ARBitrary?", lambda c: f'"{chan(c).arb_name}"')
        t.add(f"{s}:FUNCtion:ARBitrary:SRATe", number_setter("srate", 1e-6, 250e6, 40e3))
        t.add(f"{s}:FUNCtion:ARBitrary:SRATe?", number_query(lambda ch: ch.srate, 1e-6, 250e6))
        t.add(f"{s}:FUNCtion:ARBitrary:POINts?", lambda c: f"+{_arb_points(chan(c))}")
        t.add(f"{s}:FUNCtion:ARBitrary:ADVance", option_setter("arb_advance", "TRIGger", "SRATe"))
        t.add(f"{s}:FUNCtion:ARBitrary:ADVance?", lambda c: short_form(chan(c).arb_advance))
        t.add(f"{s}:FUNCtion:ARBitrary:FILTer", option_setter("arb_filter", "NORMal", "STEP", "OFF"))
        t.add(f"{s}:FUNCtion:ARBitrary:FILTer?", lambda c: short_form(chan(c).arb_filter))
        t.add(f"{s}:BURSt:STATe", lambda c: setattr(chan(c), "burst_on", c.boolean(0)))
        t.add(f"{s}:BURSt:STATe?", flag_query("burst_on"))
        t.add(f"{s}:BURSt:MODE", option_setter("burst_mode", "TRIGgered", "GATed"))
        t.add(f"{s}:BURSt:MODE?", lambda c: short_form(chan(c).burst_mode))
        t.add(f"{s}:BURSt:NCYCles", cycles)
        t.add(f"{s}:BURSt:NCYCles?", number_query(lambda ch: ch.burst_cycles, 1, 1e8))
        t.add(f"{s}:BURSt:INTernal:PERiod", number_setter("burst_period", 1e-6, 8000.0, 10e-3))
        t.add(f"{s}:BURSt:INTernal:PERiod?", number_query(lambda ch: ch.burst_period, 1e-6, 8000.0))
        t.add(f"{s}:BURSt:PHASe", number_setter("burst_phase", -360.0, 360.0, 0.0))
        t.add(f"{s}:BURSt:PHASe?", number_query(lambda ch: ch.burst_phase, -360.0, 360.0))
        for shape in ("SINusoid", "SQUare", "TRIangle", "RAMP", "PULSe", "NOISe", "DC"):
            t.add(f"{s}:APPLy:{shape}", apply(shape))
        t.add(f"{s}:APPLy?", apply_query)
        t.add("OUTPut<n>[:STATe]", lambda c: setattr(chan(c), "output_on", c.boolean(0)))
        t.add("OUTPut<n>[:STATe]?", flag_query("output_on"))
        t.add("OUTPut<n>:LOAD", load)
        t.add("OUTPut<n>:LOAD?", lambda c: _num(INFINITE if chan(c).load_ohm is None else chan(c).load_ohm))
        t.add("OUTPut<n>:POLarity", option_setter("polarity", "NORMal", "INVerted"))
        t.add("OUTPut<n>:POLarity?", lambda c: short_form(chan(c).polarity))
        t.add("TRIGger<n>:SOURce", trigger_source)
        t.add("TRIGger<n>:SOURce?", lambda c: short_form(chan(c).trigger_source))
        t.add("TRIGger<n>:SLOPe", option_setter("trigger_slope", "POSitive", "NEGative"))
        t.add("TRIGger<n>:SLOPe?", lambda c: short_form(chan(c).trigger_slope))
        t.add("TRIGger<n>:DELay", number_setter("trigger_delay", 0.0, 1000.0, 0.0))
        t.add("TRIGger<n>:DELay?", number_query(lambda ch: ch.trigger_delay, 0.0, 1000.0))
        t.add("TRIGger<n>[:IMMediate]", trigger)
        def arb_frequency(call: Call) -> None:
            ch = chan(call)
            points = _arb_points(ch)
            if not points:
                raise ScpiError(SETTINGS_CONFLICT, "no arb selected (FUNC:ARB <name>)")
            ch.srate = call.number(0, 1e-6 / points, 250e6 / points, 1e3) * points

        def derived(read: Callable[[Channel], float], write: Callable[[Channel, float], None], lo: float, hi: float,
                    default: float) -> tuple[Handler, Handler]:
            return (lambda c: write(chan(c), c.number(0, lo, hi, default))), number_query(read, lo, hi)

        for node, (setter, getter) in {
                "FUNCtion:ARBitrary:FREQuency": (arb_frequency, number_query(lambda ch: ch.srate / max(_arb_points(ch), 1))),
                "FUNCtion:ARBitrary:PERiod": derived(lambda ch: max(_arb_points(ch), 1) / ch.srate,
                                                     lambda ch, v: setattr(ch, "srate", max(_arb_points(ch), 1) / v),
                                                     1e-6, 1e6, 1e-3),
                "FUNCtion:ARBitrary:PTPeak": derived(lambda ch: ch.vpp, lambda ch, v: self._set_levels(ch, vpp=v),
                                                     1e-3, 20.0, 0.1),
                "FUNCtion:PULSe:PERiod": derived(lambda ch: 1 / ch.frequency,
                                                 lambda ch, v: self._set_frequency(ch, 1 / v), 33e-9, 1e6, 1e-3),
                "FUNCtion:SQUare:PERiod": derived(lambda ch: 1 / ch.frequency,
                                                  lambda ch, v: self._set_frequency(ch, 1 / v), 33e-9, 1e6, 1e-3),
                "FUNCtion:PULSe:DCYCle": derived(lambda ch: 100 * ch.pulse_width * ch.frequency,
                                                 lambda ch, v: setattr(ch, "pulse_width", v / 100 / ch.frequency),
                                                 0.0, 100.0, 10.0)}.items():
            t.add(f"{s}:{node}", setter)
            t.add(f"{s}:{node}?", getter)
        settings: tuple[tuple[str, object, Kind], ...] = (
            (f"{s}:BURSt:GATE:POLarity", "NORMal", enumerated("NORMal", "INVerted")),
            ("OUTPut<n>:MODE", "NORMal", enumerated("NORMal", "GATed")), ("OUTPut:SYNC", True, on_off()),
            ("OUTPut:TRIGger", False, on_off()), ("PHASe:UNLock:ERRor:STATe", False, on_off()),
            ("TRIGger<n>:COUNt", 1.0, (numeric(1, 1e6)[0], _num)),
            ("TRIGger<n>:LEVel", 1.0, (numeric(0.9, 3.8)[0], _num)),
            ("TRIGger<n>:TIMer", 1e-3, (numeric(1e-6, 8000.0)[0], _num)),
            # The limits are stored, not enforced: the emulated output keeps to the load limit only.
            (f"{s}:VOLTage:LIMit:HIGH", 5.0, (numeric(-10.0, 10.0)[0], _num)),
            (f"{s}:VOLTage:LIMit:LOW", -5.0, (numeric(-10.0, 10.0)[0], _num)),
            (f"{s}:VOLTage:LIMit:STATe", False, on_off()),
            (f"{s}:VOLTage:RANGe:AUTO", "ON", enumerated("OFF", "ON", "ONCE")))
        for node, default, kind in settings:
            self.add_setting(node, default, kind)
        self.add_setting("*PSC", True, on_off(), reset=False)
        t.add(f"{s}:APPLy:PRBS", apply("PRBS"))
        t.add(f"{s}:APPLy:ARBitrary", apply_arb)
        t.add(f"{s}:PHASe:REFerence", fixed(None, chan))
        t.add(f"{s}:DATA:ATTRibute:POINts?", lambda c: f"+{_stored(chan(c), c.arg(0)).samples.size}")
        t.add("FORMat:BORDer", lambda c: setattr(self, "big_endian", c.choice(0, "NORMal", "SWAPped") == "NORMAL"))
        t.add("FORMat:BORDer?", lambda c: "NORM" if self.big_endian else "SWAP")
        t.add("SYSTem:BEEP[:IMMediate]", lambda c: None)
        t.add("DISPlay:TEXT", lambda c: setattr(self, "display_text", c.arg(0).strip().strip("'\"")))
        t.add("DISPlay:TEXT?", lambda c: f'"{self.display_text}"')
        t.add("DISPlay:TEXT:CLEar", lambda c: setattr(self, "display_text", ""))

    def _amplitude_display_of(self, ch: Channel, vpp: float) -> float:
        saved, ch.vpp = ch.vpp, vpp
        try:
            return self._amplitude_display(ch)
        finally:
            ch.vpp = saved

    def _high_low(self, ch: Channel, high: float, low: float) -> None:
        if high <= low:
            raise ScpiError(SETTINGS_CONFLICT, f"high level {high:g} V not above low level {low:g} V")
        vpp, middle = high - low, (high + low) / 2
        if abs(middle) + vpp / 2 > ch.v_max() + 1e-12:
            raise ScpiError(OUT_OF_RANGE, f"levels {low:g}..{high:g} V beyond ±{ch.v_max():g} V")
        ch.vpp, ch.offset = vpp, middle


def _num(value: float) -> str:
    """The 33500B's numeric answer form, e.g. +1.000000000000000E+03 (16 significant digits, the
    last one a 0 so that 9.9E+37 reads as the instrument prints it)."""
    mantissa, exponent = f"{value:+.14E}".split("E")
    return f"{mantissa}0E{exponent}"


def _value(arg: str | bytes) -> float:
    if isinstance(arg, bytes):
        raise ScpiError(ILLEGAL_VALUE, "a block among listed values")
    try:
        return float(arg)
    except ValueError:
        raise ScpiError(ILLEGAL_VALUE, f"{arg!r} is not a number") from None


def _stored(ch: Channel, name_arg: str) -> Arb:
    name = name_arg.strip().strip('"').upper()
    if name not in ch.arbs:
        raise ScpiError(ILLEGAL_VALUE, f"no arb named {name} in this channel's volatile memory")
    return ch.arbs[name]


def _arb_points(ch: Channel) -> int:
    arb = ch.arbs.get(ch.arb_name)
    return 0 if arb is None else int(arb.samples.size)


def _crest(function: str) -> float:
    """Vpp / Vrms of a built-in waveform (sine 2√2, square 2, triangle and ramp 2√3)."""
    return {"SQUare": 2.0, "PULSe": 2.0, "TRIangle": 2 * math.sqrt(3), "RAMP": 2 * math.sqrt(3)}.get(
        function, 2 * math.sqrt(2))


def _ramp(x: np.ndarray, symmetry: float) -> np.ndarray:
    """A ramp rising for `symmetry` of the period, from -1 to 1, then falling."""
    rising = x < symmetry
    up = np.where(symmetry > 0, 2 * x / max(symmetry, 1e-12) - 1, 1.0)
    down = 1 - 2 * (x - symmetry) / max(1 - symmetry, 1e-12)
    return np.where(rising, up, down)
