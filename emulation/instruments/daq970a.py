"""Emulated Keysight DAQ970A data acquisition system with a DAQM901A 20-channel multiplexer in
slot 1, thermocouples and a 4-wire PT100 wired to the phone fixture. A raw SCPI socket (port
5025 on the real unit), reached through pyvisa like the real one.

What it implements, after the DAQ970A / 34970A programming references:

- `CONFigure:TEMPerature TC,<type>,(@list)` (types B E J K N R S T, DEFault = J), `... FRTD|RTD,85|91,
  (@list)`, `... THERmistor|FTHermistor,2252|5000|10000,(@list)` (optional resolution parameters
  `1,<res>` are accepted); `CONFigure:VOLTage:DC [range[,res]],(@list)`; CONFigure also makes the
  list the scan list. A 4-wire channel n (1-10) takes channel n+10 for its sense pair.
  `MEASure:TEMPerature? ...` and `MEASure:VOLTage:DC? ...` take the same parameters and are
  CONFigure + READ? in one. `CONFigure? (@list)` answers each channel's function.
- `[SENSe:]TEMPerature:TRANsducer:TCouple:TYPE <type>,(@list)` (and `?`),
  `[SENSe:]TEMPerature:TRANsducer:TCouple:RJUNction:TYPE INTernal|EXTernal|FIXed,(@list)`,
  `...:TCouple:CHECk ON|OFF,(@list)` (open-thermocouple check), `[SENSe:]TEMPerature:NPLC`,
  `UNIT:TEMPerature C|F|K[,(@list)]`.
- `ROUTe:SCAN (@list)` / `ROUTe:SCAN?`, `TRIGger:SOURce IMMediate|TIMer|BUS`, `TRIGger:TIMer`,
  `TRIGger:COUNt`, `INITiate`, `FETCh?` (waits for the scan to complete), `READ?` (= INIT; FETC?),
  `ABORt`, `FORMat:READing:CHANnel|UNIT|TIME|ALARm ON|OFF`, `FORMat:READing:TIME:TYPE ABSolute|RELative`,
  `SYSTem:CTYPe? <slot*100>`.
- Readings `+2.53070000E+01[ C][,<time>][,<channel>]` separated by commas; an overload or an open
  thermocouple (with CHECk ON) is `+9.90000000E+37`. An open thermocouple with the check off
  reads a plausible, wrong value (the unterminated input floats), as on the real instrument.
- Time: each channel of a sweep costs its integration time (NPLC x 20 ms at 50 Hz, twice with
  autozero) plus relay settling, on the simulated clock; timed sweeps wait for their trigger.

Everything else is refused with the standard error queue entry (`-113,"Undefined header"`,
`-221,"Settings conflict"`, ...). Not emulated (refused, although the real unit has them): endless
scans (`TRIG:COUN INF`), reading memory access (`R?`, `DATA:REMove?`), alarms, the internal DMM
without a channel list.
"""
from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass

from .scpi import (
    DATA_STALE,
    HARDWARE_MISSING,
    ILLEGAL_VALUE,
    OUT_OF_RANGE,
    PARAMETER_NOT_ALLOWED,
    SETTINGS_CONFLICT,
    Call,
    ScpiError,
    ieee_block,
    short_form,
)
from .server import InstrumentServer, numeric, on_off
from ..world import World

log = logging.getLogger(__name__)

IDN = "Keysight Technologies,DAQ970A,MY58012345,A.03.02-02.40-03.02-00.52-03-02"
MODULES = {1: "DAQM901A"}  # slot -> module; the other slots are empty
MODULE_CHANNELS = {"DAQM901A": 20}  # voltage/temperature channels (121, 122 are current only)
TC_TYPES = ("B", "E", "J", "K", "N", "R", "S", "T")
DEFAULT_TC = "J"  # what DEFault selects (the manual's default thermocouple type)
RTD_ALPHAS = ("85", "91")
THERMISTORS = ("2252", "5000", "10000")
OVERLOAD = 9.9e37
LINE_HZ = 50.0
RELAY_SETTLE_S = 0.002
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)  # the simulated clock counts from here


