"""DC power analyzer / battery emulator driver: Keysight N6705C mainframe with an N6781A-class module.

Output, voltage, current limit, battery emulation with output resistance, ARB sine ripple, and
the digitizer (current and voltage at >= 50 kS/s, binary float32 fetch, pre-trigger points),
each a table of the module channel's commands (phonebench.drivers.scpi_table); the quirks are code.

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
from .scpi_table import Channel, Setting, Table, fixed, requires, sequence, setter
from .trace import OVERLOAD, Trace
from .visa import DEFAULT_TIMEOUT_S, InstrumentIdentity, ScpiInstrument

__all__ = ["KeysightN6705C", "PowerAnalyzer", "SupplyAccuracy", "SupplyFeatures", "Trace"]
log = logging.getLogger(__name__)

QUANTITIES = {"current": "CURR", "voltage": "VOLT"}
TINT_STEP_S = 5.12e-6  # N678xA digitizer: intervals are whole multiples of this
WTG_MEAS = 8  # Operation Status bit 3: the measurement system waits for a trigger
TRIGGER_MARGIN_S = 5.0  # the pre-trigger fill plus at most this
ARM_HINT = "arm, trigger, then fetch"

# One module channel, `{ch}` = "(@1)". Measurements are read-only rows.
N6705C_CHANNEL: Table = {
    "output": Setting("OUTP {},{ch}", choices={True: "ON", False: "OFF"}),
    "emulation": Setting("EMUL {},{ch}", choices={True: "BATT", False: "PS2Q"}),
    "voltage": Setting("VOLT {:g},{ch}", "VOLT? {ch}", "V"),
    "current_limit": Setting("CURR:LIM {:g},{ch}", "CURR:LIM? {ch}", "A"),
    "resistance": Setting("VOLT:RES {:g},{ch}", "VOLT:RES? {ch}", "ohm"),
    "resistance_on": Setting("VOLT:RES:STAT {},{ch}", choices={True: "ON", False: "OFF"}),
    "voltage_mode": Setting("VOLT:MODE {},{ch}", choices=("FIX", "ARB")),
    "measured_voltage": Setting(None, "MEAS:VOLT? {ch}", "V"),
    "measured_current": Setting(None, "MEAS:CURR? {ch}", "A"),
}
N6705C_RIPPLE: Table = {
    "mode": fixed("VOLT:MODE ARB,{ch}"), "type": fixed("ARB:FUNC:TYPE VOLT,{ch}"),
    "shape": fixed("ARB:FUNC:SHAP SIN,{ch}"),
    "amplitude": Setting("ARB:VOLT:SIN:AMPL {:g},{ch}", unit="V"),
    "offset": Setting("ARB:VOLT:SIN:OFFS {:g},{ch}", unit="V"),
    "frequency": Setting("ARB:VOLT:SIN:FREQ {:g},{ch}", unit="Hz"),
    "count": fixed("ARB:COUN INF,{ch}"), "source": fixed("TRIG:ARB:SOUR BUS"),
}
N6705C_DIGITIZER: Table = {
    "interval": Setting("SENS:SWE:TINT {:.6g},{ch}", "SENS:SWE:TINT? {ch}", "s"),
    "points": Setting("SENS:SWE:POIN {},{ch}"),  # limits: the instrument refuses (-222)
    "offset_points": Setting("SENS:SWE:OFFS:POIN {},{ch}"),
    "source": fixed("TRIG:ACQ:SOUR BUS,{ch}"), "initiate": fixed("INIT:ACQ {ch}"),
}


def require_quantities(instrument: str, quantities: Sequence[str], known: Sequence[str]) -> None:
    """What a supply's digitizer is asked to sample must be some of what it can."""
    unknown = set(quantities) - set(known)
    if unknown or not quantities:
        raise ConfigError(f"{instrument}: cannot digitize {sorted(unknown) or 'nothing'}",
                          hint=f"choose from {sorted(known)}")


@dataclass(frozen=True)
class SupplyAccuracy:
    """The meter's stated accuracy, +-(gain x reading + offset), for the range the bench uses:
    what a power verdict's uncertainty budget takes for this instrument."""

    current_gain: float
    current_offset_a: float
    voltage_gain: float
    voltage_offset_v: float
    source: str  # the datasheet row it comes from


@dataclass(frozen=True)
class SupplyFeatures:
    """What a supply can do beyond powering and measuring: checks adapt to these, never to a family."""

    ripple: bool  # an ARB sine on the output (the redundancy checks' stimulus)
    series_resistance: bool  # battery emulation behind an internal resistance


# N6781A, 3 A current range and 6 V voltage range (Keysight N6780 series datasheet).
N6781A_ACCURACY = SupplyAccuracy(0.0004, 100e-6, 0.0005, 2e-3, "N6781A: +-(0.04 % + 100 uA), +-(0.05 % + 2 mV)")


