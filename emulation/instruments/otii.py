"""Emulated Qoitech Otii server (the TCP automation server of the Otii 3 app / Otii Server, port
1905 on the real one) with one Otii Arc, for Qoitech's own client `otii_tcp_client`, unchanged.

Protocol: JSON objects separated by "\\r\\n"; an `information` greeting on connect; each `request`
{cmd, data, trans_id} gets a `response` with its cmd and trans_id, or an `error` with one of the
client's error codes and the data keys its `Otii_Exception` reads for that code.

Modelled: a logged-in user with one Automation license (reserved by a connection and returned by
it, or when it closes; Arc, project and recording commands need it); the Arc's main output, which
powers the phone through the world's supply and cuts off over max current unless the source current
limit (constant current) is on; its meters (`arc_get_value`: a 40 ms mean); projects whose
recordings of mc/mv/mp hold the world's terminal volts and amps plus meter noise. Commands of the
client that are not modelled answer "Operation not supported", never a made-up value.

Time: the world's clock is simulated. A recording holds the world time passed since it started;
each count poll of a running recording takes RECORDING_POLL_S of it (the real server's data
arrives in batches while its client waits between polls).
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import math
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .server import Connection, LineServer
from ..world import World

log = logging.getLogger(__name__)

GREETING = {"type": "information", "info": "connected",
            "data": {"otii_version": "3.5.5", "protocol_version": "0.1", "server": "otii-server"}}
HW_VERSION, FW_VERSION = "Arc 1.1", "1.2.6"
DEVICE_NAME = "Arc"
LICENSE_ID = 1001
LICENSEE, LICENSE_HOST = "phonebench", "emulated"  # reserved_to / hostname while reserved
MAIN_VOLTAGE_V = (0.5, 4.5)
MAX_CURRENT_A = (0.001, 5.0)
DEFAULT_MAIN_VOLTAGE_V, DEFAULT_MAX_CURRENT_A = 3.3, 0.5
# Main channel sample rates, S/s: this emulator's assumption of the Arc's list (the driver's, from
# Qoitech's published material as read here), to be checked against a real unit.
SAMPLE_RATES = (1000, 2000, 4000, 10000, 20000, 50000)
DEFAULT_SAMPLE_RATE = 4000
CHANNELS = ("mc", "mp", "mv", "ac", "ap", "av", "sp", "sn", "vb", "vj", "tp", "rx", "i1", "i2")
MAIN_CHANNELS = ("mc", "mv", "mp")  # the modelled ones: main current (A), voltage (V), power (W)
REGULATIONS = ("voltage", "current", "inline", "off")
RANGES = ("low", "high")  # "low" auto-ranges into the low range below LOW_RANGE_MAX_A
LOW_RANGE_MAX_A = 19e-3
VALUE_WINDOW_S = 0.04  # arc_get_value: the mean over this much world time, ending now
VALUE_RATE = 4000  # S/s, the grid of that mean
RECORDING_POLL_S = 0.25  # world time one count poll of a running recording takes (a data batch)
CALIBRATION_S = 2.0
# Meter noise (rms) and zero offset per range: smaller than the N6705C's (power_analyzer.py).
CURRENT_NOISE_A = {"high": 0.2e-3, "low": 5e-6}
CURRENT_OFFSET_A = {"high": 50e-6, "low": 0.2e-6}
VOLTAGE_NOISE_V = 0.5e-3
NOISE_BLOCK = 4000  # samples per noise block: a sample's noise is the same whatever chunk fetches it
COUNT_EPSILON = 0.05  # of a sample: world times near 1.8e9 s carry ~0.24 us of rounding
STATS_CHUNK = 1 << 20  # samples per step of statistics over a long window (bounded memory)
LICENSED = ("arc_", "project_", "recording_", "battery_emulator_", "otii_create_project", "otii_open_project")
# Commands of otii_tcp_client 1.0.13 not modelled here: they exist, so not "Invalid command".
UNSUPPORTED = frozenset("""
    arc_commit arc_enable_5v arc_enable_battery_profiling arc_enable_exp_port arc_enable_legacy_sink
    arc_enable_uart arc_firmware_upgrade arc_get_4wire arc_get_adc_resistor arc_get_exp_voltage arc_get_gpi
    arc_get_property arc_get_rx arc_get_supply_mode arc_get_uart_baudrate arc_set_0-15_voltage arc_set_4wire
    arc_set_adc_resistor arc_set_battery_profile arc_set_exp_voltage arc_set_gpo arc_set_main_current
    arc_set_property arc_set_supply_battery_emulator arc_set_supply_power_box arc_set_tx arc_set_uart_baudrate
    arc_wait_for_battery_data arc_write_tx battery_emulator_get_parallel battery_emulator_get_series
    battery_emulator_get_soc battery_emulator_get_soc_tracking battery_emulator_get_used_capacity
    battery_emulator_set_soc battery_emulator_set_soc_tracking battery_emulator_set_used_capacity
    battery_emulator_update_profile otii_get_battery_profile_info otii_get_battery_profiles otii_open_project
    otii_set_all_main otii_shutdown project_create_user_log project_crop_data project_save
    recording_append_user_log recording_downsample_channel recording_get_channel_info recording_get_log_offset
    recording_get_offset recording_get_user_log_data recording_import_log recording_log recording_offset_user_log
    recording_rename recording_set_log_offset recording_set_offset""".split())
JSON_TYPES = {bool: "boolean", int: "number", float: "number", str: "string", list: "array", dict: "object"}
_REQUIRED = object()


class OtiiError(Exception):
    """A refusal: `code` is one of the client's error codes, `data` what Otii_Exception reads for it."""

    def __init__(self, code: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(f"{code}: {data}")
        self.code, self.data = code, data or {}


def invalid(key: str, value: Any) -> OtiiError:
    return OtiiError("Invalid key value", {"key": key, "value": value})


def failure(message: str) -> OtiiError:
    return OtiiError("Command failure", {"message": message})


class Request:
    """One request's `data`, read with the server's presence, type and range checks."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def get(self, key: str, kind: type, default: Any = _REQUIRED) -> Any:
        if key not in self.data:
            if default is _REQUIRED:
                raise OtiiError("Missing key in request", {"key": key})
            return default
        value = self.data[key]
        if kind is float:  # a JSON number: int or float, not a boolean, finite
            ok = type(value) in (int, float) and math.isfinite(value)
        elif kind is int:
            ok = type(value) in (int, float) and math.isfinite(value) and float(value).is_integer()
        else:
            ok = isinstance(value, kind)
        if not ok:
            expected = "integer" if kind is int else JSON_TYPES[kind]
            raise OtiiError("Invalid key type", {"key": key, "expected_type": expected,
                                                 "received_type": JSON_TYPES.get(type(value), "null")})
        return int(value) if kind is int else value

    def number(self, key: str, low: float = -math.inf, high: float = math.inf, default: Any = _REQUIRED) -> float:
        value = float(self.get(key, float, default))
        if not low <= value <= high:
            raise invalid(key, self.data[key])
        return value

    def integer(self, key: str, low: float = -math.inf) -> int:
        value = self.get(key, int)
        if value < low:
            raise invalid(key, value)
        return value

    def choice(self, key: str, options: tuple[str, ...]) -> str:
        value = self.get(key, str)
        if value not in options:
            raise invalid(key, value)
        return value


@dataclass
class Recording:
    id: int
    name: str
    t_start: float  # world time of its first sample
    rates: dict[str, int]  # recorded main channel -> S/s
    current_range: str
    t_stop: float | None = None

    def count(self, channel: str, now: float) -> int:
        if channel not in self.rates:
            return 0
        end = now if self.t_stop is None else self.t_stop
        return max(0, math.floor((end - self.t_start) * self.rates[channel] + COUNT_EPSILON))

    def entry(self) -> dict[str, Any]:
        start = dt.datetime.fromtimestamp(self.t_start, tz=dt.timezone.utc)  # world time is Unix time
        return {"recording_id": self.id, "name": self.name, "start-time": start.isoformat(timespec="milliseconds")}


@dataclass
class Project:
    id: int
    recordings: dict[int, Recording] = field(default_factory=dict)


Handler = Callable[[Connection, Request], dict[str, Any] | None]


class OtiiServer(LineServer):
    """The Otii TCP server with one Arc, named by `serial` (its device id derives from it)."""

    family = "qoitech-otii"

    def __init__(self, world: World, port: int = 0, serial: str = "ARC-000123") -> None:
        super().__init__(port)
        self.world = world
        self.serial = serial
        self.lock = threading.RLock()  # one request at a time, whichever connection sends it
        self.logged_in = True
        self.license_holder: Connection | None = None
        self.main = False
        self.main_voltage, self.max_current = DEFAULT_MAIN_VOLTAGE_V, DEFAULT_MAX_CURRENT_A
        self.regulation, self.current_range, self.src_cur_limit = "voltage", "high", False
        self.enabled: set[str] = set()  # channels a recording takes (arc_enable_channel)
        self.rates = dict.fromkeys(MAIN_CHANNELS, DEFAULT_SAMPLE_RATE)
        self.project: Project | None = None
        self.running: Recording | None = None
        self._ids = {"project": 0, "recording": 0, "value": 0}
        self._main_log: list[tuple[float, bool]] = []  # (world time, the output powers the phone from then on)
        self._watching = False
        self.commands: dict[str, Handler] = self._command_table()
        self._apply()

    @property
    def device_id(self) -> str:
        return "Arc" + hashlib.md5(self.serial.encode(), usedforsecurity=False).hexdigest()

    @property
    def idn(self) -> str:
        """Identity in *IDN? form: a rack of emulated units gives each its own serial through it."""
        return f"Qoitech,Otii Arc,{self.serial},{FW_VERSION}"

    @idn.setter
    def idn(self, value: str) -> None:
        self.serial = value.split(",")[2]

    def _format_address(self, port: int) -> str:
        return f"127.0.0.1:{port}"

    # --- transport ----------------------------------------------------------------------------
    def on_connect(self, conn: Connection) -> None:
        conn.send(_encode(GREETING))

    def message_end(self, buf: bytearray, scan_from: int) -> int | None:
        # JSON lines end at "\n" alone: SCPI's rule pairs quotes, and a JSON string with an odd
        # number of \" would never end there.
        end = buf.find(b"\n")
        return None if end < 0 else end

    def handle_message(self, conn: Connection, message: bytes) -> None:
        if not message.strip():
            return
        with self.lock:
            reply = self._reply(conn, message)
        conn.send(_encode(reply))

    def _reply(self, conn: Connection, message: bytes) -> dict[str, Any]:
        try:
            request = json.loads(message)
            if not isinstance(request, dict):
                raise ValueError("the request is not a JSON object")
        except ValueError as exc:  # bad JSON or bad UTF-8
            return {"type": "error", "cmd": "", "errorcode": "Not able to parse request",
                    "data": {"parse_error": str(exc), "data": message.decode("utf-8", "replace")}}
        head = {key: request[key] for key in ("cmd", "trans_id") if key in request}
        if "cmd" in head and not isinstance(head["cmd"], str):
            head["cmd"] = json.dumps(head["cmd"])  # the client builds its message from a string
        try:
            outer = Request(request)
            cmd = outer.get("cmd", str)
            result = self._dispatch(conn, cmd, Request(outer.get("data", dict, {})))
        except OtiiError as exc:
            log.debug("%s: %s refused: %s", self.family, head.get("cmd"), exc)
            return {"type": "error", **head, "errorcode": exc.code, "data": exc.data}
        except Exception as exc:  # an emulator bug: answer and log it rather than drop the client
            log.exception("%s: %s failed", self.family, head.get("cmd"))
            return {"type": "error", **head, "errorcode": "Command failure", "data": {"message": f"emulator: {exc!r}"}}
        return {"type": "response", **head, **({"data": result} if result is not None else {})}

    def _dispatch(self, conn: Connection, cmd: str, req: Request) -> dict[str, Any] | None:
        handler = self.commands.get(cmd)
        if handler is None and cmd not in UNSUPPORTED:
            raise OtiiError("Invalid command")
        if cmd.startswith(LICENSED) and self.license_holder is None:
            raise OtiiError("No license", {"message": "reserve an Automation license first"})
        if cmd.startswith("arc_"):
            self._check_device(req)
        if handler is None:
            raise OtiiError("Operation not supported", {"message": f"{cmd} is not modelled by the emulated Otii"})
        return handler(conn, req)

    def on_disconnect(self, conn: Connection) -> None:
        with self.lock:
            if self.license_holder is conn:  # the real server ends the session's reservations
                log.info("%s: %s closed; its Automation license is returned", self.family, conn.peer)
                self.license_holder = None

    def stop(self) -> None:
        self._watch(False)
        super().stop()

    # --- licensing and devices -----------------------------------------------------------------
    def _licenses(self, conn: Connection, req: Request) -> dict[str, Any]:
        self._check_logged_in()
        held = self.license_holder is not None
        return {"licenses": [{"id": LICENSE_ID, "type": "Automation", "available": True,
                              "reserved_to": LICENSEE if held else "", "hostname": LICENSE_HOST if held else ""}]}

    def _license(self, conn: Connection, req: Request, reserve: bool) -> None:
        self._check_logged_in()
        license_id = req.integer("license_id")
        if license_id != LICENSE_ID:
            raise invalid("license_id", license_id)
        if not reserve and self.license_holder is None:
            raise OtiiError("License could not be returned", {"license_id": license_id})
        if reserve == (self.license_holder is None):  # reserving a reserved one keeps its holder
            self.license_holder = conn if reserve else None
            log.info("%s: Automation license %s by %s", self.family, "reserved" if reserve else "returned", conn.peer)

    def _check_logged_in(self) -> None:
        if not self.logged_in:
            raise OtiiError("Not logged in", {"message": "log in first (otii_login)"})

    def _log_in(self, conn: Connection, req: Request, on: bool) -> None:
        if on:  # any account will do: the emulated user holds the license
            req.get("username", str)
            req.get("password", str)
        else:
            self.license_holder = None  # logging out returns the user's reservations
        self.logged_in = on

    def _check_device(self, req: Request) -> None:
        device_id = req.get("device_id", str)
        if device_id != self.device_id:
            raise OtiiError("Device not connected", {"device_id": device_id})

    def _devices(self, conn: Connection, req: Request) -> dict[str, Any]:
        req.number("timeout", 0.0, default=10.0)  # the Arc is already attached: no wait
        return {"devices": [{"device_id": self.device_id, "name": DEVICE_NAME, "type": "Arc"}]}

    def _device_id(self, conn: Connection, req: Request) -> dict[str, Any]:
        if req.get("device_name", str) != DEVICE_NAME:
            raise invalid("device_name", req.data["device_name"])
        return {"device_id": self.device_id}

    # --- world link ----------------------------------------------------------------------------
    def _apply(self) -> None:
        """Push the output's state into the world's supply (what the phone sees)."""
        supply = self.world.supply
        powering = self.main and self.regulation == "voltage"  # other modes supply nothing here
        supply.emulator_on = powering
        supply.setpoint_v = self.main_voltage
        supply.output_resistance_ohm = 0.0  # the Arc has no series-resistance emulation
        supply.current_limit_a = self.max_current
        supply.ripple_running, supply.ripple_amplitude_v, supply.ripple_offset_v = False, 0.0, 0.0
        now = self.world.clock.now()
        if not self._main_log or self._main_log[-1][1] != powering:
            self._main_log.append((now, powering))
        self._watch(powering and not self.src_cur_limit)
        if self._watching:
            self._on_time(now)

    def _watch(self, on: bool) -> None:
        """Observe the world's steps while an overload would cut the output off."""
        if on != self._watching:
            (self.world.add_observer if on else self.world.remove_observer)(self._on_time)
        self._watching = on

    def _on_time(self, now: float) -> None:
        # May run in whichever thread advances the world: never takes self.lock (lock order).
        _, amps = self.world.electrical_at(np.array([now]))
        if self.main and amps[0] >= self.max_current * (1 - 1e-9):  # the supply caps at the limit
            log.info("%s: %.3f A at max current %.3f A (t=%.3f): main output cut off", self.family, amps[0],
                     self.max_current, now)
            self.main = False
            self._apply()

    def _powered_at(self, times: np.ndarray) -> np.ndarray:
        if not self._main_log:
            return np.zeros(times.shape, dtype=bool)
        starts, states = zip(*self._main_log)
        index = np.searchsorted(np.asarray(starts), times, side="right") - 1
        return np.where(index >= 0, np.asarray(states)[np.maximum(index, 0)], False)

    def _measure(self, times: np.ndarray, noise_i: np.ndarray, noise_v: np.ndarray,
                 current_range: str) -> tuple[np.ndarray, np.ndarray]:
        """Metered (volts, amps): the world's terminal values while main powered the phone, else 0."""
        volts, amps = self.world.electrical_at(times)
        powered = self._powered_at(times)
        volts, amps = np.where(powered, volts, 0.0), np.where(powered, amps, 0.0)
        low = (current_range == "low") & (np.abs(amps) < LOW_RANGE_MAX_A)
        sigma = np.where(low, CURRENT_NOISE_A["low"], CURRENT_NOISE_A["high"])
        offset = np.where(low, CURRENT_OFFSET_A["low"], CURRENT_OFFSET_A["high"])
        return volts + VOLTAGE_NOISE_V * noise_v, amps + offset + sigma * noise_i

    def _get_value(self, conn: Connection, req: Request) -> dict[str, Any]:
        channel = self._main_channel(req)
        end = self.world.wait(VALUE_WINDOW_S)
        n = round(VALUE_WINDOW_S * VALUE_RATE)
        times = end - VALUE_WINDOW_S + np.arange(1, n + 1) / VALUE_RATE
        self._ids["value"] += 1
        rng = np.random.default_rng([self.world.seed, zlib.crc32(b"otii-arc-value"), self._ids["value"]])
        volts, amps = self._measure(times, rng.standard_normal(n), rng.standard_normal(n), self.current_range)
        return {"value": float(np.mean(_channel_values(channel, volts, amps)))}

    # --- Arc settings ---------------------------------------------------------------------------
    def _setter(self, attr: str, read: Callable[[Request], Any]) -> Handler:
        def handler(conn: Connection, req: Request) -> None:
            setattr(self, attr, read(req))
            self._apply()
        return handler

    def _getter(self, key: str, attr: str) -> Handler:
        return lambda conn, req: {key: getattr(self, attr)}

    def _main_channel(self, req: Request) -> str:
        channel = req.choice("channel", CHANNELS)
        if channel not in MAIN_CHANNELS:
            raise OtiiError("Operation not supported", {"message": f"channel {channel} is not modelled"})
        return channel

    def _enable_channel(self, conn: Connection, req: Request) -> None:
        channel = req.choice("channel", CHANNELS)
        (self.enabled.add if req.get("enable", bool) else self.enabled.discard)(channel)

    def _set_rate(self, conn: Connection, req: Request) -> None:
        channel, rate = self._main_channel(req), req.integer("value")
        if rate not in SAMPLE_RATES:
            raise invalid("value", rate)
        self.rates[channel] = rate

    def _calibrate(self, conn: Connection, req: Request) -> None:
        self.world.wait(CALIBRATION_S)

    # --- projects and recordings ---------------------------------------------------------------
    def _project(self, req: Request) -> Project:
        project_id = req.integer("project_id")
        if self.project is None or self.project.id != project_id:
            raise OtiiError("Project does not exist", {"project_id": project_id})
        return self.project

    def _create_project(self, conn: Connection, req: Request) -> dict[str, Any]:
        if self.project is not None:
            raise failure(f"project {self.project.id} is open; close it first")
        self._ids["project"] += 1
        self.project = Project(self._ids["project"])
        return {"project_id": self.project.id}

    def _close_project(self, conn: Connection, req: Request) -> None:
        project = self._project(req)
        if project.recordings and not req.get("force", bool, False):
            raise failure("the project has unsaved recordings: close it with force")
        self._stop_recording(conn, req)
        self.project = None

    def _start_recording(self, conn: Connection, req: Request) -> None:
        project = self._project(req)
        if self.running is not None:
            raise failure(f"recording {self.running.id} is already running")
        rates = {c: self.rates[c] for c in MAIN_CHANNELS if c in self.enabled}
        if not rates:
            raise failure("no main channel enabled (arc_enable_channel mc, mv or mp)")
        self._ids["recording"] += 1
        number = self._ids["recording"]
        self.running = Recording(number, f"Recording {number}", self.world.clock.now(), rates, self.current_range)
        project.recordings[self.running.id] = self.running
        log.info("%s: recording %d started (%s)", self.family, self.running.id, rates)

    def _stop_recording(self, conn: Connection, req: Request) -> None:
        self._project(req)
        if self.running is not None:  # none running: nothing to do
            self.running.t_stop = self.world.clock.now()
            log.info("%s: recording %d stopped", self.family, self.running.id)
            self.running = None

    def _last_recording(self, conn: Connection, req: Request) -> dict[str, Any]:
        recordings = self._project(req).recordings
        return recordings[max(recordings)].entry() if recordings else {"recording_id": -1}

    def _recording(self, req: Request) -> Recording:
        recording_id = req.integer("recording_id")
        recording = self.project.recordings.get(recording_id) if self.project is not None else None
        if recording is None:
            raise invalid("recording_id", recording_id)
        return recording

    def _delete_recording(self, conn: Connection, req: Request) -> None:
        recording = self._recording(req)
        if recording is self.running:
            raise failure(f"recording {recording.id} is running: stop it first")
        del self.project.recordings[recording.id]  # type: ignore[union-attr]  # _recording found it there

    def _channel_of(self, req: Request, recorded: bool = True) -> tuple[Recording, str, int]:
        """The recording, channel and its sample count now; `recorded`: refuse a channel it did not take."""
        recording = self._recording(req)
        self._check_device(req)
        channel = req.choice("channel", CHANNELS)
        if recorded and channel not in recording.rates:
            raise invalid("channel", channel)
        return recording, channel, recording.count(channel, self.world.clock.now())

    def _data_count(self, conn: Connection, req: Request) -> dict[str, Any]:
        recording, channel, _ = self._channel_of(req, recorded=False)
        if recording is self.running:
            self.world.wait(RECORDING_POLL_S)  # the next batch of data arrives while the client waits
        return {"count": recording.count(channel, self.world.clock.now())}

    def _block(self, recording: Recording, channel: str, index: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        """Metered (volts, amps) of samples index .. index+count-1 of a recorded channel."""
        first, last = index // NOISE_BLOCK, (index + count - 1) // NOISE_BLOCK
        noise = [np.random.default_rng([self.world.seed, zlib.crc32(b"otii-arc"), recording.id, b * NOISE_BLOCK])
                 .standard_normal((2, NOISE_BLOCK)) for b in range(first, last + 1)]
        skip = index - first * NOISE_BLOCK
        noise_i, noise_v = np.concatenate(noise, axis=1)[:, skip:skip + count]
        times = recording.t_start + (index + np.arange(count)) / recording.rates[channel]
        return self._measure(times, noise_i, noise_v, recording.current_range)

    def _data(self, conn: Connection, req: Request) -> dict[str, Any]:
        recording, channel, recorded = self._channel_of(req, recorded=False)
        index, count = req.integer("index", 0), req.integer("count", 1)
        if index + count > recorded:
            raise invalid("count", count)  # not recorded (yet): refused, never made up
        rate = recording.rates[channel]
        values = _channel_values(channel, *self._block(recording, channel, index, count))
        return {"data_type": "analog", "timestamp": index / rate, "interval": 1.0 / rate, "values": values.tolist()}

    def _data_index(self, conn: Connection, req: Request) -> dict[str, Any]:
        recording, channel, recorded = self._channel_of(req)
        timestamp = req.number("timestamp", 0.0)
        return {"index": min(math.floor(timestamp * recording.rates[channel] + COUNT_EPSILON), max(recorded - 1, 0))}

    def _statistics(self, conn: Connection, req: Request) -> dict[str, Any]:
        recording, channel, recorded = self._channel_of(req)
        start, rate = req.number("from", 0.0), recording.rates[channel]
        first = math.floor(start * rate + COUNT_EPSILON)
        end = min(math.ceil(req.number("to", 0.0) * rate - COUNT_EPSILON), recorded)
        if end <= first:
            raise invalid("from", start)
        low, high, total, energy = math.inf, -math.inf, 0.0, 0.0
        for index in range(first, end, STATS_CHUNK):
            volts, amps = self._block(recording, channel, index, min(STATS_CHUNK, end - index))
            values = _channel_values(channel, volts, amps)
            low, high = min(low, float(values.min())), max(high, float(values.max()))
            total, energy = total + float(values.sum()), energy + float(np.sum(volts * amps)) / rate
        return {"min": low, "max": high, "average": total / (end - first), "energy": energy}

    # --- the command table ---------------------------------------------------------------------
    def _command_table(self) -> dict[str, Handler]:
        def no_project() -> None:
            raise failure("no project is open (otii_create_project)")

        return {
            "otii_is_logged_in": lambda conn, req: {"logged_in": self.logged_in},
            "otii_login": lambda conn, req: self._log_in(conn, req, True),
            "otii_logout": lambda conn, req: self._log_in(conn, req, False),
            "otii_get_licenses": self._licenses,
            "otii_reserve_license": lambda conn, req: self._license(conn, req, True),
            "otii_return_license": lambda conn, req: self._license(conn, req, False),
            "otii_has_license": lambda conn, req: {"has_license": req.get("license_type", str) == "Automation"
                                                   and self.license_holder is not None},
            "otii_get_devices": self._devices,
            "otii_get_device_id": self._device_id,
            "otii_create_project": self._create_project,
            "otii_get_active_project": lambda conn, req: {"project_id": self.project.id if self.project else -1},
            "arc_get_version": lambda conn, req: {"hw_version": HW_VERSION, "fw_version": FW_VERSION},
            "arc_is_connected": lambda conn, req: {"connected": True},
            "arc_set_main": self._setter("main", lambda req: req.get("enable", bool)),
            "arc_get_main": self._getter("value", "main"),
            "arc_set_main_voltage": self._setter("main_voltage", lambda req: req.number("value", *MAIN_VOLTAGE_V)),
            "arc_get_main_voltage": self._getter("value", "main_voltage"),
            "arc_set_max_current": self._setter("max_current", lambda req: req.number("value", *MAX_CURRENT_A)),
            "arc_get_max_current": self._getter("value", "max_current"),
            "arc_set_range": self._setter("current_range", lambda req: req.choice("range", RANGES)),
            "arc_get_range": self._getter("range", "current_range"),
            "arc_set_power_regulation": self._setter("regulation", lambda req: req.choice("mode", REGULATIONS)),
            "arc_set_src_cur_limit_enabled": self._setter("src_cur_limit", lambda req: req.get("enable", bool)),
            "arc_get_src_cur_limit_enabled": self._getter("enabled", "src_cur_limit"),
            "arc_enable_channel": self._enable_channel,
            "arc_set_channel_samplerate": self._set_rate,
            "arc_get_channel_samplerate": lambda conn, req: {"value": self.rates[self._main_channel(req)]},
            "arc_get_value": self._get_value,
            "arc_add_to_project": lambda conn, req: None if self.project else no_project(),
            "arc_calibrate": self._calibrate,
            "project_close": self._close_project,
            "project_start_recording": self._start_recording,
            "project_stop_recording": self._stop_recording,
            "project_get_last_recording": self._last_recording,
            "project_get_recordings": lambda conn, req: {"recordings": [r.entry() for r in
                                                                        self._project(req).recordings.values()]},
            "recording_get_channel_data_count": self._data_count,
            "recording_get_channel_data": self._data,
            "recording_get_channel_data_index": self._data_index,
            "recording_get_channel_statistics": self._statistics,
            "recording_is_running": lambda conn, req: {"running": self._recording(req) is self.running},
            "recording_delete": self._delete_recording,
        }


def _channel_values(channel: str, volts: np.ndarray, amps: np.ndarray) -> np.ndarray:
    return {"mc": amps, "mv": volts, "mp": volts * amps}[channel]


def _encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\r\n"
