"""The emulated DAQ970A's commands as a table (DAQ970A Programming Guide), a small handler each.

Channel lists `(@101:105)` name the DAQM901A's channels (`Daq970aModel._channels` refuses the
others); per-channel settings without a list apply to the scan list. The model (scans, readings,
the world's temperatures) is daq970a_model.Daq970aModel; the handlers here read arguments and call it.
"""
from __future__ import annotations

from collections.abc import Callable

from .daq970a_channel import DEFAULT_TC, LINE_HZ, MODULES, RTD_ALPHAS, TC_TYPES, THERMISTORS, ChannelSetup
from .scpi import (
    DATA_STALE,
    ILLEGAL_VALUE,
    MISSING_PARAMETER,
    PARAMETER_NOT_ALLOWED,
    SETTINGS_CONFLICT,
    Call,
    ScpiError,
    ieee_block,
    short_form,
)
from .server import numeric, on_off
from .table import Command, Row, RowHandler, Setting

from .daq970a_model import Daq970aModel as Server

PROBES = ("TCouple", "RTD", "FRTD", "THERmistor", "FTHermistor")
FUNCTION_OF = {"TCOUPLE": "TC", "RTD": "RTD", "FRTD": "FRTD", "THERMISTOR": "THER", "FTHERMISTOR": "FTH"}
DEFAULT_KIND = {"TC": DEFAULT_TC, "RTD": "85", "FRTD": "85", "THER": "5000", "FTH": "5000"}
KINDS = {"TC": TC_TYPES, "RTD": RTD_ALPHAS, "FRTD": RTD_ALPHAS, "THER": THERMISTORS, "FTH": THERMISTORS}
FORMAT_NODES = {"CHAN": "CHANnel", "UNIT": "UNIT", "TIME": "TIME", "ALAR": "ALARm"}


def channel_list(s: Server, call: Call, index: int) -> list[int]:
    return s._channels(call, index)


def _listed_or_scan(s: Server, call: Call, index: int) -> list[int]:
    return s._channels(call, index) if call.has(index) else list(s.scan)


# --- CONFigure / MEASure ------------------------------------------------------------------------
def _temperature_kind(call: Call, probe: str, last: int) -> str:
    """The sensor type between the probe and the channel list (DEFault: the probe's default)."""
    function = FUNCTION_OF[probe]
    kind = call.arg(1).strip().upper() if last >= 2 else "DEF"
    if kind in ("DEF", "DEFAULT"):
        kind = DEFAULT_KIND[function]
    if kind not in KINDS[function]:
        raise ScpiError(ILLEGAL_VALUE, f"{probe} type {kind!r}; known: {', '.join(KINDS[function])}")
    return kind


def configure(s: Server, call: Call) -> None:
    probe = call.choice(0, *PROBES)
    last = len(call.args) - 1  # the channel list; between: type, then `1,<resolution>`
    kind = _temperature_kind(call, probe, last)
    if last >= 3:
        call.number(2, 1, 1, 1)  # the range parameter: always 1 for temperature
    if last >= 4:
        call.keyword_number(3, 1e-6, 1.0, 1e-3)  # resolution (the NPLC it implies is not modelled)
    if last > 4:
        call.arg(5)
        raise ScpiError(PARAMETER_NOT_ALLOWED, "CONFigure:TEMPerature takes at most 4 values and a list")
    channels = s._channels(call, last)
    function = FUNCTION_OF[probe]
    if function in ("FRTD", "FTH") and any(c % 100 > 10 for c in channels):
        raise ScpiError(SETTINGS_CONFLICT, "4-wire measurements use channels 1-10 (n+10 is the sense pair)")
    s._paired_conflicts(channels)
    for channel in channels:
        s.setup[channel] = ChannelSetup(function, kind)
    s.scan = channels


def configure_volts(s: Server, call: Call) -> None:
    last = len(call.args) - 1
    if last < 0:  # the real unit configures its internal DMM; it measures nothing wired here
        raise ScpiError(MISSING_PARAMETER, "a channel list; the internal DMM alone is not modelled")
    for index in range(last):  # range, resolution: AUTO/MIN/MAX/DEF or numbers
        text = call.arg(index).strip().upper()
        if text not in ("AUTO", "MIN", "MINIMUM", "MAX", "MAXIMUM", "DEF", "DEFAULT"):
            call.number(index, 0.0, 300.0)
    channels = s._channels(call, last)
    s._paired_conflicts(channels)
    for channel in channels:
        s.setup[channel] = ChannelSetup("VOLT", "")
    s.scan = channels


