"""The emulated 33522B's commands as a table (33500 Series Operating and Service Guide), a small handler each.

Per-channel commands take the channel as the header's suffix (`SOURce2:`, `OUTPut2`, `TRIGger2`;
none = 1); another suffix is -114 "Header suffix out of range" (`chan`). The model (levels,
load, bursts into the world) is awg_model.AwgModel; the handlers here read arguments and call it.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .awg_channel import (
    FUNCTIONS,
    INFINITE,
    MAX_ARBS,
    MAX_FREQUENCY,
    MAX_POINTS,
    MIN_FREQUENCY,
    MIN_POINTS,
    MIN_VPP_50_OHM,
    Arb,
    Channel,
)
from .scpi import HEADER_SUFFIX, ILLEGAL_VALUE, OUT_OF_RANGE, SETTINGS_CONFLICT, Call, ScpiError, short_form
from .server import Kind, enumerated, numeric, on_off
from .table import Command, Row, RowHandler, Setting

from .awg_model import AwgModel as Server

Read = Callable[[Channel], float]


def chan(s: Server, call: Call) -> Channel:
    n = call.suffixes[0] if call.suffixes else 1
    if n not in s.channels:
        raise ScpiError(HEADER_SUFFIX, f"channel {n}; the 33522B has channels 1 and 2")
    return s.channels[n]


def _num(value: float) -> str:
    """The 33500B's numeric answer form, e.g. +1.000000000000000E+03 (16 significant digits, the
    last one a 0 so that 9.9E+37 reads as the instrument prints it)."""
    mantissa, exponent = f"{value:+.14E}".split("E")
    return f"{mantissa}0E{exponent}"


def _is_default(call: Call, index: int) -> bool:
    return call.arg(index).strip().upper() in ("DEF", "DEFAULT")


# --- row factories ----------------------------------------------------------------------------
def number_setter(attr: str, lo: float, hi: float, default: float) -> RowHandler:
    return lambda s, c: setattr(chan(s, c), attr, c.number(0, lo, hi, default))


def option_setter(attr: str, *options: str) -> RowHandler:
    return lambda s, c: setattr(chan(s, c), attr, c.option(0, *options))


def number_query(read: Read, lo: float | None = None, hi: float | None = None) -> RowHandler:
    def handler(s: Server, call: Call) -> str:
        if call.has(0):  # FREQ? MIN / MAX
            return _num(call.keyword_number(0, lo, hi))
        return _num(read(chan(s, call)))
    return handler


def flag_query(attr: str) -> RowHandler:
    return lambda s, c: str(int(getattr(chan(s, c), attr)))


def short_query(attr: str) -> RowHandler:
    return lambda s, c: short_form(getattr(chan(s, c), attr))


def derived(read: Read, write: Callable[[Server, Channel, float], None], lo: float, hi: float,
            default: float) -> tuple[RowHandler, RowHandler]:
    """A setting computed from others (a period from the frequency): its command and query."""
    return (lambda s, c: write(s, chan(s, c), c.number(0, lo, hi, default))), number_query(read, lo, hi)


# --- arbitrary waveforms ------------------------------------------------------------------------
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


def store(ch: Channel, name_arg: str, samples: np.ndarray) -> None:
    name = name_arg.strip().strip('"').upper()
    if not name or len(name) > 12 or not name[0].isalpha():
        raise ScpiError(ILLEGAL_VALUE, f"arb name {name_arg!r}")
    if not MIN_POINTS <= samples.size <= MAX_POINTS:
        raise ScpiError(OUT_OF_RANGE, f"{samples.size} points; {MIN_POINTS}..{MAX_POINTS}")
    if name not in ch.arbs and len(ch.arbs) >= MAX_ARBS:
        raise ScpiError(OUT_OF_RANGE, "volatile memory full (DATA:VOL:CLE)")
    ch.arbs[name] = Arb(samples)


def arb_values(s: Server, call: Call, width: int, kind: str) -> np.ndarray:
    """DATA:ARB[:DAC] values: one block of `width`-byte numbers (FORM:BORD order) or a list."""
    values = call.rest(1)
    if len(values) == 1 and isinstance(values[0], bytes):
        block = values[0]
        if len(block) % width:
            raise ScpiError(ILLEGAL_VALUE, f"the block must hold {8 * width}-bit values")
        order = ">" if s.big_endian else "<"
        return np.frombuffer(block, dtype=f"{order}{kind}{width}").astype(np.float64)
    return np.array([_value(v) for v in values])


def data_dac(s: Server, call: Call) -> None:
    codes = arb_values(s, call, 2, "i")
    if codes.size and (np.max(np.abs(codes)) > 32767 or np.any(codes != np.round(codes))):
        raise ScpiError(OUT_OF_RANGE, "DAC codes are integers from -32767 to +32767")
    store(chan(s, call), call.arg(0), np.clip(codes / 32767.0, -1.0, 1.0))


def data_float(s: Server, call: Call) -> None:
    samples = arb_values(s, call, 4, "f")
    if samples.size and np.max(np.abs(samples)) > 1.0:
        raise ScpiError(OUT_OF_RANGE, "arb values must lie in [-1, 1]")
    store(chan(s, call), call.arg(0), samples)


def clear(s: Server, call: Call) -> None:
    ch = chan(s, call)
    ch.arbs.clear()
    ch.arb_name = ""


def select(s: Server, call: Call) -> None:
    ch = chan(s, call)
    name = call.arg(0).strip().strip('"').upper()
    if name not in ch.arbs:
        raise ScpiError(ILLEGAL_VALUE, f"no arb named {name} in this channel's volatile memory")
    ch.arb_name = name


def arb_frequency(s: Server, call: Call) -> None:
    ch = chan(s, call)
    points = _arb_points(ch)
    if not points:
        raise ScpiError(SETTINGS_CONFLICT, "no arb selected (FUNC:ARB <name>)")
    ch.srate = call.number(0, 1e-6 / points, 250e6 / points, 1e3) * points


def catalog(s: Server, call: Call) -> str:
    return ",".join(f'"{n}"' for n in chan(s, call).arbs) or '""'


# --- waveform and levels ------------------------------------------------------------------------
def function(s: Server, call: Call) -> None:
    ch = chan(s, call)
    ch.function = call.option(0, *FUNCTIONS)
    if ch.frequency > MAX_FREQUENCY[ch.function]:
        ch.frequency = MAX_FREQUENCY[ch.function]
        s.push_error(ScpiError(SETTINGS_CONFLICT, "frequency clipped to the function's limit"))


def frequency(s: Server, call: Call) -> None:
    ch = chan(s, call)
    s._set_frequency(ch, call.keyword_number(0, MIN_FREQUENCY, MAX_FREQUENCY[ch.function], 1e3))


def voltage(s: Server, call: Call) -> None:
    ch = chan(s, call)
    top = 2 * ch.v_max()
    value = call.keyword_number(0, s._amplitude_display_of(ch, MIN_VPP_50_OHM * ch.gain()),
                                s._amplitude_display_of(ch, top), s._amplitude_display_of(ch, 0.1))
    s._set_levels(ch, vpp=s._vpp_from(ch, value))


def voltage_query(s: Server, call: Call) -> str:
    if call.has(0):  # VOLT? MIN / MAX: no bound answered here
        return _num(call.keyword_number(0, None, None))
    return _num(s._amplitude_display(chan(s, call)))


def offset(s: Server, call: Call) -> None:
    ch = chan(s, call)
    limit = max(ch.v_max() - ch.vpp / 2, 0.0)
    s._set_levels(ch, offset=call.keyword_number(0, -limit, limit, 0.0))


def high(s: Server, call: Call) -> None:
    ch = chan(s, call)
    low_level = ch.offset - ch.vpp / 2
    level = call.keyword_number(0, -ch.v_max(), ch.v_max(), 0.05)
    s._high_low(ch, level, low_level)


def low(s: Server, call: Call) -> None:
    ch = chan(s, call)
    top = ch.offset + ch.vpp / 2
    level = call.keyword_number(0, -ch.v_max(), ch.v_max(), -0.05)
    s._high_low(ch, top, level)


def unit(s: Server, call: Call) -> None:
    ch = chan(s, call)
    value = call.option(0, "VPP", "VRMS", "DBM")
    if value == "DBM" and ch.load_ohm is None:
        raise ScpiError(SETTINGS_CONFLICT, "dBm needs a finite OUTP:LOAD")
    ch.unit = value


def load(s: Server, call: Call) -> None:
    text = call.arg(0).strip().upper()
    value = None if text in ("INF", "INFINITY", "9.9E37", "9.9E+37") else call.number(0, 1.0, 10_000.0, 50.0)
    ch = chan(s, call)
    if value is None and ch.unit == "DBM":
        ch.unit = "VPP"  # dBm means nothing into an open circuit; the unit falls back to Vpp
    s._set_load(ch, value)


def load_query(s: Server, call: Call) -> str:
    load_ohm = chan(s, call).load_ohm
    return _num(INFINITE if load_ohm is None else load_ohm)


# --- APPLy ---------------------------------------------------------------------------------------
def apply(shape: str) -> RowHandler:
    def handler(s: Server, call: Call) -> None:
        ch = chan(s, call)
        ch.function = shape
        if call.has(0) and not _is_default(call, 0):
            s._set_frequency(ch, call.keyword_number(0, MIN_FREQUENCY, MAX_FREQUENCY[shape], 1e3))
        if call.has(1) and not _is_default(call, 1):
            s._set_levels(ch, vpp=s._vpp_from(ch, call.keyword_number(1, None, None, 0.1)))
        if call.has(2) and not _is_default(call, 2):
            s._set_levels(ch, offset=call.keyword_number(2, None, None, 0.0))
        ch.burst_on = False  # APPLy turns burst off and the output on
        ch.output_on = True
    return handler


def apply_arb(s: Server, call: Call) -> None:
    ch = chan(s, call)
    if call.has(0) and not _is_default(call, 0):
        ch.srate = call.number(0, 1e-6, 250e6, 40e3)
    rest = Call(call.header, ["DEF", *call.args[1:]], call.suffixes)
    apply("ARB")(s, rest)
    call.used = max(call.used, rest.used)


def apply_query(s: Server, call: Call) -> str:
    ch = chan(s, call)
    return (f'"{short_form(ch.function)} {_num(ch.frequency)},{_num(s._amplitude_display(ch))},'
            f'{_num(ch.offset)}"')


# --- burst and trigger ---------------------------------------------------------------------------
def cycles(s: Server, call: Call) -> None:
    text = call.arg(0).strip().upper()
    chan(s, call).burst_cycles = INFINITE if text in ("INF", "INFINITY") else float(int(call.number(0, 1, 1e8, 1)))


def trigger_source(s: Server, call: Call) -> None:
    # The source is read before the channel suffix is checked (the order errors are queued in).
    source = call.option(0, "IMMediate", "EXTernal", "TIMer", "BUS")
    chan(s, call).trigger_source = source


def trigger(s: Server, call: Call) -> None:
    n = call.suffixes[0] if call.suffixes else 1
    chan(s, call)
    s._trigger_channel(n)


def _check_channel(s: Server, call: Call) -> None:
    """A command with nothing to act on in the emulator, once its channel suffix is valid."""
    chan(s, call)


def _numbers(lo: float, hi: float) -> Kind:
    """A stored number in the 33500B's answer form."""
    return numeric(lo, hi)[0], _num


