"""Emulated Watlow F4T chamber controller: a Modbus/TCP server (pymodbus) over the F4T's own map.

The register map is the F4T's "Data Map 1" (its native map; Data Map 2 is the old F4's, not
served here) as docs/chamber.md lists it with its sources: identity, display units, alarms 1-6,
control loop 1, limit 1 and the TestEquity "actual chamber temperature" input. Like the real
controller it

- answers exception 02 (illegal data address) for a register it does not have, for a write to a
  read-only register, and for a write that covers only one half of a 32-bit value;
- answers exception 03 (illegal data value) for a value outside a parameter's range: a set point
  outside the loop's Minimum/Maximum Set Point, an enumeration the parameter does not have;
- keeps 32-bit values (IEEE floats, signed longs) in two registers, low word first (the F4T's
  default; `word_order="high"` is the other setting of its Modbus Word Order);
- speaks its display units: floats in °F when Display Units (1328) says °F, the factory default
  of a bare F4T; chamber builders ship °C, which is this emulator's default.

The chamber's air (phonebench.emulation.chamber.ChamberAir) runs on the bay's world clock, and the
world takes it as the phone's ambient. A test opens the door with `open_door()` (the door switch
feeds alarm 2, the way a chamber builder wires it: docs/chamber.md) and can lower the
over-temperature limit with `chamber.limit_high_c`.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from pymodbus.constants import ExcCodes
from pymodbus.server import ModbusTcpServer
from pymodbus.simulator import DataType, SimData, SimDevice

from ..chamber import ChamberAir
from ..world import World

log = logging.getLogger(__name__)

MODEL = "F4T"
PART_NUMBER = "F4T1L1D1A0A1AAA"  # digit 7 'D': profiles, 6 alarms; digit 12 '1': one loop (Espec's decoding)
SERIAL = 4170001
FIRMWARE = (5, 0, 12)  # software release, prototype, build
HARDWARE_ID = 124
DOOR_ALARM = 2  # the alarm the door switch feeds (a builder's wiring, not the F4T's)

# Watlow enumerations (the manual's numbers in brackets after each option)
OFF, ON, AUTO, MANUAL = 62, 63, 10, 54
NONE, STARTUP, BLOCKED, ALARM_HIGH, ALARM_LOW, ERROR = 61, 88, 12, 7, 8, 28
OK, FAIL = 138, 32
FAHRENHEIT, CELSIUS = 30, 15
RAMP_ACTIONS = {OFF, STARTUP, 85, 13}  # off, startup, set point, both
RAMPS_ON_CHANGE = {85, 13}
MINUTES, HOURS = 57, 39
PROCESS_ALARM, DEVIATION_ALARM = 76, 24


@dataclass(frozen=True)
class Field:
    """One parameter: its first register, type, access and the values it accepts."""

    address: int
    kind: str  # "u16", "s32", "float", "string:N" (N registers, one character each)
    writable: bool = False
    allowed: frozenset[int] | tuple[float, float] | None = None  # an enumeration, or (min, max)
    unit: str | None = None  # "temp" (°C/°F) or "delta" (a difference or rate): follows Display Units

    @property
    def size(self) -> int:
        if self.kind.startswith("string:"):
            return int(self.kind.split(":")[1])
        return 2 if self.kind in ("s32", "float") else 1


def _alarm(n: int) -> dict[str, Field]:
    base = 1330 + 100 * (n - 1)
    return {f"alarm{n}.type": Field(base, "u16", True, frozenset({OFF, PROCESS_ALARM, DEVIATION_ALARM})),
            f"alarm{n}.sides": Field(base + 2, "u16", True, frozenset({13, 37, 53})),
            f"alarm{n}.high": Field(base + 4, "float", True, (-99999.0, 99999.0), "temp"),
            f"alarm{n}.low": Field(base + 6, "float", True, (-99999.0, 99999.0), "temp"),
            f"alarm{n}.hysteresis": Field(base + 8, "float", True, (0.001, 9999.0), "delta"),
            f"alarm{n}.silencing": Field(base + 10, "u16", True, frozenset({OFF, ON})),
            f"alarm{n}.latching": Field(base + 12, "u16", True, frozenset({60, 49})),
            f"alarm{n}.state": Field(base + 26, "u16")}


FIELDS: dict[str, Field] = {
    "hardware_id": Field(0, "s32"), "sw_release": Field(4, "s32"), "sw_prototype": Field(6, "s32"),
    "sw_build": Field(8, "s32"), "serial": Field(12, "s32"), "manufactured": Field(14, "s32"),
    "part_number": Field(16, "string:15"), "device_status": Field(90, "u16"),
    "line_frequency": Field(94, "u16", True, frozenset({3, 4})),
    "display_units": Field(1328, "u16", True, frozenset({FAHRENHEIT, CELSIUS})),
    **{k: v for n in range(1, 7) for k, v in _alarm(n).items()},
    "loop.mode": Field(2730, "u16", True, frozenset({AUTO, MANUAL, OFF})),
    "loop.min_sp": Field(2774, "float", True, (-99999.0, 99999.0), "temp"),
    "loop.max_sp": Field(2776, "float", True, (-99999.0, 99999.0), "temp"),
    "loop.set_point": Field(2782, "float", True, None, "temp"),  # range: min_sp..max_sp, checked live
    "loop.manual_power": Field(2784, "float", True, (-100.0, 100.0)),
    "loop.ramp_action": Field(2794, "u16", True, frozenset(RAMP_ACTIONS)),
    "loop.ramp_scale": Field(2796, "u16", True, frozenset({MINUTES, HOURS})),
    "loop.ramp_rate": Field(2798, "float", True, (0.0, 99999.0), "delta"),
    "loop.power": Field(2808, "float"),
    "loop.working_sp": Field(2810, "float", unit="temp"),
    "loop.current_mode": Field(2814, "u16"),
    "loop.pv": Field(2820, "float", unit="temp"),
    "limit1.state": Field(11250, "u16"), "limit1.status": Field(11264, "u16"), "limit1.error": Field(11288, "u16"),
    "input1.pv": Field(27586, "float", unit="temp"),  # TestEquity's "Actual Chamber Temperature"
}
# Read from the chamber's model at every request; the rest are settings kept as written.
LIVE = ("serial", "loop.min_sp", "loop.max_sp", "loop.set_point", "loop.power", "loop.working_sp",
        "loop.current_mode", "loop.pv", "limit1.state", "limit1.status", "limit1.error", "input1.pv", *(f"alarm{n}.state" for n in range(1, 7)))


class F4TServer:
    """One emulated F4T on a loopback port; `address` is "127.0.0.1:PORT" (a station file's)."""

    family = "watlow-f4t"

    def __init__(self, world: World, port: int = 0, word_order: str = "low", units: str = "C") -> None:
        if word_order not in ("low", "high") or units not in ("C", "F"):
            raise ValueError(f"word_order 'low'/'high' and units 'C'/'F', not {word_order!r}, {units!r}")
        self.world = world
        room = world.air  # the bay's room, now outside the chamber
        self.chamber = ChamberAir(world.clock.now, room=room.air_c)
        world.use_chamber(self.chamber)  # the phone sits in this chamber's air
        self.word_order = word_order
        self.idn = f"Watlow,{MODEL},{SERIAL},{'.'.join(map(str, FIRMWARE))}"
        self._requested_port, self.port = port, 0
        self._lock = threading.RLock()
        self._values: dict[str, float | int | str] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: ModbusTcpServer | None = None
        self._thread: threading.Thread | None = None
        self._defaults(units)

    @property
    def address(self) -> str:
        if not self.port:
            raise RuntimeError("F4TServer is not started")
        return f"127.0.0.1:{self.port}"

    @property
    def serial(self) -> int:
        """The Serial Number register: the identity's serial (a fleet counts it on per bay's unit)."""
        digits = self.idn.split(",")[2].rsplit("-", 1)[-1]
        return int(digits) if digits.isdigit() else SERIAL

    # --- what a test or the emulated world does to the chamber ------------------------------------
    def open_door(self) -> None:
        self.chamber.open_door()

    def close_door(self) -> None:
        self.chamber.close_door()

    # --- the register map ---------------------------------------------------------------------------
    def _defaults(self, units: str) -> None:
        v = self._values
        v.update({"hardware_id": HARDWARE_ID, "sw_release": FIRMWARE[0], "sw_prototype": FIRMWARE[1],
                  "sw_build": FIRMWARE[2], "manufactured": 23150, "part_number": PART_NUMBER,
                  "device_status": OK, "line_frequency": 4, "display_units": CELSIUS if units == "C" else FAHRENHEIT,
                  "loop.mode": AUTO, "loop.manual_power": 0.0, "loop.ramp_action": OFF, "loop.ramp_scale": MINUTES, "loop.ramp_rate": 0.0})
        for n in range(1, 7):
            v.update({f"alarm{n}.type": OFF, f"alarm{n}.sides": 13, f"alarm{n}.high": 148.9, f"alarm{n}.low": 0.0,
                      f"alarm{n}.hysteresis": 0.6, f"alarm{n}.silencing": OFF, f"alarm{n}.latching": 60})
        # Alarm 1: a deviation alarm on the loop (±10 °C); alarm 2: the door switch (on = open).
        v.update({"alarm1.type": DEVIATION_ALARM, "alarm1.high": 10.0, "alarm1.low": -10.0,
                  f"alarm{DOOR_ALARM}.type": PROCESS_ALARM, f"alarm{DOOR_ALARM}.sides": 37,
                  f"alarm{DOOR_ALARM}.high": 0.5})

    def _live(self, name: str) -> float | int | str:
        c = self.chamber
        if name == "serial":
            return self.serial
        if name == "loop.min_sp":
            return c.min_sp_c
        if name == "loop.max_sp":
            return c.max_sp_c
        if name == "loop.set_point":
            return c.set_point_c
        if name in ("loop.pv", "input1.pv"):
            return c.air_temperature_c()
        if name == "loop.working_sp":
            return c.working_set_point_c()
        if name == "loop.current_mode":
            return OFF if not c.loop_on or c.limit_tripped else self._values["loop.mode"]
        if name == "loop.power":
            gap = c.working_set_point_c() - c.air_temperature_c()
            return 0.0 if not c.loop_on or c.limit_tripped else max(-100.0, min(100.0, 10.0 * gap))
        if name == "limit1.state":
            return ERROR if c.limit_tripped else NONE
        if name == "limit1.status":
            return FAIL if c.limit_tripped else OK
        if name == "limit1.error":
            return NONE
        if name == f"alarm{DOOR_ALARM}.state":
            return ALARM_HIGH if c.door_open else NONE
        if name == "alarm1.state":
            gap = c.air_temperature_c() - c.working_set_point_c()
            if not c.loop_on:
                return BLOCKED
            return ALARM_HIGH if gap > self._values["alarm1.high"] else (  # type: ignore[operator]
                ALARM_LOW if gap < self._values["alarm1.low"] else NONE)  # type: ignore[operator]
        if name.endswith(".state"):
            return NONE
        raise KeyError(name)

    def _encode(self, field: Field, value: float | int | str) -> list[int]:
        if field.kind.startswith("string:"):
            text = str(value)[:field.size].ljust(field.size, "\0")
            return [ord(ch) for ch in text]
        if field.kind == "u16":
            return [int(value) & 0xFFFF]
        if field.unit is not None and self._values["display_units"] == FAHRENHEIT:
            value = float(value) * 1.8 + (32.0 if field.unit == "temp" else 0.0)
        raw = struct.pack(">f", float(value)) if field.kind == "float" else struct.pack(">i", int(value))
        high, low = struct.unpack(">HH", raw)
        return [low, high] if self.word_order == "low" else [high, low]

    def _decode(self, field: Field, words: list[int]) -> float | int:
        if field.kind == "u16":
            return words[0]
        low, high = (words[0], words[1]) if self.word_order == "low" else (words[1], words[0])
        raw = struct.pack(">HH", high, low)
        if field.kind == "s32":
            return int(struct.unpack(">i", raw)[0])
        value = float(struct.unpack(">f", raw)[0])
        if field.unit is not None and self._values["display_units"] == FAHRENHEIT:
            value = (value - (32.0 if field.unit == "temp" else 0.0)) / 1.8
        return value

    def _value(self, name: str) -> float | int | str:
        return self._live(name) if name in LIVE else self._values[name]

    def _simdata(self) -> list[SimData]:
        blocks = []
        for name, field in FIELDS.items():
            words = self._encode(field, self._value(name))
            blocks.append(SimData(field.address, values=words, datatype=DataType.REGISTERS,
                                  readonly=not field.writable))
        return blocks

    # --- requests -------------------------------------------------------------------------------------
    async def _action(self, function_code: int, start: int, address: int, count: int, registers: list[int],
                      values: list[int] | list[bool] | None) -> ExcCodes | None:
        with self._lock:
            if values is None or function_code in (3, 4):
                for name, field in _overlapping(address, count):  # every value now, in today's units
                    at = field.address - start
                    registers[at:at + field.size] = self._encode(field, self._value(name))
                return None
            return self._write(start, address, [int(v) for v in values], registers)

    def _write(self, start: int, address: int, words: list[int], registers: list[int]) -> ExcCodes | None:
        proposed = list(registers)
        proposed[address - start:address - start + len(words)] = words
        changes: dict[str, float | int] = {}
        for name, field in _overlapping(address, len(words)):
            if field.address < address or field.address + field.size > address + len(words):
                log.info("f4t: write to half of %s (%d) refused", name, field.address)
                return ExcCodes.ILLEGAL_ADDRESS
            at = field.address - start
            value = self._decode(field, proposed[at:at + field.size])
            if not self._acceptable(name, field, value):
                log.info("f4t: %s = %r refused (illegal data value)", name, value)
                return ExcCodes.ILLEGAL_VALUE
            changes[name] = value
        for name, value in changes.items():
            self._apply(name, value)
        return None

    def _acceptable(self, name: str, field: Field, value: float | int) -> bool:
        if name == "loop.set_point":  # Minimum/Maximum Set Point bound it (F4T manual, control loop)
            return self.chamber.min_sp_c - 1e-3 <= value <= self.chamber.max_sp_c + 1e-3
        if isinstance(field.allowed, frozenset):
            return int(value) in field.allowed
        if isinstance(field.allowed, tuple):
            return field.allowed[0] <= value <= field.allowed[1]
        return True

    def _apply(self, name: str, value: float | int) -> None:
        c = self.chamber
        if name == "loop.set_point":
            c.set_set_point(float(value))
        elif name == "loop.min_sp":
            c.min_sp_c = float(value)
        elif name == "loop.max_sp":
            c.max_sp_c = float(value)
        elif name == "loop.mode":
            self._values[name] = int(value)
            c.set_loop(int(value) != OFF)
            c.manual_power_pct = float(self._values["loop.manual_power"]) if value == MANUAL else None
        else:
            self._values[name] = value
        if name.startswith("loop.ramp") or name == "display_units":
            per_min = float(self._values["loop.ramp_rate"]) * (1.0 if self._values["loop.ramp_scale"] == MINUTES else 1 / 60)
            c.set_ramp(self._values["loop.ramp_action"] in RAMPS_ON_CHANGE, per_min)
        if name == "loop.manual_power" and self._values.get("loop.mode") == MANUAL:
            c.manual_power_pct = float(value)

    # --- life -------------------------------------------------------------------------------------------
    def start(self) -> str:
        if self._thread is not None:
            return self.address
        ready, failed = threading.Event(), list[BaseException]()
        self._thread = threading.Thread(target=self._run, args=(ready, failed), name="f4t-modbus", daemon=True)
        self._thread.start()
        if not ready.wait(30.0) or failed:
            raise RuntimeError(f"emulated F4T did not start: {failed[0] if failed else 'timed out'}")
        log.info("%s listening at %s", self.family, self.address)
        return self.address

    def _run(self, ready: threading.Event, failed: list[BaseException]) -> None:
        try:
            asyncio.run(self._serve(ready))
        except BaseException as exc:  # noqa: BLE001 - reported to start()
            failed.append(exc)
            ready.set()

    async def _serve(self, ready: threading.Event) -> None:
        self._loop = asyncio.get_running_loop()
        device = SimDevice(id=0, simdata=self._simdata(), action=self._action)  # any unit id, as over TCP
        self._server = ModbusTcpServer(device, address=("127.0.0.1", self._requested_port))
        await self._server.serve_forever(background=True)
        self.port = self._server.transport.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        ready.set()
        await self._server.serving

    def stop(self) -> None:
        if self._loop is not None and self._server is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError, asyncio.CancelledError, TimeoutError):  # its loop already ended
                asyncio.run_coroutine_threadsafe(self._server.shutdown(), self._loop).result(10.0)
        if self._thread is not None:
            self._thread.join(10.0)
        self._thread = self._server = self._loop = None
        self.port = 0


def _overlapping(address: int, count: int) -> Iterator[tuple[str, Field]]:
    for name, field in FIELDS.items():
        if field.address < address + count and address < field.address + field.size:
            yield name, field

