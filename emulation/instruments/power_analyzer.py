"""Emulated Keysight N6705C DC power analyzer with an N6781A source/measure module in slot 1.

The output powers the emulated phone: voltage, current limit, battery-emulation output
resistance and the ARB sine ripple go into the world's supply, so the phone sees them. The
digitizer samples the world's terminal voltage and current (with meter noise) over the sweep
window; fetching waits in simulated time until the sweep has finished.

As on the real mainframe, after INIT:ACQ the digitizer first fills its pre-trigger points
(SENS:SWE:OFFS:POIN < 0); a trigger that arrives before that is ignored (-211 "Trigger
ignored" is queued) and the sweep never starts, so a later FETC waits forever. The Operation
Status condition register (STAT:OPER:COND? (@1)) shows the state: bit 3 WTG-meas once the
digitizer is waiting for its trigger, bit 4 MEAS-active while initiated or sweeping, bit 5
WTG-tran / bit 6 TRAN-active for the transient (ARB) system, bit 2 OFF for an output that is
off, bit 0 CV otherwise. Polling it while the pre-trigger points fill takes simulated time.
"""
from __future__ import annotations

import logging
import zlib
from dataclasses import dataclass, field

import numpy as np

from .scpi import (
    HARDWARE_MISSING,
    ILLEGAL_VALUE,
    OUT_OF_RANGE,
    SETTINGS_CONFLICT,
    TRIGGER_IGNORED,
    Call,
    Handler,
    QueryBlocked,
    ScpiError,
    ieee_block,
    short_form,
)
from .server import InstrumentServer, enumerated, fixed, numeric, on_off
from ..world import World

log = logging.getLogger(__name__)

IDN = "Keysight Technologies,N6705C,MY56001234,D.03.04.1296"
MODULE = "N6781A"
TINT_STEP_S = 5.12e-6  # sample interval resolution; also the minimum for one parameter
MAX_POINTS = 1 << 20  # emulator's digitizer buffer per parameter
CURRENT_NOISE_A = 0.4e-3
CURRENT_ZERO_OFFSET_A = 1.8e-3  # uncorrected zero error of the current meter (read it with no load)
VOLTAGE_NOISE_V = 0.3e-3
MEAS_POINTS = 1024  # MEAS:CURR? / MEAS:VOLT? average one short sweep
COMMAND_LATENCY_S = 1e-3  # simulated time a command unit takes on the mainframe
POLL_QUANTUM_S = 0.02  # simulated time a status poll takes while the pre-trigger points fill
# Operation Status register bits.
OPER_CV, OPER_OFF, OPER_WTG_MEAS, OPER_MEAS_ACTIVE, OPER_WTG_TRAN, OPER_TRAN_ACTIVE = 1, 4, 8, 16, 32, 64


@dataclass
class Sweep:
    t_trigger: float
    interval_s: float
    points: int
    offset_points: int
    functions: tuple[str, ...]
    data: dict[str, np.ndarray] | None = None
    blocks: dict[tuple[str, bool], bytes] = field(default_factory=dict)  # encoded, for re-fetches


