"""DC power analyzer / battery emulator driver: Keysight N6705C mainframe with an N6781A-class module.

Output, voltage, current limit, battery emulation with output resistance, ARB sine ripple, and
the digitizer (current and voltage at >= 50 kS/s, binary float32 fetch, pre-trigger points).

The digitizer ignores a trigger that arrives before its pre-trigger points have been acquired
(the sweep would then never start and FETC would block), so `trigger()` first polls the
Operation Status condition register until WTG-meas says it waits for a trigger. Fetches read the
error queue in the same message; interval, points and values are checked before use.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from phonebench.core.errors import ConfigError, InstrumentError, InvalidMeasurement
from phonebench.drivers.visa import DEFAULT_TIMEOUT_S, InstrumentIdentity, ScpiInstrument

log = logging.getLogger(__name__)

OVERLOAD = 9.9e37  # the meter's "overload" value in array data
QUANTITIES = {"current": "CURR", "voltage": "VOLT"}
WTG_MEAS = 8  # Operation Status bit 3: the measurement system waits for a trigger
TRIGGER_MARGIN_S = 5.0  # the pre-trigger fill plus at most this


@dataclass
class Trace:
    """One digitizer sweep; t is seconds relative to the trigger (negative = pre-trigger)."""

    t: np.ndarray
    interval_s: float
    pretrigger_points: int
    current_a: np.ndarray | None = None
    voltage_v: np.ndarray | None = None
    instrument: str = ""

    @property
    def sample_rate_hz(self) -> float:
        return 1.0 / self.interval_s

    def invalid_count(self) -> int:
        return sum(int(np.count_nonzero(~np.isfinite(a) | (np.abs(a) >= OVERLOAD)))
                   for a in (self.current_a, self.voltage_v) if a is not None)

    def require_valid(self) -> Trace:
        bad = self.invalid_count()
        if bad:
            raise InvalidMeasurement(f"{self.instrument}: {bad} digitizer samples are overload or NaN",
                                     hint="raise the measurement range or current limit; check the DUT wiring")
        return self

    def power_w(self) -> np.ndarray:
        if self.current_a is None or self.voltage_v is None:
            raise ConfigError("power needs a trace with both current and voltage",
                              hint="digitize with quantities=('current', 'voltage')")
        self.require_valid()
        return self.current_a.astype(np.float64) * self.voltage_v

    def energy_j(self) -> float:
        return float(np.sum(self.power_w()) * self.interval_s)


@runtime_checkable
class PowerAnalyzer(Protocol):
    identity: InstrumentIdentity

    def output(self, on: bool) -> None: ...

    def set_voltage(self, volts: float) -> None: ...

    def set_current_limit(self, amps: float) -> None: ...

    def set_output_resistance(self, ohms: float | None) -> None:
        """Emulated battery internal resistance; None switches it off."""

    def battery_emulation(self, on: bool) -> None: ...

    def set_ripple(self, amplitude_v: float, frequency_hz: float, offset_v: float | None = None) -> None:
        """Configure a sine ripple on the output (offset defaults to the voltage setting)."""

    def start_ripple(self) -> None: ...

    def stop_ripple(self) -> None: ...

    def measure_voltage(self) -> float: ...

    def measure_current(self) -> float: ...

    def arm_digitizer(self, points: int, interval_s: float, pretrigger_points: int = 0,
                      quantities: Sequence[str] = ("current", "voltage")) -> None: ...

    def trigger(self) -> None:
        """Trigger the armed sweep; returns once the digitizer took the trigger (pre-trigger points in)."""

    def fetch(self) -> Trace: ...

    def digitize(self, points: int, interval_s: float, pretrigger_points: int = 0,
                 quantities: Sequence[str] = ("current", "voltage")) -> Trace:
        """arm_digitizer + trigger + fetch."""

    def close(self) -> None: ...


class KeysightN6705C(ScpiInstrument):
    role = "supply"
    family = "keysight-n6705c"

    def __init__(self, address: str, channel: int = 1, poll_s: float = 0.01, backend: str = "@py",
                 timeout_s: float = DEFAULT_TIMEOUT_S, resource: object = None) -> None:
        super().__init__(address, backend, timeout_s, resource)
        self.channel = channel
        self.poll_s = poll_s
        self._ch = f"(@{channel})"
        self._armed: tuple[int, float, int, tuple[str, ...]] | None = None
        module = self.query(f"SYST:CHAN:MOD? {self._ch}").strip('"')
        if not module:
            raise InstrumentError(f"{self.name}: no module in slot {channel}",
                                  hint="set the supply's channel option to a populated slot")
        self.identity.options[f"module@{channel}"] = module

    def output(self, on: bool) -> None:
        self.configure(f"OUTP {'ON' if on else 'OFF'},{self._ch}")

    def set_voltage(self, volts: float) -> None:
        self.configure(f"VOLT {volts:g},{self._ch}")

    def set_current_limit(self, amps: float) -> None:
        self.configure(f"CURR:LIM {amps:g},{self._ch}")

    def set_output_resistance(self, ohms: float | None) -> None:
        if ohms is None:
            self.configure(f"VOLT:RES:STAT OFF,{self._ch}")
        else:
            self.configure(f"VOLT:RES {ohms:g},{self._ch}", f"VOLT:RES:STAT ON,{self._ch}")

    def battery_emulation(self, on: bool) -> None:
        self.configure(f"EMUL {'BATT' if on else 'PS2Q'},{self._ch}")

    def set_ripple(self, amplitude_v: float, frequency_hz: float, offset_v: float | None = None) -> None:
        if offset_v is None:
            offset_v = self.query_float(f"VOLT? {self._ch}")
        ch = self._ch
        self.configure(f"VOLT:MODE ARB,{ch}", f"ARB:FUNC:TYPE VOLT,{ch}", f"ARB:FUNC:SHAP SIN,{ch}",
                       f"ARB:VOLT:SIN:AMPL {amplitude_v:g},{ch}", f"ARB:VOLT:SIN:OFFS {offset_v:g},{ch}",
                       f"ARB:VOLT:SIN:FREQ {frequency_hz:g},{ch}", f"ARB:COUN INF,{ch}", "TRIG:ARB:SOUR BUS")

    def start_ripple(self) -> None:
        self.configure(f"INIT:TRAN {self._ch}", f"TRIG:TRAN {self._ch}")

    def stop_ripple(self) -> None:
        self.configure(f"ABOR:TRAN {self._ch}", f"VOLT:MODE FIX,{self._ch}")

    def measure_voltage(self) -> float:
        return self._scalar(f"MEAS:VOLT? {self._ch}")

    def measure_current(self) -> float:
        return self._scalar(f"MEAS:CURR? {self._ch}")

    def _scalar(self, command: str) -> float:
        value = self.query_float(command)
        if not np.isfinite(value) or abs(value) >= OVERLOAD:
            raise InvalidMeasurement(f"{self.name}: `{command}` reported overload ({value})",
                                     hint="raise the measurement range or check the DUT wiring")
        return value

    def arm_digitizer(self, points: int, interval_s: float, pretrigger_points: int = 0,
                      quantities: Sequence[str] = ("current", "voltage")) -> None:
        unknown = set(quantities) - set(QUANTITIES)
        if unknown or not quantities:
            raise ConfigError(f"{self.name}: cannot digitize {sorted(unknown) or 'nothing'}",
                              hint=f"choose from {sorted(QUANTITIES)}")
        ch = self._ch
        # What is sensed is switched on before the rest is switched off: the analyzer refuses a
        # moment with neither current nor voltage sensed (-221).
        functions = [f"SENS:FUNC:{QUANTITIES[q]} ON,{ch}" for q in ("current", "voltage") if q in quantities] + \
                    [f"SENS:FUNC:{QUANTITIES[q]} OFF,{ch}" for q in ("current", "voltage") if q not in quantities]
        self.configure("FORM REAL", "FORM:BORD NORM", *functions,
                       f"SENS:SWE:TINT {interval_s:.6g},{ch}", f"SENS:SWE:POIN {points},{ch}",
                       f"SENS:SWE:OFFS:POIN {-pretrigger_points},{ch}", f"TRIG:ACQ:SOUR BUS,{ch}",
                       f"INIT:ACQ {ch}")
        # The instrument rounds the interval; 0, negative, NaN or 9.9E37 would make every time and
        # energy figure wrong, so it is refused here.
        actual = self.query_finite(f"SENS:SWE:TINT? {ch}", "the digitizer sample interval", positive=True)
        self._armed = (points, actual, pretrigger_points, tuple(quantities))

    def trigger(self) -> None:
        """Trigger the armed sweep once its pre-trigger points are in (an earlier trigger is ignored)."""
        if self._armed is None:
            raise ConfigError(f"{self.name}: trigger() before arm_digitizer()", hint="arm, trigger, then fetch")
        _, interval, pretrigger, _ = self._armed
        self.poll_until(f"STAT:OPER:COND? {self._ch}", self._waiting_for_trigger,
                        pretrigger * interval + TRIGGER_MARGIN_S, self.poll_s,
                        "digitizer ready for its trigger (STAT:OPER:COND? bit 3 WTG-meas)",
                        "the digitizer did not finish its pre-trigger points: check that INIT:ACQ was accepted, "
                        "that nothing aborted it (ABOR:ACQ, *RST, a front-panel action) and the sweep settings")
        self.configure(f"TRIG:ACQ {self._ch}")

    def _waiting_for_trigger(self, answer: str) -> bool:
        try:
            return bool(int(float(answer)) & WTG_MEAS)
        except ValueError:
            raise InstrumentError(f"{self.name}: STAT:OPER:COND? answered {answer[:40]!r}, not a register value",
                                  hint="the instrument may be another model") from None

    def fetch(self) -> Trace:
        if self._armed is None:
            raise ConfigError(f"{self.name}: fetch() before arm_digitizer()", hint="arm, trigger, then fetch")
        points, interval, pretrigger, quantities = self._armed
        # A real sweep takes points * interval of wall time; allow for it.
        timeout = self.timeout_s + points * interval
        arrays = {}
        for quantity in quantities:
            # The error queue is read in the same message: a refused fetch or setting shows here.
            data = self.query_block(f"FETC:ARR:{QUANTITIES[quantity]}? {self._ch}", ">f4", timeout, check=True)
            data = data.astype(np.float32)  # native byte order for the arithmetic that follows
            if data.size != points:
                raise InstrumentError(f"{self.name}: fetched {data.size} {quantity} points, armed {points}",
                                      hint="the sweep settings changed under the driver; re-arm")
            arrays[quantity] = data
        t = (np.arange(points) - pretrigger) * interval
        return Trace(t, interval, pretrigger, arrays.get("current"), arrays.get("voltage"), self.name)

    def digitize(self, points: int, interval_s: float, pretrigger_points: int = 0,
                 quantities: Sequence[str] = ("current", "voltage")) -> Trace:
        self.arm_digitizer(points, interval_s, pretrigger_points, quantities)
        self.trigger()
        return self.fetch()
