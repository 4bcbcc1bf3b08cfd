"""The N6705C's state and behaviour, the part of the emulated instrument its command table
(power_analyzer_table.py) acts on; power_analyzer.py joins the two into PowerAnalyzerServer (what the model does and
refuses is described there, after its manual)."""
from __future__ import annotations

import logging
import zlib
from dataclasses import dataclass, field

import numpy as np

from .scpi import SETTINGS_CONFLICT, TRIGGER_IGNORED, QueryBlocked, ScpiError, ieee_block
from .server import InstrumentServer
from ..world import World

log = logging.getLogger(__name__)

IDN = "Keysight Technologies,N6705C,MY56001234,D.03.04.1296"
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


class PowerAnalyzerModel(InstrumentServer):
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