def measure(configure_fn: RowHandler) -> RowHandler:
    """MEASure? is CONFigure and READ? in one."""
    def handler(s: Server, call: Call) -> str:
        configure_fn(s, call)
        return s._read(call)
    return handler


def configure_query(s: Server, call: Call) -> str:
    answers = []
    for channel in s._channels(call, 0):
        setup = s._channel(channel)
        if setup.function == "VOLT":
            answers.append('"VOLT +1.000000E+01,+3.000000E-06"')
        else:
            answers.append(f'"TEMP {setup.function},{setup.kind},+1.000000E+00,+1.000000E-01"')
    return ",".join(answers)


# --- SENSe:TEMPerature and UNIT ------------------------------------------------------------------
def tc_type(s: Server, call: Call) -> None:
    kind = call.arg(0).strip().upper()
    kind = DEFAULT_TC if kind in ("DEF", "DEFAULT") else kind
    if kind not in TC_TYPES:
        raise ScpiError(ILLEGAL_VALUE, f"thermocouple type {kind!r}; known: {', '.join(TC_TYPES)}")
    for channel in _listed_or_scan(s, call, 1):
        setup = s._channel(channel)
        if setup.function != "TC":
            raise ScpiError(SETTINGS_CONFLICT, f"channel {channel} is not configured for thermocouples")
        setup.kind = kind


def transducer(s: Server, call: Call) -> None:
    function = FUNCTION_OF[call.choice(0, *PROBES)]
    for channel in _listed_or_scan(s, call, 1):
        s.setup[channel] = ChannelSetup(function, DEFAULT_KIND[function])


def per_channel_query(read: Callable[[ChannelSetup], str]) -> RowHandler:
    def handler(s: Server, call: Call) -> str:
        return ",".join(read(s._channel(channel)) for channel in s._channels(call, 0))
    return handler


def per_channel(attribute: str, parse: Callable[[Call], object]) -> RowHandler:
    """A per-channel setting: the value, then the channel list (none: the scan list)."""
    def handler(s: Server, call: Call) -> None:
        value = parse(call)
        for channel in _listed_or_scan(s, call, 1):
            setattr(s._channel(channel), attribute, value)
    return handler


def _transducer_name(setup: ChannelSetup) -> str:
    return "NONE" if setup.function == "VOLT" else setup.function


# --- ROUTe, FORMat, TRIGger ------------------------------------------------------------------------
def route_scan(s: Server, call: Call) -> None:
    channels = s._channels(call, 0)
    s._paired_conflicts(channels)
    s.scan = channels
    s._sweeps_due.clear()
    s.memory.clear()


def scan_query(s: Server, call: Call) -> bytes:
    return ieee_block(("(@" + ",".join(map(str, s.scan)) + ")").encode())


def reading_format(name: str) -> tuple[RowHandler, RowHandler]:
    """FORMat:READing:<name> ON|OFF and its query."""
    def write(s: Server, call: Call) -> None:
        s.format[name] = call.boolean(0)
    return write, lambda s, c: str(int(s.format[name]))


def time_type(s: Server, call: Call) -> None:
    s.time_type = call.choice(0, "ABSolute", "RELative")[:3]


def trig_source(s: Server, call: Call) -> None:
    s.trigger_source = call.choice(0, "IMMediate", "TIMer", "BUS", "EXTernal", "ALARm1")[:3]


def trig_count(s: Server, call: Call) -> None:
    text = call.arg(0).strip().upper()
    if text in ("INF", "INFINITY"):  # valid on the real unit; endless scans are not emulated
        raise ScpiError(ILLEGAL_VALUE, "endless scans (TRIG:COUN INF) are not modelled")
    s.trigger_count = int(call.number(0, 1, 500_000))


def abort(s: Server, call: Call) -> None:
    s._sweeps_due.clear()


# --- readings and system ------------------------------------------------------------------------
def readings(count_index: int | None, remove: bool, block: bool) -> RowHandler:
    """R? (removes, as a block), DATA:REMove? (removes), DATA:LAST? (keeps)."""
    def handler(s: Server, call: Call) -> str | bytes:
        given = count_index is not None and call.has(count_index)
        count = int(call.number(count_index, 1, 1_000_000)) if given else None  # type: ignore[arg-type]
        if not remove and count is None:
            count = 1
        taken = s._take(count, remove) if remove else s._take(None, False)[-(count or 1):]
        if not taken and not block:
            raise ScpiError(DATA_STALE, "no readings in memory")
        text = ",".join(s._format(*reading) for reading in taken)
        return ieee_block(text.encode()) if block else text
    return handler


