"""Keysight DAQ970A / DAQ973A / 34970A / 34972A data acquisition system as a thermal probe:
thermocouples (and optionally a 4-wire PT100 reference) on a multiplexer module, e.g. the
DAQM901A (34901A on the 34970A), read as one scan.

    thermal = KeysightDaq970a("TCPIP::10.0.0.9::5025::SOCKET", thermocouple="K",
                              channels={"T1": 101, "T2": 102, "T3": 103}, rtd={"REF": 104})

The set-up is a table (SETUP), each command checked against the error queue. The open-thermocouple
check makes a broken junction read 9.9E37 instead of a floating, plausible number; readings come
with their unit, relative time and channel, which the driver checks. `read()` is one `READ?`
sweep; `stream()` programs timed sweeps and fetches them with `FETC?`, which waits for the last.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

from phonebench.core.errors import ConfigError, InstrumentError
from .scpi_table import Bound, Setting, Table, fixed
from .thermal import SENSOR_RANGES_C, ThermalReading, ThermalStream, split_valid
from .visa import DEFAULT_TIMEOUT_S, ScpiInstrument

log = logging.getLogger(__name__)

MODELS = ("DAQ970A", "DAQ973A", "34970A", "34972A")
# Multiplexers with thermocouple inputs and a terminal-block reference junction -> (channels, whether
# they measure 4-wire: channel n pairs with n+10, n+8 on the 16-channel ones).
MULTIPLEXERS = {"DAQM901A": (20, True), "DAQM902A": (16, True), "DAQM908A": (40, False),
                "34901A": (20, True), "34902A": (16, True), "34908A": (40, False)}
SETTLE_MARGIN_S = 10.0  # FETC? of a timed scan: its length plus this
# `{tc}`: the thermocouple channel list, `{all}`: the scan list, e.g. "(@101,102)".
SETUP: Table = {
    "clear": fixed("*CLS"), "thermocouple": Setting("CONF:TEMP TC,{},{tc}"),
    "rjunction": Setting("SENS:TEMP:TRAN:TC:RJUN:TYPE {},{tc}", choices=("INT", "EXT", "FIX")),
    "open_check": fixed("SENS:TEMP:TRAN:TC:CHEC ON,{tc}"),
    "rtd": Setting("CONF:TEMP FRTD,85,{}"),  # the 4-wire PT100 channels; channel n+10 is the sense pair
    "unit": fixed("UNIT:TEMP C,{all}"), "nplc": Setting("SENS:TEMP:NPLC {:g},{all}", unit="PLC", limits=(0.02, 200)),
    "scan": fixed("ROUT:SCAN {all}"), "with_unit": fixed("FORM:READ:UNIT ON"), "with_time": fixed("FORM:READ:TIME ON"),
    "relative_time": fixed("FORM:READ:TIME:TYPE REL"), "with_channel": fixed("FORM:READ:CHAN ON"),
    "no_alarm": fixed("FORM:READ:ALAR OFF")}
TRIGGER: Table = {"source": Setting("TRIG:SOUR {}", choices=("IMM", "TIM")),
                  "timer": Setting("TRIG:TIM {:g}", unit="s"), "count": Setting("TRIG:COUN {}")}


@dataclass(frozen=True)
class DaqChannel:
    name: str
    number: int  # slot * 100 + input
    sensor: str  # thermocouple type, or "PRT" for a reference RTD


def _number(channel: DaqChannel) -> int:
    return channel.number


def _channel_list(channels: list[DaqChannel]) -> str:
    return "(@" + ",".join(str(c.number) for c in channels) + ")"


def parse_readings(answer: str, scan: list[DaqChannel], sweeps: int, name: str) -> list[ThermalReading]:
    """Readings `<value> <unit>,<time>,<channel>`, sweep after sweep, in scan-list order."""
    fields = [f.strip() for f in answer.split(",")] if answer.strip() else []
    if len(fields) != 3 * sweeps * len(scan):
        raise InstrumentError(f"{name}: expected {sweeps * len(scan)} readings (value unit, time, channel), got "
                              f"{len(fields)} fields: {answer[:80]!r}",
                              hint="another program may have changed the scan or format settings")
    out: list[ThermalReading] = []
    for sweep in range(sweeps):
        values: dict[str, float | str] = {}
        times: list[float] = []
        for channel, (text, time_text, number_text) in zip(scan, zip(*[iter(fields[3 * sweep * len(scan):])] * 3)):
            value_text, _, unit = text.partition(" ")
            try:
                value, number = float(value_text), int(number_text)
                times.append(float(time_text))
            except ValueError:
                raise InstrumentError(f"{name}: unreadable reading {text!r},{time_text!r},{number_text!r}",
                                      hint="check FORM:READ settings; the instrument may be another model") from None
            if number != channel.number:
                raise InstrumentError(f"{name}: reading for channel {number} where the scan list has "
                                      f"{channel.number}", hint="another program changed the scan list; reopen")
            values[channel.name] = value if unit.strip() == "C" else \
                f"reading in {unit.strip() or 'no unit'}, not °C (channel {number})"
        celsius, faults = split_valid(values, {c.name: c.sensor for c in scan})
        faults = {k: (f"{v}, an open thermocouple or over range" if v.startswith("overload") else v)
                  for k, v in faults.items()}
        out.append(ThermalReading(celsius, faults, None, times[0], name))
    return out


class KeysightDaq970a(ScpiInstrument):
    role = "thermal"
    family = "keysight-daq970a"

    def __init__(self, address: str, thermocouple: str = "K",
                 channels: dict[str, int] | None = None, rtd: dict[str, int] | None = None,
                 rjunction: str = "INT", nplc: float = 1.0, backend: str = "@py",
                 timeout_s: float = DEFAULT_TIMEOUT_S, resource: Any = None) -> None:
        tc = thermocouple.upper()
        if tc not in SENSOR_RANGES_C or tc in ("PRT", "THERMISTOR"):
            raise ConfigError(f"{self.family} at {address}: thermocouple type {thermocouple!r}",
                              hint="types: B, E, J, K, N, R, S, T")
        names = {"T1": 101, "T2": 102, "T3": 103} if channels is None else channels
        references = {"REF": 104} if rtd is None else rtd
        self.channels = [str(k) for k in {**names, **references}]
        self.thermocouples = sorted((DaqChannel(str(k), int(v), tc) for k, v in names.items()), key=_number)
        self.references = sorted((DaqChannel(str(k), int(v), "PRT") for k, v in references.items()), key=_number)
        self.scan = sorted(self.thermocouples + self.references, key=_number)
        if not names or len(self.scan) != len({c.number for c in self.scan}) or len(self.scan) != len(self.channels):
            raise ConfigError(f"{self.family} at {address}: channels {names} / rtd {references} must name "
                              "distinct channels, at least one thermocouple",
                              hint='e.g. options = { channels = { T1 = 101, T2 = 102 }, rtd = { REF = 104 } }')
        super().__init__(address, backend, timeout_s, resource)
        try:
            if not any(m in self.identity.model for m in MODELS):
                raise InstrumentError(f"{self.name}: *IDN? says {self.identity}, not a DAQ970A/34970A family unit",
                                      hint="check the address, or pick the family for this instrument")
            for slot in sorted({c.number // 100 for c in self.scan}):
                self._check_module(slot)
            setup = Bound(self, SETUP, tc=_channel_list(self.thermocouples), all=_channel_list(self.scan))
            self.configure(*setup.commands(True, thermocouple=tc, rjunction=rjunction.upper(), nplc=nplc,
                                           rtd=_channel_list(self.references) if self.references else None),
                           *self.trigger.commands(False, source="IMM", count=1))
        except BaseException:
            self.close()
            raise
        self._period_s = 1.0

    @property
    def trigger(self) -> Bound:
        return Bound(self, TRIGGER)

    def _check_module(self, slot: int) -> None:
        parts = [p.strip() for p in self.query(f"SYST:CTYP? {slot * 100}").split(",")]
        module = parts[1] if len(parts) > 1 and parts[1] != "0" else ""  # "0": an empty slot
        self.identity.options[f"slot{slot}"] = module
        used = [c.number for c in self.scan if c.number // 100 == slot]
        if module not in MULTIPLEXERS:  # empty slot, or an actuator / multifunction module
            raise InstrumentError(f"{self.name}: slot {slot} holds {module or 'no module'!r}, not a "
                                  f"thermocouple multiplexer (channels {used})",
                                  hint=f"fit one of {', '.join(MULTIPLEXERS)} or change the channel numbers")
        count, four_wire = MULTIPLEXERS[module]
        if any(not 1 <= c % 100 <= count for c in used):
            raise InstrumentError(f"{self.name}: channels {used} do not all exist on the {module} in slot {slot}",
                                  hint=f"the {module} has channels {slot}01 to {slot}{count:02d}")
        rtds = [c.number for c in self.references if c.number // 100 == slot]
        if rtds and not four_wire:
            raise InstrumentError(f"{self.name}: the {module} in slot {slot} cannot measure 4-wire RTDs "
                                  f"(channels {rtds})", hint="use a DAQM901A/34901A or DAQM902A/34902A")

    def _parse(self, answer: str, sweeps: int) -> list[ThermalReading]:
        try:
            return parse_readings(answer, self.scan, sweeps, self.name)
        except InstrumentError:
            self.resync()
            raise

    def read(self) -> ThermalReading:
        return self._parse(self.query("READ?"), 1)[0]

    def start_stream(self, period_s: float = 1.0) -> None:
        if period_s <= 0:
            raise ConfigError(f"{self.name}: stream period {period_s:g} s", hint="give a positive period")
        self._period_s = period_s

    def stream(self, n: int | None = None, duration_s: float | None = None) -> ThermalStream:
        """Timed sweeps, one per period, fetched when the last is done."""
        if n is None and duration_s is None:
            raise ConfigError("stream() needs n or duration_s", hint="e.g. stream(n=60)")
        count = n if n is not None else int(math.ceil((duration_s or 0.0) / self._period_s)) + 1
        self.trigger.apply(source="TIM", timer=self._period_s, count=count)
        previous = self.timeout_s
        try:
            self.write("INIT")
            self.timeout_s = previous + count * self._period_s + SETTLE_MARGIN_S
            samples = self._parse(self.query("FETC?"), count)
        finally:
            self.timeout_s = previous
            self.trigger.apply(source="IMM", count=1)
        return ThermalStream(samples, 0, 0, self._period_s)

    def stop_stream(self) -> None:
        """Nothing runs between stream() calls: each fetches its whole scan."""
