"""The emulated N6705C's commands as a table (N6705 Programmer's Reference Guide), a small handler each.

Every command of the N6781A's output takes the channel list `(@1)`; another slot is -241
"Hardware missing" (`slot`). The model itself (output, arb, digitizer, world link) is
power_analyzer_model.PowerAnalyzerModel; the handlers here only read arguments and call it.
"""
from __future__ import annotations

import numpy as np

from .scpi import (
    HARDWARE_MISSING,
    ILLEGAL_VALUE,
    OUT_OF_RANGE,
    SETTINGS_CONFLICT,
    Call,
    QueryBlocked,
    ScpiError,
    short_form,
)
from .server import enumerated, numeric, on_off
from .table import Command, Row, RowHandler, Setting

from .power_analyzer_model import PowerAnalyzerModel as Server

MODULE = "N6781A"
TINT_STEP_S = 5.12e-6  # sample interval resolution; also the minimum for one parameter
MAX_POINTS = 1 << 20  # emulator's digitizer buffer per parameter
EMULATIONS = ("PS4Q", "PS2Q", "PS1Q", "BATTery", "CHARger", "CCLoad", "CVLoad", "VMETer", "AMETer")
ARB_SHAPES = ("SINusoid", "STEP", "RAMP", "PULSe", "TRAPezoid", "EXPonential", "STAircase", "UDEFined", "CDWell",
              "SEQuence", "CONStant")


def slot(call: Call, index: int) -> None:
    """The channel list at `index` names slot 1 only (the N6781A)."""
    for channel in call.channels(index):
        if channel != 1:
            raise ScpiError(HARDWARE_MISSING, f"no module in slot {channel}")


def slot_channels(s: Server, call: Call, index: int) -> list[int]:
    slot(call, index)
    return call.channels(index)


# --- row factories ----------------------------------------------------------------------------
def setter(attr: str, lo: float, hi: float) -> RowHandler:
    def handler(s: Server, call: Call) -> None:
        slot(call, 1)
        setattr(s, attr, call.number(0, lo, hi))
        s._apply()
    return handler


def getter(attr: str, fmt: str = "{:+.6E}") -> RowHandler:
    def handler(s: Server, call: Call) -> str:
        slot(call, 0)
        return fmt.format(getattr(s, attr))
    return handler


def short_getter(attr: str) -> RowHandler:
    def handler(s: Server, call: Call) -> str:
        slot(call, 0)
        return short_form(getattr(s, attr))
    return handler


def slot_only(action: RowHandler) -> RowHandler:
    """A command whose only argument is the channel list."""
    def handler(s: Server, call: Call) -> None:
        slot(call, 0)
        action(s, call)
    return handler


# --- output and source ------------------------------------------------------------------------
def output(s: Server, call: Call) -> None:
    slot(call, 1)
    s.output_on = call.boolean(0)
    s._apply()


def resistance_state(s: Server, call: Call) -> None:
    slot(call, 1)
    s.res_on = call.boolean(0)
    if s.res_on and s.emulation != "BATTery":
        s.res_on = False
        raise ScpiError(SETTINGS_CONFLICT, "output resistance needs EMUL BATT")
    s._apply()


def emulation(s: Server, call: Call) -> None:
    slot(call, 1)
    s.emulation = call.option(0, *EMULATIONS)
    if s.emulation != "BATTery":
        s.res_on = False
    s._apply()


def volt_mode(s: Server, call: Call) -> None:
    slot(call, 1)
    s.volt_mode = call.option(0, "FIXed", "STEP", "LIST", "ARB")
    if s.volt_mode != "ARB":
        s.arb_running = False
    s._apply()


# --- arb ----------------------------------------------------------------------------------------
def arb_type(s: Server, call: Call) -> None:
    slot(call, 1)
    s.arb_type = call.option(0, "VOLTage", "CURRent")
    if s.arb_type != "VOLTage":
        raise ScpiError(ILLEGAL_VALUE, "current arbs are not modelled")


