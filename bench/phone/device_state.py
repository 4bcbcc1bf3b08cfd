"""Reading a phone's own view of itself over the shell: thermal zones, thermal status, battery,
and its clock (for a bench without a clock of its own that runs with the phone's time)."""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from phonebench.core.errors import InvalidMeasurement
from phonebench.drivers.device import Device

if TYPE_CHECKING:  # annotations only
    from phonebench.drivers.runtime import RuntimeClient

# Zones report millidegrees, but some vendors report degrees or decidegrees: judge by magnitude.
_PLAUSIBLE_C = (-40.0, 150.0)
_TEMPERATURE = re.compile(r"Temperature\{mValue=(?P<value>[-0-9.eE]+), mType=(?P<type>-?\d+), "
                          r"mName=(?P<name>[^,]+), mStatus=(?P<status>-?\d+)\}")
_ZONE_LINE = re.compile(r"^/sys/class/thermal/thermal_zone(?P<index>\d+)/(?P<node>type|temp):(?P<value>.*)$",
                        re.MULTILINE)
_STATUS = re.compile(r"^Thermal Status: (\d+)", re.MULTILINE)


@dataclass
class ThermalZone:
    index: int
    type: str
    celsius: float


@dataclass
class ThermalReport:
    status: int  # android THERMAL_STATUS 0 (none) .. 6 (shutdown)
    temperatures: dict[str, tuple[int, float]]  # name -> (android type, °C), "Current temperatures from HAL"


@dataclass
class BatteryReading:
    voltage_v: float
    current_a: float  # magnitude; the sign convention varies between kernels
    temp_c: float
    capacity_pct: float


def to_celsius(raw: float) -> float:
    """Scale a thermal_zone temp (m°C usually; some vendors d°C or °C) to °C."""
    for scale in (1000.0, 10.0, 1.0):
        value = raw / scale
        if _PLAUSIBLE_C[0] <= value <= _PLAUSIBLE_C[1] and (scale == 1.0 or abs(raw) >= 200):
            return value
    raise InvalidMeasurement(f"thermal zone value {raw} is not a plausible temperature in any unit")


def read_thermal_zones(device: Device) -> list[ThermalZone]:
    # One shell call: every zone's type and temp, tab-separated.
    # `grep .` prints path:content for every readable file in one call; unreadable zones
    # (EINVAL on some vendors' sensors) are simply absent.
    out = device.shell("grep . /sys/class/thermal/thermal_zone*/type /sys/class/thermal/thermal_zone*/temp").output
    types: dict[int, str] = {}
    temps: dict[int, float] = {}
    for match in _ZONE_LINE.finditer(out):
        index, node, value = int(match["index"]), match["node"], match["value"].strip()
        if node == "type":
            types[index] = value
        elif re.fullmatch(r"-?\d+", value):
            temps[index] = to_celsius(float(value))
    zones = [ThermalZone(i, types.get(i, f"zone{i}"), temps[i]) for i in sorted(temps)]
    if not zones:
        raise InvalidMeasurement(f"{device.name}: no readable thermal zones under /sys/class/thermal")
    return zones


def parse_thermalservice(text: str) -> ThermalReport:
    status_match = _STATUS.search(text)
    if status_match is None:
        raise InvalidMeasurement("dumpsys thermalservice has no 'Thermal Status:' line")
    section = text.split("Current temperatures from HAL:", 1)
    body = section[1] if len(section) == 2 else text
    try:
        temps = {m["name"]: (int(m["type"]), float(m["value"])) for m in _TEMPERATURE.finditer(body)}
    except ValueError as exc:  # the pattern admits "--" or "1.2.3" as a value
        raise InvalidMeasurement(f"dumpsys thermalservice: a temperature is not a number ({exc})") from None
    return ThermalReport(status=int(status_match.group(1)), temperatures=temps)


def read_thermal_status(device: Device) -> ThermalReport:
    return parse_thermalservice(device.run("dumpsys thermalservice"))


def read_battery(device: Device) -> BatteryReading:
    base = "/sys/class/power_supply/battery"
    out = device.run(f"cat {base}/voltage_now {base}/current_now {base}/temp {base}/capacity").split()
    if len(out) != 4:
        raise InvalidMeasurement(f"{device.name}: battery sysfs gave {out!r}, expected 4 values")
    try:
        voltage_uv, current_ua, temp_dc, capacity = (float(x) for x in out)
    except ValueError:
        raise InvalidMeasurement(f"{device.name}: battery sysfs gave {out!r}, not 4 numbers") from None
    return BatteryReading(voltage_uv / 1e6, abs(current_ua) / 1e6, temp_dc / 10.0, capacity)


def zone_celsius(zones: list[ThermalZone], zone_type: str) -> float | None:
    """The reading of the first zone of this type (None: the phone has no such zone)."""
    return next((z.celsius for z in zones if z.type == zone_type), None)


def phone_clock(runtime: RuntimeClient) -> Callable[[], float]:
    """The phone's clock (the runtime's status `t`, seconds), read over ADB at each call.

    Two reads around a device call bracket the whole call on the phone: what its reads took, not
    what the runtime says they took. The transport is not in the interval. For the emulated
    station, whose phones live on simulated time the host's clock does not see."""
    return lambda: float(runtime.status().t)