def _set_display(s: Server, call: Call) -> None:
    s.display_text = call.arg(0).strip().strip("'\"")


SRC = "[SOURce<n>]"
COMMANDS: tuple[Row, ...] = (
    Command(f"{SRC}:FUNCtion[:SHAPe]", function, short_query("function")),
    Command(f"{SRC}:FREQuency[:CW]", frequency, number_query(lambda ch: ch.frequency, MIN_FREQUENCY, 30e6)),
    Command(f"{SRC}:PHASe[:ADJust]", number_setter("phase", -360.0, 360.0, 0.0),
            number_query(lambda ch: ch.phase, -360.0, 360.0)),
    Command(f"{SRC}:PHASe:SYNChronize", _check_channel),
    Command(f"{SRC}:FUNCtion:SQUare:DCYCle", number_setter("duty", 0.01, 99.99, 50.0),
            number_query(lambda ch: ch.duty, 0.01, 99.99)),
    Command(f"{SRC}:FUNCtion:RAMP:SYMMetry", number_setter("symmetry", 0.0, 100.0, 100.0),
            number_query(lambda ch: ch.symmetry, 0.0, 100.0)),
    Command(f"{SRC}:FUNCtion:PULSe:WIDTh", number_setter("pulse_width", 16e-9, 1e6, 100e-6),
            number_query(lambda ch: ch.pulse_width)),
    Command(f"{SRC}:VOLTage[:LEVel][:IMMediate][:AMPLitude]", voltage, voltage_query),
    Command(f"{SRC}:VOLTage[:LEVel][:IMMediate]:OFFSet", offset, number_query(lambda ch: ch.offset)),
    Command(f"{SRC}:VOLTage[:LEVel][:IMMediate]:HIGH", high, number_query(lambda ch: ch.offset + ch.vpp / 2)),
    Command(f"{SRC}:VOLTage[:LEVel][:IMMediate]:LOW", low, number_query(lambda ch: ch.offset - ch.vpp / 2)),
    Command(f"{SRC}:VOLTage:UNIT", unit, lambda s, c: chan(s, c).unit),
    Command(f"{SRC}:DATA:VOLatile:CLEar", clear),
    Command(f"{SRC}:DATA:VOLatile:CATalog", query=catalog),
    Command(f"{SRC}:DATA:VOLatile:FREE", query=lambda s, c: f"+{MAX_ARBS - len(chan(s, c).arbs)}"),
    Command(f"{SRC}:DATA:ARBitrary:DAC", data_dac),
    Command(f"{SRC}:DATA:ARBitrary", data_float),
    Command(f"{SRC}:FUNCtion:ARBitrary", select, lambda s, c: f'"{chan(s, c).arb_name}"'),
    Command(f"{SRC}:FUNCtion:ARBitrary:SRATe", number_setter("srate", 1e-6, 250e6, 40e3),
            number_query(lambda ch: ch.srate, 1e-6, 250e6)),
    Command(f"{SRC}:FUNCtion:ARBitrary:POINts", query=lambda s, c: f"+{_arb_points(chan(s, c))}"),
    Command(f"{SRC}:FUNCtion:ARBitrary:ADVance", option_setter("arb_advance", "TRIGger", "SRATe"),
            short_query("arb_advance")),
    Command(f"{SRC}:FUNCtion:ARBitrary:FILTer", option_setter("arb_filter", "NORMal", "STEP", "OFF"),
            short_query("arb_filter")),
    Command(f"{SRC}:BURSt:STATe", lambda s, c: setattr(chan(s, c), "burst_on", c.boolean(0)), flag_query("burst_on")),
    Command(f"{SRC}:BURSt:MODE", option_setter("burst_mode", "TRIGgered", "GATed"), short_query("burst_mode")),
    Command(f"{SRC}:BURSt:NCYCles", cycles, number_query(lambda ch: ch.burst_cycles, 1, 1e8)),
    Command(f"{SRC}:BURSt:INTernal:PERiod", number_setter("burst_period", 1e-6, 8000.0, 10e-3),
            number_query(lambda ch: ch.burst_period, 1e-6, 8000.0)),
    Command(f"{SRC}:BURSt:PHASe", number_setter("burst_phase", -360.0, 360.0, 0.0),
            number_query(lambda ch: ch.burst_phase, -360.0, 360.0)),
    *(Command(f"{SRC}:APPLy:{shape}", apply(shape))
      for shape in ("SINusoid", "SQUare", "TRIangle", "RAMP", "PULSe", "NOISe", "DC", "PRBS")),
    Command(f"{SRC}:APPLy:ARBitrary", apply_arb),
    Command(f"{SRC}:APPLy", query=apply_query),
    Command("OUTPut<n>[:STATe]", lambda s, c: setattr(chan(s, c), "output_on", c.boolean(0)), flag_query("output_on")),
    Command("OUTPut<n>:LOAD", load, load_query),
    Command("OUTPut<n>:POLarity", option_setter("polarity", "NORMal", "INVerted"), short_query("polarity")),
    Command("TRIGger<n>:SOURce", trigger_source, short_query("trigger_source")),
    Command("TRIGger<n>:SLOPe", option_setter("trigger_slope", "POSitive", "NEGative"), short_query("trigger_slope")),
    Command("TRIGger<n>:DELay", number_setter("trigger_delay", 0.0, 1000.0, 0.0),
            number_query(lambda ch: ch.trigger_delay, 0.0, 1000.0)),
    Command("TRIGger<n>[:IMMediate]", trigger),
    Command(f"{SRC}:FUNCtion:ARBitrary:FREQuency", arb_frequency,
            number_query(lambda ch: ch.srate / max(_arb_points(ch), 1))),
    Command(f"{SRC}:FUNCtion:ARBitrary:PERiod", *derived(
        lambda ch: max(_arb_points(ch), 1) / ch.srate,
        lambda s, ch, v: setattr(ch, "srate", max(_arb_points(ch), 1) / v), 1e-6, 1e6, 1e-3)),
    Command(f"{SRC}:FUNCtion:ARBitrary:PTPeak", *derived(
        lambda ch: ch.vpp, lambda s, ch, v: s._set_levels(ch, vpp=v), 1e-3, 20.0, 0.1)),
    Command(f"{SRC}:FUNCtion:PULSe:PERiod", *derived(
        lambda ch: 1 / ch.frequency, lambda s, ch, v: s._set_frequency(ch, 1 / v), 33e-9, 1e6, 1e-3)),
    Command(f"{SRC}:FUNCtion:SQUare:PERiod", *derived(
        lambda ch: 1 / ch.frequency, lambda s, ch, v: s._set_frequency(ch, 1 / v), 33e-9, 1e6, 1e-3)),
    Command(f"{SRC}:FUNCtion:PULSe:DCYCle", *derived(
        lambda ch: 100 * ch.pulse_width * ch.frequency,
        lambda s, ch, v: setattr(ch, "pulse_width", v / 100 / ch.frequency), 0.0, 100.0, 10.0)),
    Setting(f"{SRC}:BURSt:GATE:POLarity", "NORMal", enumerated("NORMal", "INVerted")),
    Setting("OUTPut<n>:MODE", "NORMal", enumerated("NORMal", "GATed")),
    Setting("OUTPut:SYNC", True, on_off()),
    Setting("OUTPut:TRIGger", False, on_off()),
    Setting("PHASe:UNLock:ERRor:STATe", False, on_off()),
    Setting("TRIGger<n>:COUNt", 1.0, _numbers(1, 1e6)),
    Setting("TRIGger<n>:LEVel", 1.0, _numbers(0.9, 3.8)),
    Setting("TRIGger<n>:TIMer", 1e-3, _numbers(1e-6, 8000.0)),
    # The limits are stored, not enforced: the emulated output keeps to the load limit only.
    Setting(f"{SRC}:VOLTage:LIMit:HIGH", 5.0, _numbers(-10.0, 10.0)),
    Setting(f"{SRC}:VOLTage:LIMit:LOW", -5.0, _numbers(-10.0, 10.0)),
    Setting(f"{SRC}:VOLTage:LIMit:STATe", False, on_off()),
    Setting(f"{SRC}:VOLTage:RANGe:AUTO", "ON", enumerated("OFF", "ON", "ONCE")),
    Setting("*PSC", True, on_off(), reset=False),
    Command(f"{SRC}:PHASe:REFerence", _check_channel),
    Command(f"{SRC}:DATA:ATTRibute:POINts", query=lambda s, c: f"+{_stored(chan(s, c), c.arg(0)).samples.size}"),
    Command("FORMat:BORDer", lambda s, c: setattr(s, "big_endian", c.choice(0, "NORMal", "SWAPped") == "NORMAL"),
            lambda s, c: "NORM" if s.big_endian else "SWAP"),
    Command("SYSTem:BEEP[:IMMediate]", lambda s, c: None),
    Command("DISPlay:TEXT", _set_display, lambda s, c: f'"{s.display_text}"'),
    Command("DISPlay:TEXT:CLEar", lambda s, c: setattr(s, "display_text", "")),
)
