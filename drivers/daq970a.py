"""Keysight DAQ970A / DAQ973A / 34970A / 34972A data acquisition system as a thermal probe:
thermocouples (and optionally a 4-wire PT100 reference) on a multiplexer module, e.g. the
DAQM901A (34901A on the 34970A), read as one scan.

    thermal = KeysightDaq970a("TCPIP::10.0.0.9::5025::SOCKET", thermocouple="K",
                              channels={"T1": 101, "T2": 102, "T3": 103}, rtd={"REF": 104})

Set-up, each command checked against the error queue: `CONF:TEMP TC,<type>,(@...)`, the internal
reference junction of the module's terminal block (`SENS:TEMP:TRAN:TC:RJUN:TYPE INT`), the
open-thermocouple check (`...:TC:CHEC ON`, so a broken junction reads 9.9E37 instead of a
floating, plausible number), `CONF:TEMP FRTD,85,(@...)` for reference RTDs (channel n+10 is
the sense pair), degrees Celsius, then `ROUT:SCAN` over every channel and readings with their
unit, relative time and channel (`FORM:READ:UNIT|TIME|CHAN ON`), which the driver checks.
`read()` is one `READ?` sweep; `stream()` programs timed sweeps (`TRIG:SOUR TIM`, `TRIG:TIM`,
`TRIG:COUN`), `INIT`, and fetches them with `FETC?`, which waits for the last one.
"""
from __future__ import annotations

import logging
import math
from typing import Any

from phonebench.core.errors import ConfigError, InstrumentError
from phonebench.drivers.thermal import SENSOR_RANGES_C, ThermalReading, ThermalStream, split_valid
from phonebench.drivers.visa import DEFAULT_TIMEOUT_S, ScpiInstrument

log = logging.getLogger(__name__)

MODELS = ("DAQ970A", "DAQ973A", "34970A", "34972A")
# Multiplexers with thermocouple inputs and a terminal-block reference junction -> channel count.
MULTIPLEXERS = {"DAQM901A": 20, "DAQM902A": 16, "DAQM908A": 40, "34901A": 20, "34902A": 16, "34908A": 40}
FOUR_WIRE = {"DAQM901A", "DAQM902A", "34901A", "34902A"}  # n pairs with n+10 (n+8 on the 16-channel ones)
SETTLE_MARGIN_S = 10.0  # FETC? of a timed scan: its length plus this