def arb_shape(s: Server, call: Call) -> None:
    slot(call, 1)
    s.arb_shape = call.option(0, *ARB_SHAPES)
    if s.arb_shape != "SINusoid":
        raise ScpiError(ILLEGAL_VALUE, "arb shapes other than SINusoid are not modelled")


def arb_count(s: Server, call: Call) -> None:
    slot(call, 1)
    text = call.arg(0).strip().upper()
    if text not in ("INF", "INFINITY", "9.9E37"):
        raise ScpiError(ILLEGAL_VALUE, "arb counts other than INFinity are not modelled")
    s.arb_count_inf = True


def arb_count_query(s: Server, call: Call) -> str:
    slot(call, 0)
    return "9.9E+37" if s.arb_count_inf else "+1"


# --- triggers -----------------------------------------------------------------------------------
def trigger_source(system: str) -> RowHandler:
    def handler(s: Server, call: Call) -> None:
        # BUS and IMMediate both start on a software trigger here.
        s.trigger_sources[system] = call.option(0, "BUS", "IMMediate")
        if call.has(1):
            slot(call, 1)
    return handler


def trigger_source_query(system: str) -> RowHandler:
    def handler(s: Server, call: Call) -> str:
        if call.has(0):
            slot(call, 0)
        return short_form(s.trigger_sources[system])
    return handler


def _init_tran(s: Server, call: Call) -> None:
    s.tran_initiated = True


def _abort_acq(s: Server, call: Call) -> None:
    s.acq_initiated = False


# --- digitizer ------------------------------------------------------------------------------------
def sense_function(attr: str) -> RowHandler:
    def handler(s: Server, call: Call) -> None:
        slot(call, 1)
        setattr(s, attr, call.boolean(0))
        if not (s.sense_curr or s.sense_volt):
            setattr(s, attr, True)
            raise ScpiError(SETTINGS_CONFLICT, "at least one of current and voltage must be sensed")
    return handler


def tint(s: Server, call: Call) -> None:
    slot(call, 1)
    value = call.number(0, TINT_STEP_S, 40_000.0)
    steps = max(round(value / TINT_STEP_S), 1)
    minimum = 2 if (s.sense_curr and s.sense_volt) else 1
    if steps < minimum:
        raise ScpiError(OUT_OF_RANGE, f"{value:g} s below {minimum * TINT_STEP_S:g} s for "
                                      f"{minimum} sensed parameters")
    s.tint = steps * TINT_STEP_S


def points(s: Server, call: Call) -> None:
    slot(call, 1)
    s.points = int(call.number(0, 1, MAX_POINTS))


def points_query(s: Server, call: Call) -> str:
    if call.args and call.arg(0).strip().upper() in ("MAX", "MAXIMUM"):
        slot(call, 1)
        return f"+{MAX_POINTS}"
    if call.args and call.arg(0).strip().upper() in ("MIN", "MINIMUM"):
        slot(call, 1)
        return "+1"
    slot(call, 0)
    return f"+{s.points}"


def offset(s: Server, call: Call) -> None:
    slot(call, 1)
    s.offset_points = int(call.number(0, -(MAX_POINTS - 1), 2e9))


def form(s: Server, call: Call) -> None:
    s.form_real = call.choice(0, "ASCii", "REAL") == "REAL"


def border(s: Server, call: Call) -> None:
    s.border_normal = call.choice(0, "NORMal", "SWAPped") == "NORMAL"


def fetch(function: str) -> RowHandler:
    def handler(s: Server, call: Call) -> bytes | str | None:
        slot(call, 0)
        return s._fetch_array(function)
    return handler


def fetch_scalar(function: str) -> RowHandler:
    def handler(s: Server, call: Call) -> str:
        slot(call, 0)
        data = s._sweep_data(function)
        if data is None:
            raise QueryBlocked("no triggered sweep to fetch")
        return f"{float(np.mean(data)):+.6E}"
    return handler