class PowerAnalyzerServer(InstrumentServer):
    family = "keysight-n6705c"
    idn = IDN
    options = "0"  # *OPT?: no mainframe options
    SAVED_STATE = ("output_on", "voltage", "current_limit", "res_ohm", "res_on", "emulation", "volt_mode",
                   "sin_ampl", "sin_offs", "sin_freq", "sense_curr", "sense_volt", "tint", "points", "offset_points")
    SAVE_SLOTS = range(16)
    FAULTS = InstrumentServer.FAULTS | {"garbage_block", "truncated_block", "overload"}
    COMMAND_LATENCY_S = COMMAND_LATENCY_S

    def __init__(self, world: World, port: int = 0) -> None:
        super().__init__(port)
        self.world = world
        self._sweeps = 0
        self.reset()
        self._register()

    def reset(self) -> None:
        self.output_on = False
        self.voltage = 0.0
        self.current_limit = 3.0
        self.res_ohm = 0.0
        self.res_on = False
        self.emulation = "PS2Q"
        self.volt_mode = "FIXed"
        self.arb_type = "VOLTage"
        self.arb_shape = "SINusoid"
        self.sin_ampl = 0.0
        self.sin_offs = 0.0
        self.sin_freq = 1000.0
        self.arb_count_inf = False
        self.tran_initiated = False
        self.arb_running = False
        self.sense_curr = True
        self.sense_volt = True
        self.tint = 20.48e-6
        self.points = 1024
        self.offset_points = 0
        self.acq_initiated = False
        self.pretrigger_filled_at = 0.0  # world time the initiated digitizer can take a trigger
        self.sweep: Sweep | None = None
        self.form_real = False
        self.border_normal = True
        self.trigger_sources = {"ARB": "BUS", "TRANsient": "BUS", "ACQuire": "BUS"}
        self._apply()

    # --- world link -----------------------------------------------------------------------
    def _apply(self) -> None:
        """Push the output's state into the world's supply (what the phone sees)."""
        supply = self.world.supply
        supply.emulator_on = self.output_on
        supply.setpoint_v = self.voltage
        supply.current_limit_a = self.current_limit
        supply.output_resistance_ohm = self.res_ohm if (self.res_on and self.emulation == "BATTery") else 0.0
        running = self.output_on and self.volt_mode == "ARB" and self.arb_running
        if running and not supply.ripple_running:
            supply.ripple_t0 = self.world.clock.now()
        supply.ripple_running = running
        supply.ripple_amplitude_v = self.sin_ampl if running else 0.0
        supply.ripple_offset_v = self.sin_offs if running else 0.0
        supply.ripple_hz = self.sin_freq

    def _start_arb(self) -> None:
        if not self.tran_initiated:
            raise ScpiError(TRIGGER_IGNORED, "transient system not initiated (INIT:TRAN)")
        if self.volt_mode != "ARB":
            raise ScpiError(SETTINGS_CONFLICT, "VOLT:MODE is not ARB")
        self.arb_running = True
        self.tran_initiated = False
        self._apply()

    def _abort_arb(self) -> None:
        self.arb_running = False
        self.tran_initiated = False
        self._apply()

    def elapse(self, seconds: float) -> None:
        self.world.wait(seconds)

    def recalled(self) -> None:
        self._apply()

    # --- digitizer ----------------------------------------------------------------------------
    def _initiate_acq(self) -> None:
        self.acq_initiated = True
        self.sweep = None
        pretrigger = max(0, -self.offset_points)
        self.pretrigger_filled_at = self.world.clock.now() + pretrigger * self.tint

    def _trigger_acq(self, internal: bool = False) -> None:
        if not self.acq_initiated:
            raise ScpiError(TRIGGER_IGNORED, "acquisition not initiated (INIT:ACQ)")
        now = self.world.clock.now()
        if not internal and now < self.pretrigger_filled_at:
            # The pre-trigger points come first; the trigger is ignored and the sweep never starts.
            raise ScpiError(TRIGGER_IGNORED, f"pre-trigger points not yet acquired "
                                             f"({self.pretrigger_filled_at - now:.3g} s to go)")
        functions = tuple(f for f, on in (("CURR", self.sense_curr), ("VOLT", self.sense_volt)) if on)
        self.sweep = Sweep(self.world.clock.now(), self.tint, self.points, self.offset_points, functions)
        self.acq_initiated = False

    def _operation_condition(self) -> int:
        now = self.world.clock.now()
        if self.acq_initiated and now < self.pretrigger_filled_at:
            self.world.wait(min(POLL_QUANTUM_S, self.pretrigger_filled_at - now))
            now = self.world.clock.now()
        bits = OPER_CV if self.output_on else OPER_OFF
        if self.acq_initiated:
            bits |= OPER_MEAS_ACTIVE | (OPER_WTG_MEAS if now >= self.pretrigger_filled_at else 0)
        elif self.sweep is not None and self.sweep.data is None:
            end = self.sweep.t_trigger + (self.sweep.offset_points + self.sweep.points) * self.sweep.interval_s
            bits |= OPER_MEAS_ACTIVE if now < end else 0
        if self.tran_initiated:
            bits |= OPER_TRAN_ACTIVE | OPER_WTG_TRAN
        elif self.arb_running:
            bits |= OPER_TRAN_ACTIVE
        return bits

    def bus_trigger(self) -> None:
        fired = False
        if self.acq_initiated:
            self._trigger_acq()
            fired = True
        if self.tran_initiated and self.volt_mode == "ARB":
            self._start_arb()
            fired = True
        if not fired:
            raise ScpiError(TRIGGER_IGNORED, "nothing initiated")

    def _sweep_data(self, function: str) -> np.ndarray | None:
        sweep = self.sweep
        if sweep is None:
            return None
        if function not in sweep.functions:
            raise ScpiError(SETTINGS_CONFLICT, f"{function} was not sensed in the last sweep (SENS:FUNC)")
        if sweep.data is None:
            start = sweep.t_trigger + sweep.offset_points * sweep.interval_s
            times = start + np.arange(sweep.points) * sweep.interval_s
            self.world.wait_until(times[-1] + sweep.interval_s)  # the sweep completes in simulated time
            if self.output_on:
                volts, amps = self.world.electrical_at(times)
            else:  # the phone is not drawing through this output
                volts, amps = np.zeros(times.shape), np.zeros(times.shape)
            self._sweeps += 1
            rng = np.random.default_rng([self.world.seed, zlib.crc32(b"n6705c"), self._sweeps])
            sweep.data = {"VOLT": (volts + rng.normal(0, VOLTAGE_NOISE_V, times.shape)).astype(np.float32),
                          "CURR": (amps + CURRENT_ZERO_OFFSET_A
                                   + rng.normal(0, CURRENT_NOISE_A, times.shape)).astype(np.float32)}
            if self.take_fault("overload"):
                sweep.data["CURR"][sweep.points // 2:sweep.points // 2 + 5] = 9.91e37
        return sweep.data[function]

    def _fetch_array(self, function: str) -> bytes | str | None:
        data = self._sweep_data(function)
        if data is None:
            log.warning("%s: FETC before any triggered sweep; the instrument waits (no answer)", self.family)
            raise QueryBlocked("no triggered sweep to fetch")
        if not self.form_real:
            return ",".join(f"{v:+.6E}" for v in data)
        if self.take_fault("garbage_block"):
            return b"garbage, not a block"
        sweep = self.sweep
        assert sweep is not None  # _sweep_data returned data
        key = (function, self.border_normal)
        if key not in sweep.blocks:
            sweep.blocks[key] = ieee_block(data.astype(">f4" if self.border_normal else "<f4").tobytes())
        block = sweep.blocks[key]
        if self.take_fault("truncated_block"):
            return block[:len(block) // 2]
        return block

    def _measure_scalar(self, function: str) -> str:
        saved = (self.sense_curr, self.sense_volt, self.tint, self.points, self.offset_points, self.sweep)
        self.sense_curr = self.sense_volt = True
        self.tint, self.points, self.offset_points = 20.48e-6, MEAS_POINTS, 0
        self.acq_initiated = True
        self._trigger_acq(internal=True)
        value = float(np.mean(self._sweep_data(function)))
        (self.sense_curr, self.sense_volt, self.tint, self.points, self.offset_points, self.sweep) = saved
        return f"{value:+.6E}"

    # --- commands ---------------------------------------------------------------------------------
    def _register(self) -> None:
        t = self.tree

        def slot(call: Call, index: int) -> None:
            for channel in call.channels(index):
                if channel != 1:
                    raise ScpiError(HARDWARE_MISSING, f"no module in slot {channel}")

        def setter(attr: str, lo: float, hi: float) -> Handler:
            def handler(call: Call) -> None:
                slot(call, 1)
                setattr(self, attr, call.number(0, lo, hi))
                self._apply()
            return handler

        def getter(attr: str, fmt: str = "{:+.6E}") -> Handler:
            def handler(call: Call) -> str:
                slot(call, 0)
                return fmt.format(getattr(self, attr))
            return handler

        def short_getter(attr: str) -> Handler:
            def handler(call: Call) -> str:
                slot(call, 0)
                return short_form(getattr(self, attr))
            return handler

        def flag(attr: str) -> Handler:
            def handler(call: Call) -> None:
                slot(call, 1)
                setattr(self, attr, call.boolean(0))
                if attr == "res_on" and self.res_on and self.emulation != "BATTery":
                    self.res_on = False
                    raise ScpiError(SETTINGS_CONFLICT, "output resistance needs EMUL BATT")
                self._apply()
            return handler

        def output(call: Call) -> None:
            slot(call, 1)
            self.output_on = call.boolean(0)
            self._apply()

        def emulation(call: Call) -> None:
            slot(call, 1)
            self.emulation = call.option(0, "PS4Q", "PS2Q", "PS1Q", "BATTery", "CHARger", "CCLoad", "CVLoad",
                                         "VMETer", "AMETer")
            if self.emulation != "BATTery":
                self.res_on = False
            self._apply()

        def volt_mode(call: Call) -> None:
            slot(call, 1)
            self.volt_mode = call.option(0, "FIXed", "STEP", "LIST", "ARB")
            if self.volt_mode != "ARB":
                self.arb_running = False
            self._apply()

        def arb_type(call: Call) -> None:
            slot(call, 1)
            self.arb_type = call.option(0, "VOLTage", "CURRent")
            if self.arb_type != "VOLTage":
                raise ScpiError(ILLEGAL_VALUE, "current arbs are not modelled")

        def arb_shape(call: Call) -> None:
            slot(call, 1)
            self.arb_shape = call.option(0, "SINusoid", "STEP", "RAMP", "PULSe", "TRAPezoid", "EXPonential",
                                         "STAircase", "UDEFined", "CDWell", "SEQuence", "CONStant")
            if self.arb_shape != "SINusoid":
                raise ScpiError(ILLEGAL_VALUE, "arb shapes other than SINusoid are not modelled")

        def arb_count(call: Call) -> None:
            slot(call, 1)
            text = call.arg(0).strip().upper()
            if text not in ("INF", "INFINITY", "9.9E37"):
                raise ScpiError(ILLEGAL_VALUE, "arb counts other than INFinity are not modelled")
            self.arb_count_inf = True

        def trigger_source(system: str) -> Handler:
            def handler(call: Call) -> None:
                # BUS and IMMediate both start on a software trigger here.
                self.trigger_sources[system] = call.option(0, "BUS", "IMMediate")
                if call.has(1):
                    slot(call, 1)
            return handler

        def trigger_source_query(system: str) -> Handler:
            def handler(call: Call) -> str:
                if call.has(0):
                    slot(call, 0)
                return short_form(self.trigger_sources[system])
            return handler

        def init_tran(call: Call) -> None:
            slot(call, 0)
            self.tran_initiated = True

        def init_acq(call: Call) -> None:
            slot(call, 0)
            self._initiate_acq()

        def trig_tran(call: Call) -> None:
            slot(call, 0)
            self._start_arb()

        def trig_acq(call: Call) -> None:
            slot(call, 0)
            self._trigger_acq()

        def abort_tran(call: Call) -> None:
            slot(call, 0)
            self._abort_arb()

        def abort_acq(call: Call) -> None:
            slot(call, 0)
            self.acq_initiated = False

        def sense_function(attr: str) -> Handler:
            def handler(call: Call) -> None:
                slot(call, 1)
                setattr(self, attr, call.boolean(0))
                if not (self.sense_curr or self.sense_volt):
                    setattr(self, attr, True)
                    raise ScpiError(SETTINGS_CONFLICT, "at least one of current and voltage must be sensed")
            return handler

        def tint(call: Call) -> None:
            slot(call, 1)
            value = call.number(0, TINT_STEP_S, 40_000.0)
            steps = max(round(value / TINT_STEP_S), 1)
            minimum = 2 if (self.sense_curr and self.sense_volt) else 1
            if steps < minimum:
                raise ScpiError(OUT_OF_RANGE, f"{value:g} s below {minimum * TINT_STEP_S:g} s for "
                                              f"{minimum} sensed parameters")
            self.tint = steps * TINT_STEP_S

        def points(call: Call) -> None:
            slot(call, 1)
            self.points = int(call.number(0, 1, MAX_POINTS))

        def points_query(call: Call) -> str:
            if call.args and call.arg(0).strip().upper() in ("MAX", "MAXIMUM"):
                slot(call, 1)
                return f"+{MAX_POINTS}"
            if call.args and call.arg(0).strip().upper() in ("MIN", "MINIMUM"):
                slot(call, 1)
                return "+1"
            slot(call, 0)
            return f"+{self.points}"

        def offset(call: Call) -> None:
            slot(call, 1)
            self.offset_points = int(call.number(0, -(MAX_POINTS - 1), 2e9))

        def form(call: Call) -> None:
            self.form_real = call.choice(0, "ASCii", "REAL") == "REAL"

        def border(call: Call) -> None:
            self.border_normal = call.choice(0, "NORMal", "SWAPped") == "NORMAL"

        def module(call: Call) -> str:
            return ",".join(MODULE if channel == 1 else '""' for channel in call.channels(0))

        def fetch(function: str) -> Handler:
            def handler(call: Call) -> bytes | str | None:
                slot(call, 0)
                return self._fetch_array(function)
            return handler

        def measure_array(function: str) -> Handler:
            def handler(call: Call) -> bytes | str | None:
                slot(call, 0)
                self.acq_initiated = True
                self._trigger_acq(internal=True)  # MEAS:ARR initiates and triggers in one
                return self._fetch_array(function)
            return handler

        def measure(function: str) -> Handler:
            def handler(call: Call) -> str:
                slot(call, 0)
                return self._measure_scalar(function)
            return handler

        t.add("OUTPut[:STATe]", output)
        t.add("OUTPut[:STATe]?", getter("output_on", "{:d}"))
        t.add("[SOURce]:VOLTage[:LEVel][:IMMediate][:AMPLitude]", setter("voltage", 0.0, 20.4))
        t.add("[SOURce]:VOLTage[:LEVel][:IMMediate][:AMPLitude]?", getter("voltage"))
        t.add("[SOURce]:CURRent:LIMit[:POSitive][:IMMediate][:AMPLitude]", setter("current_limit", 0.0, 3.06))
        t.add("[SOURce]:CURRent:LIMit[:POSitive][:IMMediate][:AMPLitude]?", getter("current_limit"))
        t.add("[SOURce]:VOLTage:RESistance[:LEVel]", setter("res_ohm", -0.04, 1.0))
        t.add("[SOURce]:VOLTage:RESistance[:LEVel]?", getter("res_ohm"))
        t.add("[SOURce]:VOLTage:RESistance:STATe", flag("res_on"))
        t.add("[SOURce]:VOLTage:RESistance:STATe?", getter("res_on", "{:d}"))
        t.add("[SOURce]:EMULation", emulation)
        t.add("[SOURce]:EMULation?", short_getter("emulation"))
        t.add("[SOURce]:VOLTage:MODE", volt_mode)
        t.add("[SOURce]:VOLTage:MODE?", short_getter("volt_mode"))
        t.add("[SOURce]:ARB:FUNCtion:TYPE", arb_type)
        t.add("[SOURce]:ARB:FUNCtion:TYPE?", short_getter("arb_type"))
        t.add("[SOURce]:ARB:FUNCtion[:SHAPe]", arb_shape)
        t.add("[SOURce]:ARB:FUNCtion[:SHAPe]?", short_getter("arb_shape"))
        t.add("[SOURce]:ARB:COUNt?", lambda c: "9.9E+37" if (slot(c, 0), self.arb_count_inf)[1] else "+1")
        t.add("FORMat[:DATA]?", lambda c: "REAL" if self.form_real else "ASC")
        t.add("FORMat:BORDer?", lambda c: "NORM" if self.border_normal else "SWAP")
        t.add("SENSe:FUNCtion:CURRent?", getter("sense_curr", "{:d}"))
        t.add("SENSe:FUNCtion:VOLTage?", getter("sense_volt", "{:d}"))
        t.add("[SOURce]:ARB:VOLTage:SINusoid:AMPLitude", setter("sin_ampl", 0.0, 10.0))
        t.add("[SOURce]:ARB:VOLTage:SINusoid:AMPLitude?", getter("sin_ampl"))
        t.add("[SOURce]:ARB:VOLTage:SINusoid:OFFSet", setter("sin_offs", 0.0, 20.4))
        t.add("[SOURce]:ARB:VOLTage:SINusoid:OFFSet?", getter("sin_offs"))
        t.add("[SOURce]:ARB:VOLTage:SINusoid:FREQuency", setter("sin_freq", 0.011, 10_000.0))
        t.add("[SOURce]:ARB:VOLTage:SINusoid:FREQuency?", getter("sin_freq"))
        t.add("[SOURce]:ARB:COUNt", arb_count)
        for system in ("ARB", "TRANsient", "ACQuire"):
            t.add(f"TRIGger:{system}:SOURce", trigger_source(system))
            t.add(f"TRIGger:{system}:SOURce?", trigger_source_query(system))
        t.add("INITiate[:IMMediate]:TRANsient", init_tran)
        t.add("INITiate[:IMMediate]:ACQuire", init_acq)
        t.add("TRIGger:TRANsient[:IMMediate]", trig_tran)
        t.add("TRIGger:ACQuire[:IMMediate]", trig_acq)
        t.add("ABORt:TRANsient", abort_tran)
        t.add("ABORt:ACQuire", abort_acq)
        t.add("SENSe:FUNCtion:CURRent", sense_function("sense_curr"))
        t.add("SENSe:FUNCtion:VOLTage", sense_function("sense_volt"))
        t.add("SENSe:SWEep:TINTerval", tint)
        t.add("SENSe:SWEep:TINTerval?", getter("tint"))
        t.add("SENSe:SWEep:POINts", points)
        t.add("SENSe:SWEep:POINts?", points_query)
        t.add("SENSe:SWEep:OFFSet:POINts", offset)
        t.add("SENSe:SWEep:OFFSet:POINts?", getter("offset_points", "{:+d}"))
        t.add("FORMat[:DATA]", form)
        t.add("FORMat:BORDer", border)
        t.add("SYSTem:CHANnel:MODel?", module)

        def operation_condition(call: Call) -> str:
            if call.args:
                slot(call, 0)
            return f"+{self._operation_condition()}"

        t.add("STATus:OPERation:CONDition?", operation_condition)

        def slot_channels(call: Call, index: int) -> list[int]:
            slot(call, index)
            return call.channels(index)

        for node, default, kind in (
                ("[SOURce]:VOLTage:LIMit[:POSitive][:IMMediate][:AMPLitude]", 20.4, numeric(0.0, 20.4, "{:+.6E}")),
                ("[SOURce]:VOLTage:PROTection[:LEVel]", 22.0, numeric(0.0, 22.0, "{:+.6E}")),
                ("[SOURce]:VOLTage:RANGe", 20.4, numeric(0.0, 20.4, "{:+.6E}")),
                ("[SOURce]:VOLTage:SLEW[:IMMediate]", 9.9e37, numeric(0.0, 9.9e37, "{:+.6E}")),
                ("[SOURce]:CURRent[:LEVel][:IMMediate][:AMPLitude]", 0.0, numeric(-3.06, 3.06, "{:+.6E}")),
                ("[SOURce]:CURRent:MODE", "FIXed", enumerated("FIXed", "STEP", "LIST", "ARB")),
                ("[SOURce]:CURRent:RANGe", 3.06, numeric(0.0, 3.06, "{:+.6E}")),
                ("[SOURce]:FUNCtion", "VOLTage", enumerated("VOLTage", "CURRent")),  # priority mode
                ("[SOURce]:ARB:TERMinate:LAST", False, on_off()),
                ("SENSe:CURRent[:DC]:RANGe[:UPPer]", 3.06, numeric(0.0, 3.06, "{:+.6E}")),
                ("SENSe:VOLTage[:DC]:RANGe[:UPPer]", 20.4, numeric(0.0, 20.4, "{:+.6E}"))):
            self.add_setting(node, default, kind, channels=slot_channels)
        t.add("OUTPut:PROTection:CLEar", fixed(None, lambda c: slot(c, 0)))
        t.add("STATus:OPERation[:EVENt]?", operation_condition)
        t.add("STATus:QUEStionable:CONDition?", fixed("+0", lambda c: slot(c, 0)))  # no protection tripped
        t.add("SYSTem:CHANnel:COUNt?", lambda c: "+1")

        def scalar_power(call: Call) -> str:
            # Mean voltage times mean current of two short sweeps: the ripple's correlation is lost.
            slot(call, 0)
            return f"{float(self._measure_scalar('VOLT')) * float(self._measure_scalar('CURR')):+.6E}"

        def fetch_scalar(function: str) -> Handler:
            def handler(call: Call) -> str:
                slot(call, 0)
                data = self._sweep_data(function)
                if data is None:
                    raise QueryBlocked("no triggered sweep to fetch")
                return f"{float(np.mean(data)):+.6E}"
            return handler

        t.add("MEASure[:SCALar]:POWer[:DC]?", scalar_power)
        t.add("FETCh[:SCALar]:CURRent[:DC]?", fetch_scalar("CURR"))
        t.add("FETCh[:SCALar]:VOLTage[:DC]?", fetch_scalar("VOLT"))
        t.add("FETCh:ARRay:CURRent[:DC]?", fetch("CURR"))
        t.add("FETCh:ARRay:VOLTage[:DC]?", fetch("VOLT"))
        t.add("MEASure:ARRay:CURRent[:DC]?", measure_array("CURR"))
        t.add("MEASure:ARRay:VOLTage[:DC]?", measure_array("VOLT"))
        t.add("MEASure[:SCALar]:CURRent[:DC]?", measure("CURR"))
        t.add("MEASure[:SCALar]:VOLTage[:DC]?", measure("VOLT"))