@dataclass(frozen=True)
class Wiring:
    """What is connected to a channel: a point of the world's thermal model and the sensor's error."""

    point: str
    sensor: str  # "TC:K", "FRTD" (4-wire PT100)
    offset_c: float
    noise_c: float


WIRING = {
    101: Wiring("cover_a", "TC:K", 0.35, 0.05),  # back cover over the SoC
    102: Wiring("cover_b", "TC:K", -0.25, 0.05),  # back cover over the battery
    103: Wiring("ambient", "TC:K", 0.15, 0.05),
    104: Wiring("reference", "FRTD", 0.0, 0.004),  # the reference PT100, taped where the fixture says
    105: Wiring("shield", "TC:K", 0.20, 0.05),  # the SoC's shield under the back cover
}


@dataclass
class ChannelSetup:
    function: str = "VOLT"  # VOLT (power-on default), TC, FRTD, RTD, THER, FTH
    kind: str = ""  # thermocouple type, RTD alpha or thermistor value
    rjunction: str = "INT"
    check: bool = False
    nplc: float = 1.0
    unit: str = "C"
    fixed_ref_c: float = 0.0  # the FIXed reference junction temperature


class Daq970aServer(InstrumentServer):
    family = "keysight-daq970a"
    idn = IDN
    SAVED_STATE = ("setup", "scan", "format", "time_type", "trigger_source", "trigger_timer_s", "trigger_count")
    SAVE_SLOTS = range(6)  # 0 is the power-down state
    options = ",".join(MODULES.get(slot, "0") for slot in (1, 2, 3))  # *OPT?: the module in each slot
    FAULTS = InstrumentServer.FAULTS

    def __init__(self, world: World, port: int = 0, wiring: dict[int, Wiring] | None = None) -> None:
        super().__init__(port)
        self.world = world
        self.wiring = dict(wiring or WIRING)
        self.rng = world.rng("daq970a")
        self.shield_rng = world.rng("daq970a:shield")  # its own stream: the other channels read as before it
        self.open_channels: set[int] = set()  # broken thermocouples
        self.reset()
        self._register()

    # --- state -----------------------------------------------------------------------------------
    def reset(self) -> None:
        self.setup: dict[int, ChannelSetup] = {}
        self.scan: list[int] = []
        self.format = {"CHAN": False, "UNIT": False, "TIME": False, "ALAR": False}
        self.time_type = "ABS"
        self.trigger_source = "IMM"
        self.trigger_timer_s = 1.0
        self.trigger_count = 1
        self.memory: list[tuple[float, str, float, int]] = []  # (value, unit, time, channel)
        self._sweeps_due: list[float] = []  # simulated times of the sweeps still to run
        self._scan_start = 0.0

    def set_probe_fault(self, channel: int, fault: str | None) -> None:
        """"open": the thermocouple on `channel` breaks; None repairs it."""
        if channel not in self.wiring:
            raise ValueError(f"no sensor wired to channel {channel}; wired: {sorted(self.wiring)}")
        if fault not in (None, "open"):
            raise ValueError(f"unknown probe fault {fault!r}; known: open")
        (self.open_channels.add if fault else self.open_channels.discard)(channel)

    def _channel(self, channel: int) -> ChannelSetup:
        slot, number = divmod(channel, 100)
        module = MODULES.get(slot)
        if module is None:
            raise ScpiError(HARDWARE_MISSING, f"no module in slot {slot} (channel {channel})")
        if not 1 <= number <= MODULE_CHANNELS[module]:
            raise ScpiError(ILLEGAL_VALUE, f"channel {channel} is not a {module} measurement channel")
        return self.setup.setdefault(channel, ChannelSetup())

    def _channels(self, call: Call, index: int) -> list[int]:
        channels = call.channels(index)
        for channel in channels:
            self._channel(channel)
        return channels

    def _paired_conflicts(self, channels: list[int]) -> None:
        four_wire = {c for c, s in self.setup.items() if s.function in ("FRTD", "FTH")}
        for channel in channels:
            if channel in {c + 10 for c in four_wire}:
                raise ScpiError(SETTINGS_CONFLICT, f"channel {channel} is the sense pair of 4-wire channel "
                                                   f"{channel - 10}")

    # --- measuring -------------------------------------------------------------------------------
    def _channel_time(self, setup: ChannelSetup) -> float:
        return 2 * setup.nplc / LINE_HZ + RELAY_SETTLE_S  # autozero doubles the integration

    def _measure(self, channel: int) -> tuple[float, str]:
        setup = self.setup.get(channel, ChannelSetup())
        wiring = self.wiring.get(channel)
        if setup.function == "VOLT":
            emf = 0.0 if wiring is None else 40e-6 * (self.world.surface_temperatures()[wiring.point] - 25.0)
            return emf + self.rng.normal(0, 1e-6), "VDC"
        compatible = wiring is not None and (
            (setup.function == "TC" and wiring.sensor.startswith("TC:"))
            or (setup.function in ("FRTD", "RTD") and wiring.sensor == "FRTD"))
        if not compatible:
            return OVERLOAD, setup.unit  # nothing (or another sensor kind) on the input: over range
        assert wiring is not None
        if setup.function == "TC" and setup.rjunction == "EXT":
            return OVERLOAD, setup.unit  # no external reference measured yet (power-on register value)
        if setup.function == "TC" and channel in self.open_channels:
            if setup.check:
                return OVERLOAD, setup.unit
            celsius = self.world.ambient_c + 3.0 + self.rng.normal(0, 1.5)  # a floating input
        else:
            rng = self.shield_rng if wiring.point == "shield" else self.rng
            celsius = (self.world.surface_temperatures()[wiring.point] + wiring.offset_c
                       + rng.normal(0.0, wiring.noise_c))
            if setup.function == "TC" and setup.rjunction == "FIX":
                # The fixed reference (0 °C unless set) stands in for the terminals' real temperature.
                celsius += setup.fixed_ref_c - self.world.ambient_c
        return {"C": celsius, "F": celsius * 9 / 5 + 32, "K": celsius + 273.15}[setup.unit], setup.unit

    def _sweep(self, t_start: float) -> None:
        for channel in self.scan:
            self.world.wait(self._channel_time(self.setup.get(channel, ChannelSetup())))
            value, unit = self._measure(channel)
            self.memory.append((value, unit, self.world.clock.now() - self._scan_start, channel))

    def _initiate(self) -> None:
        if not self.scan:
            raise ScpiError(SETTINGS_CONFLICT, "the scan list is empty (ROUTe:SCAN)")
        if self.trigger_source == "IMM":
            period = 0.0
        elif self.trigger_source == "TIM":
            period = self.trigger_timer_s
        else:
            raise ScpiError(SETTINGS_CONFLICT, f"trigger source {self.trigger_source} never fires here")
        self.memory.clear()
        self._scan_start = now = self.world.clock.now()
        self._sweeps_due = [now + i * period for i in range(self.trigger_count)]

    def _catch_up(self) -> None:
        """Run the sweeps whose time has come (reading memory fills as the scan goes)."""
        while self._sweeps_due and self._sweeps_due[0] <= self.world.clock.now():
            self._sweep(self._sweeps_due.pop(0))

    def _take(self, count: int | None, remove: bool) -> list[tuple[float, str, float, int]]:
        self._catch_up()
        count = len(self.memory) if count is None else count
        if count > len(self.memory):
            raise ScpiError(OUT_OF_RANGE, f"{count} readings asked, {len(self.memory)} in memory")
        taken = self.memory[:count]
        if remove:
            del self.memory[:count]
        return taken

    def _complete(self) -> None:
        """Run the sweeps still due (the instrument's FETCh? waits for them)."""
        while self._sweeps_due:
            due = self._sweeps_due.pop(0)
            self.world.wait_until(due)
            self._sweep(due)

    def _format(self, value: float, unit: str, t: float, channel: int) -> str:
        text = f"{value:+.8E}" + (f" {unit}" if self.format["UNIT"] else "")
        if self.format["TIME"]:
            if self.time_type == "REL":
                text += f",{t:+014.3f}"
            else:
                when = EPOCH + dt.timedelta(seconds=self._scan_start + t)
                text += f",{when:%Y,%m,%d,%H,%M},{when.second + when.microsecond / 1e6:06.3f}"
        if self.format["CHAN"]:
            text += f",{channel}"
        if self.format["ALAR"]:
            text += ",0"
        return text

    def _fetch(self, call: Call) -> str:
        if not self.memory and not self._sweeps_due:
            raise ScpiError(DATA_STALE, "no readings: INITiate first")
        self._complete()
        return ",".join(self._format(*reading) for reading in self.memory)

    def _read(self, call: Call) -> str:
        self._initiate()
        return self._fetch(call)

    # --- commands ---------------------------------------------------------------------------------
    def _register(self) -> None:
        t = self.tree

        def configure(call: Call) -> None:
            probe = call.choice(0, "TCouple", "RTD", "FRTD", "THERmistor", "FTHermistor")
            last = len(call.args) - 1  # the channel list; between: type, then `1,<resolution>`
            kind = call.arg(1).strip().upper() if last >= 2 else "DEF"
            defaults = {"TCOUPLE": DEFAULT_TC, "RTD": "85", "FRTD": "85", "THERMISTOR": "5000", "FTHERMISTOR": "5000"}
            if kind in ("DEF", "DEFAULT"):
                kind = defaults[probe]
            options = {"TCOUPLE": TC_TYPES, "RTD": RTD_ALPHAS, "FRTD": RTD_ALPHAS,
                       "THERMISTOR": THERMISTORS, "FTHERMISTOR": THERMISTORS}[probe]
            if kind not in options:
                raise ScpiError(ILLEGAL_VALUE, f"{probe} type {kind!r}; known: {', '.join(options)}")
            if last >= 3:
                call.number(2, 1, 1, 1)  # the range parameter: always 1 for temperature
            if last >= 4:
                call.keyword_number(3, 1e-6, 1.0, 1e-3)  # resolution (the NPLC it implies is not modelled)
            if last > 4:
                call.arg(5)
                raise ScpiError(PARAMETER_NOT_ALLOWED, "CONFigure:TEMPerature takes at most 4 values and a list")
            channels = self._channels(call, last)
            function = {"TCOUPLE": "TC", "RTD": "RTD", "FRTD": "FRTD", "THERMISTOR": "THER",
                        "FTHERMISTOR": "FTH"}[probe]
            if function in ("FRTD", "FTH") and any(c % 100 > 10 for c in channels):
                raise ScpiError(SETTINGS_CONFLICT, "4-wire measurements use channels 1-10 (n+10 is the sense pair)")
            self._paired_conflicts(channels)
            for channel in channels:
                self.setup[channel] = ChannelSetup(function, kind)
            self.scan = channels

        def configure_volts(call: Call) -> None:
            last = len(call.args) - 1
            for index in range(last):  # range, resolution: AUTO/MIN/MAX/DEF or numbers
                text = call.arg(index).strip().upper()
                if text not in ("AUTO", "MIN", "MINIMUM", "MAX", "MAXIMUM", "DEF", "DEFAULT"):
                    call.number(index, 0.0, 300.0)
            channels = self._channels(call, last)
            self._paired_conflicts(channels)
            for channel in channels:
                self.setup[channel] = ChannelSetup("VOLT", "")
            self.scan = channels

        def measure(configure_fn: Callable[[Call], None]) -> Callable[[Call], str]:
            def handler(call: Call) -> str:
                configure_fn(call)
                return self._read(call)
            return handler

        def configure_query(call: Call) -> str:
            answers = []
            for channel in self._channels(call, 0):
                setup = self._channel(channel)
                if setup.function == "VOLT":
                    answers.append('"VOLT +1.000000E+01,+3.000000E-06"')
                else:
                    name = {"TC": "TC", "FRTD": "FRTD", "RTD": "RTD", "THER": "THER", "FTH": "FTH"}[setup.function]
                    answers.append(f'"TEMP {name},{setup.kind},+1.000000E+00,+1.000000E-01"')
            return ",".join(answers)

        def tc_type(call: Call) -> None:
            kind = call.arg(0).strip().upper()
            kind = DEFAULT_TC if kind in ("DEF", "DEFAULT") else kind
            if kind not in TC_TYPES:
                raise ScpiError(ILLEGAL_VALUE, f"thermocouple type {kind!r}; known: {', '.join(TC_TYPES)}")
            channels = self._channels(call, 1) if call.has(1) else list(self.scan)
            for channel in channels:
                setup = self._channel(channel)
                if setup.function != "TC":
                    raise ScpiError(SETTINGS_CONFLICT, f"channel {channel} is not configured for thermocouples")
                setup.kind = kind

        def per_channel_query(read: Callable[[ChannelSetup], str]) -> Callable[[Call], str]:
            def handler(call: Call) -> str:
                return ",".join(read(self._channel(channel)) for channel in self._channels(call, 0))
            return handler

        def per_channel(attribute: str, parse: Callable[[Call], object]) -> Callable[[Call], None]:
            def handler(call: Call) -> None:
                value = parse(call)
                channels = self._channels(call, 1) if call.has(1) else list(self.scan)
                for channel in channels:
                    setattr(self._channel(channel), attribute, value)
            return handler

        def route_scan(call: Call) -> None:
            channels = self._channels(call, 0)
            self._paired_conflicts(channels)
            self.scan = channels
            self._sweeps_due.clear()
            self.memory.clear()

        def fmt(name: str) -> Callable[[Call], None]:
            def handler(call: Call) -> None:
                self.format[name] = call.boolean(0)
            return handler

        def time_type(call: Call) -> None:
            self.time_type = call.choice(0, "ABSolute", "RELative")[:3]

        def trig_source(call: Call) -> None:
            self.trigger_source = call.choice(0, "IMMediate", "TIMer", "BUS", "EXTernal", "ALARm1")[:3]

        def trig_count(call: Call) -> None:
            text = call.arg(0).strip().upper()
            if text in ("INF", "INFINITY"):  # valid on the real unit; endless scans are not emulated
                raise ScpiError(ILLEGAL_VALUE, "endless scans (TRIG:COUN INF) are not modelled")
            self.trigger_count = int(call.number(0, 1, 500_000))

        def ctype(call: Call) -> str:
            slot = int(call.number(0, 100, 300)) // 100
            module = MODULES.get(slot)
            return f"Keysight Technologies,{module},0,1.0" if module else "Keysight Technologies,0,0,0"

        def abort(call: Call) -> None:
            self._sweeps_due.clear()

        def scan_query(call: Call) -> bytes:
            return ieee_block(("(@" + ",".join(map(str, self.scan)) + ")").encode())

        def transducer(call: Call) -> None:
            function = {"TCOUPLE": "TC", "RTD": "RTD", "FRTD": "FRTD", "THERMISTOR": "THER", "FTHERMISTOR": "FTH"}[
                call.choice(0, "TCouple", "RTD", "FRTD", "THERmistor", "FTHermistor")]
            kind = {"TC": DEFAULT_TC, "RTD": "85", "FRTD": "85", "THER": "5000", "FTH": "5000"}[function]
            for channel in self._channels(call, 1) if call.has(1) else list(self.scan):
                self.setup[channel] = ChannelSetup(function, kind)

        def readings(count_index: int | None, remove: bool, block: bool) -> Callable[[Call], str | bytes]:
            def handler(call: Call) -> str | bytes:
                count = int(call.number(count_index, 1, 1_000_000)) if count_index is not None and call.has(
                    count_index) else None
                if not remove and count is None:
                    count = 1
                taken = self._take(count, remove) if remove else self._take(None, False)[-(count or 1):]
                if not taken and not block:
                    raise ScpiError(DATA_STALE, "no readings in memory")
                text = ",".join(self._format(*reading) for reading in taken)
                return ieee_block(text.encode()) if block else text
            return handler

        t.add("[SENSe]:TEMPerature:APERture", per_channel("nplc", lambda c: c.number(0, 0.0004, 1.0) * LINE_HZ))
        t.add("[SENSe]:TEMPerature:APERture?", per_channel_query(lambda s: f"{s.nplc / LINE_HZ:+.8E}"))
        t.add("[SENSe]:TEMPerature:TRANsducer:TYPE", transducer)
        t.add("[SENSe]:TEMPerature:TRANsducer:TYPE?", per_channel_query(lambda s: {"VOLT": "NONE"}.get(
            s.function, {"THER": "THER", "FTH": "FTH"}.get(s.function, s.function))))
        t.add("[SENSe]:TEMPerature:TRANsducer:TCouple:RJUNction",
              per_channel("fixed_ref_c", lambda c: c.number(0, -20.0, 80.0, 0.0)))
        t.add("[SENSe]:TEMPerature:TRANsducer:TCouple:RJUNction?", per_channel_query(lambda s: f"{s.fixed_ref_c:+.8E}"))
        t.add("ROUTe:SCAN:SIZE?", lambda c: f"+{len(self.scan)}")
        self.add_setting("ROUTe:CHANnel:DELay", 0.0, numeric(0.0, 60.0), channels=self._channels)
        self.add_setting("ROUTe:CHANnel:DELay:AUTO", True, on_off(), channels=self._channels)
        self.add_setting("*PSC", True, on_off(), reset=False)
        for name, node in (("CHAN", "CHANnel"), ("UNIT", "UNIT"), ("TIME", "TIME"), ("ALAR", "ALARm")):
            t.add(f"FORMat:READing:{node}?", lambda c, name=name: str(int(self.format[name])))
        t.add("R?", readings(0, remove=True, block=True))
        t.add("DATA:REMove?", readings(0, remove=True, block=False))
        t.add("DATA:LAST?", readings(0, remove=False, block=False))
        t.add("DATA:POINts?", lambda c: f"+{len(self._take(None, remove=False))}")
        t.add("CONFigure:TEMPerature", configure)
        t.add("CONFigure:VOLTage[:DC]", configure_volts)
        t.add("CONFigure?", configure_query)
        t.add("MEASure:TEMPerature?", measure(configure))
        t.add("MEASure:VOLTage[:DC]?", measure(configure_volts))
        t.add("[SENSe]:TEMPerature:TRANsducer:TCouple[:TYPE]", tc_type)
        t.add("[SENSe]:TEMPerature:TRANsducer:TCouple[:TYPE]?", per_channel_query(lambda s: s.kind))
        t.add("[SENSe]:TEMPerature:TRANsducer:TCouple:CHECk?", per_channel_query(lambda s: str(int(s.check))))
        t.add("[SENSe]:TEMPerature:TRANsducer:TCouple:RJUNction:TYPE?", per_channel_query(lambda s: s.rjunction))
        t.add("[SENSe]:TEMPerature:NPLC?", per_channel_query(lambda s: f"{s.nplc:+.8E}"))
        t.add("UNIT:TEMPerature?", per_channel_query(lambda s: s.unit))
        t.add("FORMat:READing:TIME:TYPE?", lambda c: short_form({"ABS": "ABSolute", "REL": "RELative"}[self.time_type]))
        t.add("TRIGger:SOURce?", lambda c: self.trigger_source)
        t.add("TRIGger:TIMer?", lambda c: f"{self.trigger_timer_s:+.8E}")
        t.add("TRIGger:COUNt?", lambda c: f"{self.trigger_count:+.8E}")
        t.add("[SENSe]:TEMPerature:TRANsducer:TCouple:RJUNction:TYPE",
              per_channel("rjunction", lambda c: c.choice(0, "INTernal", "EXTernal", "FIXed")[:3]))
        t.add("[SENSe]:TEMPerature:TRANsducer:TCouple:CHECk", per_channel("check", lambda c: c.boolean(0)))
        t.add("[SENSe]:TEMPerature:NPLC", per_channel("nplc", lambda c: c.number(0, 0.02, 200)))
        t.add("UNIT:TEMPerature", per_channel("unit", lambda c: c.choice(0, "C", "F", "K")))
        t.add("ROUTe:SCAN", route_scan)
        t.add("ROUTe:SCAN?", scan_query)
        for name in self.format:
            t.add(f"FORMat:READing:{ {'CHAN': 'CHANnel', 'UNIT': 'UNIT', 'TIME': 'TIME', 'ALAR': 'ALARm'}[name] }",
                  fmt(name))
        t.add("FORMat:READing:TIME:TYPE", time_type)
        t.add("TRIGger:SOURce", trig_source)
        t.add("TRIGger:TIMer", lambda c: setattr(self, "trigger_timer_s", c.number(0, 0.0, 359_999.0)))
        t.add("TRIGger:COUNt", trig_count)
        t.add("INITiate[:IMMediate]", lambda c: self._initiate())
        t.add("FETCh?", self._fetch)
        t.add("READ?", self._read)
        t.add("ABORt", abort)
        t.add("SYSTem:CTYPe?", ctype)