def measure_array(function: str) -> RowHandler:
    def handler(s: Server, call: Call) -> bytes | str | None:
        slot(call, 0)
        s.acq_initiated = True
        s._trigger_acq(internal=True)  # MEAS:ARR initiates and triggers in one
        return s._fetch_array(function)
    return handler


def measure(function: str) -> RowHandler:
    def handler(s: Server, call: Call) -> str:
        slot(call, 0)
        return s._measure_scalar(function)
    return handler


def scalar_power(s: Server, call: Call) -> str:
    # Mean voltage times mean current of two short sweeps: the ripple's correlation is lost.
    slot(call, 0)
    return f"{float(s._measure_scalar('VOLT')) * float(s._measure_scalar('CURR')):+.6E}"


# --- status and system --------------------------------------------------------------------------
def operation_condition(s: Server, call: Call) -> str:
    if call.args:
        slot(call, 0)
    return f"+{s._operation_condition()}"


def questionable_condition(s: Server, call: Call) -> str:
    slot(call, 0)
    return "+0"  # no protection tripped


def module(s: Server, call: Call) -> str:
    return ",".join(MODULE if channel == 1 else '""' for channel in call.channels(0))


def _nothing(s: Server, call: Call) -> None:
    """A command with nothing to act on in the emulator (no protection ever trips)."""