def ctype(s: Server, call: Call) -> str:
    slot = int(call.number(0, 100, 300)) // 100
    module = MODULES.get(slot)
    return f"Keysight Technologies,{module},0,1.0" if module else "Keysight Technologies,0,0,0"


TEMP = "[SENSe]:TEMPerature"
TC = f"{TEMP}:TRANsducer:TCouple"
COMMANDS: tuple[Row, ...] = (
    Command(f"{TEMP}:APERture", per_channel("nplc", lambda c: c.number(0, 0.0004, 1.0) * LINE_HZ),
            per_channel_query(lambda setup: f"{setup.nplc / LINE_HZ:+.8E}")),
    Command(f"{TEMP}:TRANsducer:TYPE", transducer, per_channel_query(_transducer_name)),
    Command(f"{TC}:RJUNction", per_channel("fixed_ref_c", lambda c: c.number(0, -20.0, 80.0, 0.0)),
            per_channel_query(lambda setup: f"{setup.fixed_ref_c:+.8E}")),
    Command("ROUTe:SCAN:SIZE", query=lambda s, c: f"+{len(s.scan)}"),
    Setting("ROUTe:CHANnel:DELay", 0.0, numeric(0.0, 60.0), channel_list),
    Setting("ROUTe:CHANnel:DELay:AUTO", True, on_off(), channel_list),
    Setting("*PSC", True, on_off(), reset=False),
    *(Command(f"FORMat:READing:{node}", *reading_format(name)) for name, node in FORMAT_NODES.items()),
    Command("R", query=readings(0, remove=True, block=True)),
    Command("DATA:REMove", query=readings(0, remove=True, block=False)),
    Command("DATA:LAST", query=readings(0, remove=False, block=False)),
    Command("DATA:POINts", query=lambda s, c: f"+{len(s._take(None, remove=False))}"),
    Command("CONFigure:TEMPerature", configure),
    Command("CONFigure:VOLTage[:DC]", configure_volts),
    Command("CONFigure", query=configure_query),
    Command("MEASure:TEMPerature", query=measure(configure)),
    Command("MEASure:VOLTage[:DC]", query=measure(configure_volts)),
    Command(f"{TC}[:TYPE]", tc_type, per_channel_query(lambda setup: setup.kind)),
    Command(f"{TC}:CHECk", per_channel("check", lambda c: c.boolean(0)),
            per_channel_query(lambda setup: str(int(setup.check)))),
    Command(f"{TC}:RJUNction:TYPE",
            per_channel("rjunction", lambda c: c.choice(0, "INTernal", "EXTernal", "FIXed")[:3]),
            per_channel_query(lambda setup: setup.rjunction)),
    Command(f"{TEMP}:NPLC", per_channel("nplc", lambda c: c.number(0, 0.02, 200)),
            per_channel_query(lambda setup: f"{setup.nplc:+.8E}")),
    Command("UNIT:TEMPerature", per_channel("unit", lambda c: c.choice(0, "C", "F", "K")),
            per_channel_query(lambda setup: setup.unit)),
    Command("FORMat:READing:TIME:TYPE", time_type,
            lambda s, c: short_form({"ABS": "ABSolute", "REL": "RELative"}[s.time_type])),
    Command("TRIGger:SOURce", trig_source, lambda s, c: s.trigger_source),
    Command("TRIGger:TIMer", lambda s, c: setattr(s, "trigger_timer_s", c.number(0, 0.0, 359_999.0)),
            lambda s, c: f"{s.trigger_timer_s:+.8E}"),
    Command("TRIGger:COUNt", trig_count, lambda s, c: f"{s.trigger_count:+.8E}"),
    Command("ROUTe:SCAN", route_scan, scan_query),
    Command("INITiate[:IMMediate]", lambda s, c: s._initiate()),
    Command("FETCh", query=lambda s, c: s._fetch(c)),
    Command("READ", query=lambda s, c: s._read(c)),
    Command("ABORt", abort),
    Command("SYSTem:CTYPe", query=ctype),
)
