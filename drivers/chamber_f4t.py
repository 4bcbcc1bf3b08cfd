"""Watlow F4T chamber controller over Modbus/TCP (pymodbus): TestEquity and many other chambers.

Address: "HOST" or "HOST:PORT" (Modbus/TCP, port 502 by default). Options: `unit` (the Modbus
unit id, 1), `timeout_s` (each request, 3 s), `word_order` ("low": the F4T's default, the low word
of a 32-bit value in the first register; "high" if the controller's Modbus Word Order was changed),
`door_alarm` (the alarm block the chamber's door switch feeds, 2; 0: no door switch), `limit`
(the over-temperature limit block, 1; 0: none on Modbus).

The controller must be in Data Map 1 (the F4T's own map; Data Map 2 is the old F4's
compatibility map, which has none of these registers). Register numbers and their sources are in
docs/chamber.md; this driver reads them from control loop 1 only (a chamber's air loop).
Temperatures are in °C here whatever the controller's Display Units: the driver converts.
"""
from __future__ import annotations

import logging
import struct
import time
from typing import Any

from pymodbus.client import ModbusTcpClient
from pymodbus.exceptions import ModbusException

from phonebench.core.errors import ConfigError, InstrumentError
from .chamber import ChamberAlarm, ChamberState, Pause, Stabilised
from .clock import StationClock
from .visa import InstrumentIdentity

log = logging.getLogger(__name__)

DEFAULT_PORT = 502
DEFAULT_TIMEOUT_S = 3.0

# Registers (PDU addresses, Data Map 1): docs/chamber.md gives each one's source.
HARDWARE_ID, SW_RELEASE, SERIAL, PART_NUMBER, PART_NUMBER_LEN = 0, 4, 12, 16, 15
DISPLAY_UNITS = 1328
LOOP_MODE, MIN_SP, MAX_SP, SET_POINT = 2730, 2774, 2776, 2782
RAMP_ACTION, RAMP_SCALE, RAMP_RATE = 2794, 2796, 2798
WORKING_SP, CURRENT_MODE, PROCESS_VALUE = 2810, 2814, 2820
ALARM_STATE, ALARM_STEP = 1356, 100
LIMIT_STATE, LIMIT_STATUS, LIMIT_ERROR, LIMIT_STEP = 11250, 11264, 11288, 60

# Watlow enumerations
OFF, AUTO, NONE, ERROR, FAIL, FAHRENHEIT = 62, 10, 61, 28, 32, 30
RAMP_ON_SET_POINT, MINUTES = 85, 57
ALARM_QUIET = {61: "none", 88: "startup", 12: "blocked"}  # what the Espec library counts as no alarm
ALARM_STATES = {7: "alarm high", 8: "alarm low", 28: "error"}
EXCEPTIONS = {1: "illegal function", 2: "illegal data address", 3: "illegal data value", 4: "device failure",
              6: "device busy"}