SRC = "[SOURce]"
E6 = "{:+.6E}"
COMMANDS: tuple[Row, ...] = (
    Command("OUTPut[:STATe]", output, getter("output_on", "{:d}")),
    Command(f"{SRC}:VOLTage[:LEVel][:IMMediate][:AMPLitude]", setter("voltage", 0.0, 20.4), getter("voltage")),
    Command(f"{SRC}:CURRent:LIMit[:POSitive][:IMMediate][:AMPLitude]", setter("current_limit", 0.0, 3.06),
            getter("current_limit")),
    Command(f"{SRC}:VOLTage:RESistance[:LEVel]", setter("res_ohm", -0.04, 1.0), getter("res_ohm")),
    Command(f"{SRC}:VOLTage:RESistance:STATe", resistance_state, getter("res_on", "{:d}")),
    Command(f"{SRC}:EMULation", emulation, short_getter("emulation")),
    Command(f"{SRC}:VOLTage:MODE", volt_mode, short_getter("volt_mode")),
    Command(f"{SRC}:ARB:FUNCtion:TYPE", arb_type, short_getter("arb_type")),
    Command(f"{SRC}:ARB:FUNCtion[:SHAPe]", arb_shape, short_getter("arb_shape")),
    Command(f"{SRC}:ARB:COUNt", arb_count, arb_count_query),
    Command("FORMat[:DATA]", form, lambda s, c: "REAL" if s.form_real else "ASC"),
    Command("FORMat:BORDer", border, lambda s, c: "NORM" if s.border_normal else "SWAP"),
    Command("SENSe:FUNCtion:CURRent", sense_function("sense_curr"), getter("sense_curr", "{:d}")),
    Command("SENSe:FUNCtion:VOLTage", sense_function("sense_volt"), getter("sense_volt", "{:d}")),
    Command(f"{SRC}:ARB:VOLTage:SINusoid:AMPLitude", setter("sin_ampl", 0.0, 10.0), getter("sin_ampl")),
    Command(f"{SRC}:ARB:VOLTage:SINusoid:OFFSet", setter("sin_offs", 0.0, 20.4), getter("sin_offs")),
    Command(f"{SRC}:ARB:VOLTage:SINusoid:FREQuency", setter("sin_freq", 0.011, 10_000.0), getter("sin_freq")),
    *(Command(f"TRIGger:{system}:SOURce", trigger_source(system), trigger_source_query(system))
      for system in ("ARB", "TRANsient", "ACQuire")),
    Command("INITiate[:IMMediate]:TRANsient", slot_only(_init_tran)),
    Command("INITiate[:IMMediate]:ACQuire", slot_only(lambda s, c: s._initiate_acq())),
    Command("TRIGger:TRANsient[:IMMediate]", slot_only(lambda s, c: s._start_arb())),
    Command("TRIGger:ACQuire[:IMMediate]", slot_only(lambda s, c: s._trigger_acq())),
    Command("ABORt:TRANsient", slot_only(lambda s, c: s._abort_arb())),
    Command("ABORt:ACQuire", slot_only(_abort_acq)),
    Command("SENSe:SWEep:TINTerval", tint, getter("tint")),
    Command("SENSe:SWEep:POINts", points, points_query),
    Command("SENSe:SWEep:OFFSet:POINts", offset, getter("offset_points", "{:+d}")),
    Command("SYSTem:CHANnel:MODel", query=module),
    Command("STATus:OPERation:CONDition", query=operation_condition),
    Setting(f"{SRC}:VOLTage:LIMit[:POSitive][:IMMediate][:AMPLitude]", 20.4, numeric(0.0, 20.4, E6), slot_channels),
    Setting(f"{SRC}:VOLTage:PROTection[:LEVel]", 22.0, numeric(0.0, 22.0, E6), slot_channels),
    Setting(f"{SRC}:VOLTage:RANGe", 20.4, numeric(0.0, 20.4, E6), slot_channels),
    Setting(f"{SRC}:VOLTage:SLEW[:IMMediate]", 9.9e37, numeric(0.0, 9.9e37, E6), slot_channels),
    Setting(f"{SRC}:CURRent[:LEVel][:IMMediate][:AMPLitude]", 0.0, numeric(-3.06, 3.06, E6), slot_channels),
    Setting(f"{SRC}:CURRent:MODE", "FIXed", enumerated("FIXed", "STEP", "LIST", "ARB"), slot_channels),
    Setting(f"{SRC}:CURRent:RANGe", 3.06, numeric(0.0, 3.06, E6), slot_channels),
    Setting(f"{SRC}:FUNCtion", "VOLTage", enumerated("VOLTage", "CURRent"), slot_channels),  # priority mode
    Setting(f"{SRC}:ARB:TERMinate:LAST", False, on_off(), slot_channels),
    Setting("SENSe:CURRent[:DC]:RANGe[:UPPer]", 3.06, numeric(0.0, 3.06, E6), slot_channels),
    Setting("SENSe:VOLTage[:DC]:RANGe[:UPPer]", 20.4, numeric(0.0, 20.4, E6), slot_channels),
    Command("OUTPut:PROTection:CLEar", slot_only(_nothing)),
    Command("STATus:OPERation[:EVENt]", query=operation_condition),
    Command("STATus:QUEStionable:CONDition", query=questionable_condition),
    Command("SYSTem:CHANnel:COUNt", query=lambda s, c: "+1"),
    Command("MEASure[:SCALar]:POWer[:DC]", query=scalar_power),
    Command("FETCh[:SCALar]:CURRent[:DC]", query=fetch_scalar("CURR")),
    Command("FETCh[:SCALar]:VOLTage[:DC]", query=fetch_scalar("VOLT")),
    Command("FETCh:ARRay:CURRent[:DC]", query=fetch("CURR")),
    Command("FETCh:ARRay:VOLTage[:DC]", query=fetch("VOLT")),
    Command("MEASure:ARRay:CURRent[:DC]", query=measure_array("CURR")),
    Command("MEASure:ARRay:VOLTage[:DC]", query=measure_array("VOLT")),
    Command("MEASure[:SCALar]:CURRent[:DC]", query=measure("CURR")),
    Command("MEASure[:SCALar]:VOLTage[:DC]", query=measure("VOLT")),
)