@runtime_checkable
class PowerAnalyzer(Protocol):
    name: str  # names it in every message: role, family, address (and model, serial once known)
    identity: InstrumentIdentity
    accuracy: SupplyAccuracy
    features: SupplyFeatures

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

    def digitizer_interval(self, interval_s: float) -> float:
        """The sample interval the digitizer really uses when asked for `interval_s`."""

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
    accuracy = N6781A_ACCURACY
    features = SupplyFeatures(ripple=True, series_resistance=True)

    def __init__(self, address: str, channel: int = 1, poll_s: float = 0.01, backend: str = "@py",
                 timeout_s: float = DEFAULT_TIMEOUT_S, resource: object = None) -> None:
        super().__init__(address, backend, timeout_s, resource)
        self.poll_s = poll_s
        self.ch = self.channel(channel)
        self._armed: tuple[int, float, int, tuple[str, ...]] | None = None
        module = self.query(f"SYST:CHAN:MOD? (@{channel})").strip('"')
        if not module:
            raise InstrumentError(f"{self.name}: no module in slot {channel}",
                                  hint="set the supply's channel option to a populated slot")
        self.identity.options[f"module@{channel}"] = module

    def channel(self, number: int, table: Table = N6705C_CHANNEL) -> Channel:
        return Channel(self, number, table, wire=f"(@{number})")

    output, set_voltage, set_current_limit = setter("output"), setter("voltage"), setter("current_limit")
    battery_emulation = setter("emulation")
    start_ripple = sequence("INIT:TRAN {ch}", "TRIG:TRAN {ch}")
    stop_ripple = sequence("ABOR:TRAN {ch}", "VOLT:MODE FIX,{ch}")

    def set_output_resistance(self, ohms: float | None) -> None:
        self.ch.apply(resistance=ohms, resistance_on=ohms is not None)

    def set_ripple(self, amplitude_v: float, frequency_hz: float, offset_v: float | None = None) -> None:
        offset = self.ch.voltage if offset_v is None else offset_v
        self.channel(self.ch.number, N6705C_RIPPLE).setup(amplitude=amplitude_v, offset=offset, frequency=frequency_hz)

    def measure_voltage(self) -> float:
        return self._scalar("measured_voltage")

    def measure_current(self) -> float:
        return self._scalar("measured_current")

    def _scalar(self, name: str) -> float:
        value = self.ch.read(name)
        if not np.isfinite(value) or abs(value) >= OVERLOAD:
            raise InvalidMeasurement(f"{self.name}: `{self.ch.query_of(name)}` reported overload ({value})",
                                     hint="raise the measurement range or check the DUT wiring")
        return value

    def digitizer_interval(self, interval_s: float) -> float:
        """The module's sample interval is a whole number of 5.12 us steps (SENS:SWE:TINT rounds)."""
        return max(1, round(interval_s / TINT_STEP_S)) * TINT_STEP_S

    def arm_digitizer(self, points: int, interval_s: float, pretrigger_points: int = 0,
                      quantities: Sequence[str] = ("current", "voltage")) -> None:
        require_quantities(self.name, quantities, tuple(QUANTITIES))
        ch = self.ch.wire
        # What is sensed is switched on before the rest is switched off: the analyzer refuses a
        # moment with neither current nor voltage sensed (-221).
        functions = sorted(QUANTITIES, key=lambda q: q not in quantities)
        digitizer = self.channel(self.ch.number, N6705C_DIGITIZER)
        self.configure("FORM REAL", "FORM:BORD NORM",
                       *(f"SENS:FUNC:{QUANTITIES[q]} {'ON' if q in quantities else 'OFF'},{ch}" for q in functions),
                       *digitizer.commands(True, interval=interval_s, points=points, offset_points=-pretrigger_points))
        # The instrument rounds the interval; 0, negative, NaN or 9.9E37 would make every time and
        # energy figure wrong, so it is refused here.
        actual = self.query_finite(f"SENS:SWE:TINT? {ch}", "the digitizer sample interval", positive=True)
        self._armed = (points, actual, pretrigger_points, tuple(quantities))

    @requires("_armed", "arm_digitizer()", ARM_HINT)
    def trigger(self) -> None:
        """Trigger the armed sweep once its pre-trigger points are in (an earlier trigger is ignored)."""
        _, interval, pretrigger, _ = self._armed  # type: ignore[misc]
        ch = self.ch.wire
        self.poll_until(f"STAT:OPER:COND? {ch}", self._waiting_for_trigger,
                        pretrigger * interval + TRIGGER_MARGIN_S, self.poll_s,
                        "digitizer ready for its trigger (STAT:OPER:COND? bit 3 WTG-meas)",
                        "the digitizer did not finish its pre-trigger points: check that INIT:ACQ was accepted, "
                        "that nothing aborted it (ABOR:ACQ, *RST, a front-panel action) and the sweep settings")
        self.configure(f"TRIG:ACQ {ch}")

    def _waiting_for_trigger(self, answer: str) -> bool:
        try:
            return bool(int(float(answer)) & WTG_MEAS)
        except ValueError:
            raise InstrumentError(f"{self.name}: STAT:OPER:COND? answered {answer[:40]!r}, not a register value",
                                  hint="the instrument may be another model") from None

    @requires("_armed", "arm_digitizer()", ARM_HINT)
    def fetch(self) -> Trace:
        points, interval, pretrigger, quantities = self._armed  # type: ignore[misc]
        arrays = {}
        for quantity in quantities:
            # The error queue is read in the same message: a refused fetch or setting shows here.
            # A real sweep takes points * interval of wall time; allow for it.
            data = self.query_block(f"FETC:ARR:{QUANTITIES[quantity]}? {self.ch.wire}", ">f4",
                                    self.timeout_s + points * interval, check=True)
            if data.size != points:
                raise InstrumentError(f"{self.name}: fetched {data.size} {quantity} points, armed {points}",
                                      hint="the sweep settings changed under the driver; re-arm")
            arrays[quantity] = data.astype(np.float32)  # native byte order for the arithmetic that follows
        t = (np.arange(points) - pretrigger) * interval
        return Trace(t, interval, pretrigger, arrays.get("current"), arrays.get("voltage"), self.name)

    def digitize(self, points: int, interval_s: float, pretrigger_points: int = 0,
                 quantities: Sequence[str] = ("current", "voltage")) -> Trace:
        self.arm_digitizer(points, interval_s, pretrigger_points, quantities)
        self.trigger()
        return self.fetch()