class WatlowF4T:
    """A chamber's Watlow F4T: set point, ramp, air temperature, stability, alarms, standby."""

    role = "chamber"
    family = "watlow-f4t"

    def __init__(self, address: str, unit: int = 1, timeout_s: float = DEFAULT_TIMEOUT_S, word_order: str = "low",
                 door_alarm: int = 2, limit: int = 1, client: Any = None) -> None:
        self.address = address
        self.host, self.port = _host_port(address)
        if word_order not in ("low", "high"):
            raise ConfigError(f"chamber watlow-f4t at {address}: word_order {word_order!r}",
                              hint='"low" (the F4T\'s default) or "high" (its Modbus Word Order setting)')
        for key, value, high, what in (("door_alarm", door_alarm, 14, "the alarm block 1-14 the door switch feeds"),
                                       ("limit", limit, 6, "the over-temperature limit block 1-6")):
            if not 0 <= value <= high:  # the station file's options, named as written there
                raise ConfigError(f"chamber watlow-f4t at {address}: options.{key} = {value}: expected {what} "
                                  "(0: none)", hint=f"set the chamber's options.{key} in the station file "
                                                    "(docs/station-file.md, \"The chamber\")")
        self.unit, self.timeout_s, self.word_order = unit, timeout_s, word_order
        self.door_alarm, self.limit = door_alarm, limit
        self.name = f"chamber watlow-f4t at {address}"
        self._client = client or ModbusTcpClient(self.host, port=self.port, timeout=timeout_s, retries=1)
        if not self._client.connect():
            raise InstrumentError(f"{self.name}: no Modbus/TCP answer at {self.host}:{self.port}",
                                  hint="is the chamber on, its F4T's Ethernet set up (Modbus TCP enabled, port 502) "
                                       "and this host on its network?")
        self._fahrenheit = False
        try:
            self.identity = self._identify()
        except BaseException:
            self._client.close()
            raise
        self.name = f"chamber F4T s/n {self.identity.serial} at {address}"

    # --- identity --------------------------------------------------------------------------------
    def _identify(self) -> InstrumentIdentity:
        part = "".join(chr(w) for w in self._read(PART_NUMBER, PART_NUMBER_LEN, "part number") if 0 < w < 128)
        if not part.startswith("F4T"):
            raise InstrumentError(f"{self.name}: part number {part!r} is not an F4T's",
                                  hint="is this address the chamber's Watlow F4T (Data Map 1)?")
        release, prototype, build = (self._s32(SW_RELEASE + 2 * k, "software version") for k in range(3))
        serial = self._s32(SERIAL, "serial number")
        self._fahrenheit = self._read(DISPLAY_UNITS, 1, "display units")[0] == FAHRENHEIT
        return InstrumentIdentity("Watlow", "F4T", str(serial), f"{release}.{prototype}.{build}", self.address,
                                  self.role, self.family,
                                  {"part_number": part, "display_units": "F" if self._fahrenheit else "C"})

    # --- the loop ----------------------------------------------------------------------------------
    def set_point(self, celsius: float) -> None:
        """Control the air to `celsius` (the loop's set point; the loop is switched to Auto)."""
        self.check_alarms()
        try:
            self._write_float(SET_POINT, self._to_units(celsius), "set point")
        except InstrumentError as exc:
            if "illegal data value" not in str(exc):
                raise
            low, high = self._set_point_range()
            raise InstrumentError(f"{self.name} refused set point {celsius:g} °C (Modbus exception 03, illegal "
                                  f"data value): outside the chamber's range {low:g} to {high:g} °C",
                                  hint="ask for a set point inside the loop's Minimum/Maximum Set Point") from None
        self._write(LOOP_MODE, [AUTO], "control mode")

    def set_ramp(self, c_per_min: float | None) -> None:
        """Ramp the set point at `c_per_min` °C/min on every change (the loop's Ramp Action: Set
        Point); None or 0: step to it at once (Ramp Action: Off)."""
        if not c_per_min:
            self._write(RAMP_ACTION, [OFF], "ramp action")
            return
        if c_per_min < 0:
            raise ConfigError(f"{self.name}: ramp rate {c_per_min:g} °C/min", hint="a rate > 0, or None for no ramp")
        self._write(RAMP_SCALE, [MINUTES], "ramp scale")
        self._write_float(RAMP_RATE, c_per_min * (1.8 if self._fahrenheit else 1.0), "ramp rate")
        self._write(RAMP_ACTION, [RAMP_ON_SET_POINT], "ramp action")

    def air_temperature(self) -> float:
        """The chamber's air, °C: the control loop's process value (alarms checked first)."""
        self.check_alarms()
        return self._from_units(self._float(PROCESS_VALUE, "process value"))

    def state(self) -> ChamberState:
        return ChamberState(air_c=self._from_units(self._float(PROCESS_VALUE, "process value")),
                            set_point_c=self._from_units(self._float(SET_POINT, "set point")),
                            working_set_point_c=self._from_units(self._float(WORKING_SP, "working set point")),
                            running=self._read(CURRENT_MODE, 1, "current control mode")[0] != OFF)

    def standby(self) -> None:
        """The loop off: no heat, no refrigeration (the chamber drifts to the room)."""
        self._write(LOOP_MODE, [OFF], "control mode")

    # --- alarms --------------------------------------------------------------------------------------
    def alarms(self) -> list[str]:
        """The active alarms, each in words ("door open (alarm 2: alarm high)")."""
        active = []
        if self.door_alarm:
            state = self._read(ALARM_STATE + ALARM_STEP * (self.door_alarm - 1), 1, f"alarm {self.door_alarm} state")[0]
            if state not in ALARM_QUIET:
                active.append(f"door open (alarm {self.door_alarm}: {ALARM_STATES.get(state, f'state {state}')})")
        if self.limit:
            base = LIMIT_STEP * (self.limit - 1)
            state, status, error = (self._read(reg + base, 1, f"limit {self.limit}")[0]
                                    for reg in (LIMIT_STATE, LIMIT_STATUS, LIMIT_ERROR))
            if state != NONE or status == FAIL or error != NONE:
                active.append(f"over-temperature limit {self.limit} tripped (state {state}, status {status})")
        return active

    def check_alarms(self) -> None:
        """Raise one ChamberAlarm naming every active alarm; nothing when there is none."""
        active = self.alarms()
        if active:
            door = any(a.startswith("door") for a in active)
            raise ChamberAlarm(self.name, "; ".join(active),
                               hint="close the chamber door" if door else
                               "let the chamber cool, find why it overheated, then reset the limit at the chamber")

    # --- waiting ---------------------------------------------------------------------------------------
    def wait_stable(self, band_c: float = 0.5, hold_s: float = 120.0, timeout_s: float = 3600.0, *,
                    clock: StationClock | None = None, pause: Pause | None = None,
                    poll_s: float = 10.0) -> Stabilised:
        """Wait until the air has stayed within ±band_c of the set point for hold_s, at most timeout_s.

        The F4T's own guaranteed soak belongs to profile steps only, so in set point mode the
        driver times the hold itself: on `clock` (the station clock; the host's by default), waiting
        with `pause` between looks (the station's wait; time.sleep by default). An alarm stops the
        wait (ChamberAlarm); so does the timeout (InstrumentError with the last look)."""
        if band_c <= 0 or hold_s < 0 or timeout_s <= 0 or poll_s <= 0:
            raise ConfigError(f"{self.name}: wait_stable(band_c={band_c}, hold_s={hold_s}, timeout_s={timeout_s})",
                              hint="band > 0 °C, hold >= 0 s, timeout > 0 s")
        now = clock.now if clock is not None else time.monotonic
        sleep = pause or time.sleep
        start, inside_since = now(), None
        while True:
            self.check_alarms()
            look = self.state()
            t = now()
            if abs(look.air_c - look.set_point_c) <= band_c:
                inside_since = t if inside_since is None else inside_since
                if t - inside_since >= hold_s:
                    return Stabilised(look.air_c, look.set_point_c, band_c, t - inside_since, t - start)
            else:
                inside_since = None
            if t - start >= timeout_s:
                raise InstrumentError(f"{self.name}: air {look.air_c:.2f} °C not within ±{band_c:g} °C of the set "
                                      f"point {look.set_point_c:g} °C for {hold_s:g} s after {timeout_s:g} s",
                                      hint="a chamber that cannot reach or hold its set point: check the load, the "
                                           "door seal and the refrigeration, or allow a wider band or more time")
            sleep(poll_s)

    def close(self) -> None:
        self._client.close()

    # --- Modbus -------------------------------------------------------------------------------------------
    def _call(self, what: str, register: int, request: Any) -> Any:
        try:
            response = request()
        except ModbusException as exc:
            raise InstrumentError(f"{self.name}: {what} (register {register}): no answer ({exc})",
                                  hint="is the chamber still on its network? check its F4T's Ethernet settings") from None
        if response.isError():
            code = getattr(response, "exception_code", 0)
            meaning = EXCEPTIONS.get(code, "exception")
            hint = ("the F4T has no such register here: is its Modbus set to Data Map 1, and are the loop, "
                    "door_alarm and limit options of the station file this chamber's?") if code == 2 else \
                "the controller refused the value (docs/chamber.md lists each parameter's range)"
            raise InstrumentError(f"{self.name}: {what} (register {register}): Modbus exception {code:02d}, {meaning}",
                                  hint=hint)
        return response

    def _read(self, register: int, count: int, what: str) -> list[int]:
        response = self._call(f"reading {what}", register, lambda: self._client.read_holding_registers(
            register, count=count, device_id=self.unit))
        return list(response.registers)

    def _write(self, register: int, words: list[int], what: str) -> None:
        self._call(f"writing {what}", register, lambda: self._client.write_registers(
            register, words, device_id=self.unit))

    def _words(self, high: int, low: int) -> list[int]:
        return [low, high] if self.word_order == "low" else [high, low]

    def _float(self, register: int, what: str) -> float:
        first, second = self._read(register, 2, what)
        low, high = (first, second) if self.word_order == "low" else (second, first)
        return float(struct.unpack(">f", struct.pack(">HH", high, low))[0])

    def _s32(self, register: int, what: str) -> int:
        first, second = self._read(register, 2, what)
        low, high = (first, second) if self.word_order == "low" else (second, first)
        return int(struct.unpack(">i", struct.pack(">HH", high, low))[0])

    def _write_float(self, register: int, value: float, what: str) -> None:
        high, low = struct.unpack(">HH", struct.pack(">f", value))
        self._write(register, self._words(high, low), what)

    def _to_units(self, celsius: float) -> float:
        return celsius * 1.8 + 32.0 if self._fahrenheit else celsius

    def _from_units(self, value: float) -> float:
        return (value - 32.0) / 1.8 if self._fahrenheit else value

    def _set_point_range(self) -> tuple[float, float]:
        return (self._from_units(self._float(MIN_SP, "minimum set point")),
                self._from_units(self._float(MAX_SP, "maximum set point")))


def _host_port(address: str) -> tuple[str, int]:
    host, sep, port = address.strip().rpartition(":")
    if not sep:
        return address.strip(), DEFAULT_PORT
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"chamber watlow-f4t: address {address!r}",
                          hint='"HOST" or "HOST:PORT" of the F4T\'s Modbus/TCP server, e.g. "10.0.0.9:502"')
    return host, int(port)