def _channel_list(channels: list[int]) -> str:
    return "(@" + ",".join(str(c) for c in channels) + ")"


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
        if rjunction.upper() not in ("INT", "EXT", "FIX"):
            raise ConfigError(f"{self.family} at {address}: rjunction {rjunction!r}", hint="INT, EXT or FIX")
        names = {"T1": 101, "T2": 102, "T3": 103} if channels is None else dict(channels)
        references = {"REF": 104} if rtd is None else dict(rtd)
        self._map = {**{str(k): int(v) for k, v in names.items()}, **{str(k): int(v) for k, v in references.items()}}
        if not names or len(set(self._map.values())) != len(self._map):
            raise ConfigError(f"{self.family} at {address}: channels {names} / rtd {references} must name "
                              "distinct channels, at least one thermocouple",
                              hint='e.g. options = { channels = { T1 = 101, T2 = 102 }, rtd = { REF = 104 } }')
        self._sensors = {**{k: tc for k in names}, **{k: "PRT" for k in references}}
        self._tc = sorted(int(v) for v in names.values())
        self._rtd = sorted(int(v) for v in references.values())
        super().__init__(address, backend, timeout_s, resource)
        try:
            self._check_model()
            self._check_modules()
            self._configure(tc, rjunction.upper(), nplc)
        except BaseException:
            self.close()
            raise
        self.channels = list(self._map)
        self._by_number = {v: k for k, v in self._map.items()}
        self._period_s = 1.0

    # --- set-up ----------------------------------------------------------------------------------
    def _check_model(self) -> None:
        if not any(m in self.identity.model for m in MODELS):
            raise InstrumentError(f"{self.name}: *IDN? says {self.identity}, not a DAQ970A/34970A family unit",
                                  hint="check the address, or pick the family for this instrument")

    def _check_modules(self) -> None:
        scan = sorted(self._map.values())
        for slot in sorted({c // 100 for c in scan}):
            answer = self.query(f"SYST:CTYP? {slot * 100}")
            parts = [p.strip() for p in answer.split(",")]
            module = parts[1] if len(parts) > 1 and parts[1] != "0" else ""  # "0": an empty slot
            self.identity.options[f"slot{slot}"] = module
            if module not in MULTIPLEXERS:  # empty slot, or an actuator / multifunction module
                raise InstrumentError(f"{self.name}: slot {slot} holds {module or 'no module'!r}, not a "
                                      f"thermocouple multiplexer (channels {[c for c in scan if c // 100 == slot]})",
                                      hint=f"fit one of {', '.join(MULTIPLEXERS)} or change the channel numbers")
            used = [c for c in scan if c // 100 == slot]
            if any(not 1 <= c % 100 <= MULTIPLEXERS[module] for c in used):
                raise InstrumentError(f"{self.name}: channels {used} do not all exist on the {module} in slot {slot}",
                                      hint=f"the {module} has channels {slot}01 to {slot}{MULTIPLEXERS[module]:02d}")
            rtds = [c for c in self._rtd if c // 100 == slot]
            if rtds and module not in FOUR_WIRE:
                raise InstrumentError(f"{self.name}: the {module} in slot {slot} cannot measure 4-wire RTDs "
                                      f"(channels {rtds})", hint="use a DAQM901A/34901A or DAQM902A/34902A")

    def _configure(self, tc: str, rjunction: str, nplc: float) -> None:
        tcs, everything = _channel_list(self._tc), _channel_list(sorted(self._map.values()))
        commands = ["*CLS", f"CONF:TEMP TC,{tc},{tcs}", f"SENS:TEMP:TRAN:TC:RJUN:TYPE {rjunction},{tcs}",
                    f"SENS:TEMP:TRAN:TC:CHEC ON,{tcs}"]
        if self._rtd:
            commands.append(f"CONF:TEMP FRTD,85,{_channel_list(self._rtd)}")
        commands += [f"UNIT:TEMP C,{everything}", f"SENS:TEMP:NPLC {nplc:g},{everything}",
                     f"ROUT:SCAN {everything}", "FORM:READ:UNIT ON", "FORM:READ:TIME ON",
                     "FORM:READ:TIME:TYPE REL", "FORM:READ:CHAN ON", "FORM:READ:ALAR OFF",
                     "TRIG:SOUR IMM", "TRIG:COUN 1"]
        self.configure(*commands)
        self._scan = sorted(self._map.values())

    # --- readings -------------------------------------------------------------------------------
    def _parse(self, answer: str, sweeps: int) -> list[ThermalReading]:
        """Readings `<value> <unit>,<time>,<channel>`, sweep after sweep, in scan-list order."""
        fields = [f.strip() for f in answer.split(",")] if answer.strip() else []
        expected = sweeps * len(self._scan)
        if len(fields) != 3 * expected:
            self.resync()
            raise InstrumentError(f"{self.name}: expected {expected} readings (value unit, time, channel), got "
                                  f"{len(fields)} fields: {answer[:80]!r}",
                                  hint="another program may have changed the scan or format settings")
        out: list[ThermalReading] = []
        for sweep in range(sweeps):
            values: dict[str, float | str] = {}
            first_time: float | None = None
            for i, number in enumerate(self._scan):
                base = 3 * (sweep * len(self._scan) + i)
                text, time_text, channel_text = fields[base:base + 3]
                value_text, _, unit = text.partition(" ")
                try:
                    value, when, channel = float(value_text), float(time_text), int(channel_text)
                except ValueError:
                    raise InstrumentError(f"{self.name}: unreadable reading {text!r},{time_text!r},{channel_text!r}",
                                          hint="check FORM:READ settings; the instrument may be another model") from None
                if channel != number:
                    raise InstrumentError(f"{self.name}: reading for channel {channel} where the scan list has "
                                          f"{number}", hint="another program changed the scan list; reopen")
                name = self._by_number[number]
                first_time = when if first_time is None else first_time
                if unit.strip() != "C":
                    values[name] = f"reading in {unit.strip() or 'no unit'}, not °C (channel {number})"
                else:
                    values[name] = value
            celsius, faults = split_valid(values, self._sensors)
            faults = {k: (f"{v}, an open thermocouple or over range" if v.startswith("overload") else v)
                      for k, v in faults.items()}
            out.append(ThermalReading(celsius, faults, None, first_time, self.name))
        return out

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
        self.configure("TRIG:SOUR TIM", f"TRIG:TIM {self._period_s:g}", f"TRIG:COUN {count}")
        previous = self.timeout_s
        try:
            self.write("INIT")
            self.timeout_s = previous + count * self._period_s + SETTLE_MARGIN_S
            samples = self._parse(self.query("FETC?"), count)
        finally:
            self.timeout_s = previous
            self.configure("TRIG:SOUR IMM", "TRIG:COUN 1")
        return ThermalStream(samples, 0, 0, self._period_s)

    def stop_stream(self) -> None:
        """Nothing runs between stream() calls: each fetches its whole scan."""
