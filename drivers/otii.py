"""Qoitech Otii Arc / Ace power monitor, through Qoitech's own client (`otii_tcp_client`, unchanged).

The Otii is scripted through the TCP server of the Otii application (Otii Server, default port
1905): the station file's address is `host:port`. The driver logs in and reserves an Automation
license the way Qoitech's client does (LicensingMode.AUTO: credentials.json or OTII_USERNAME /
OTII_PASSWORD when the server is not logged in yet) and returns it on close.

Where the Otii differs from the N6705C the role's interface absorbs it:
- no digitizer with a trigger: a sweep is a recording. `arm_digitizer` starts one, `trigger`
  waits until its pre-trigger samples are in and marks the sample it has reached, `fetch` waits
  until the window after that mark is recorded, stops and reads it, then deletes the recording
  (a lab's project would otherwise grow all night). The mark is the recording's sample count when
  the trigger returned, so the server's delivery lag (its data arrives in batches) shifts the
  window early by up to one batch;
- sample rates are a fixed list: `digitizer_interval` names the one a request gets (the lowest
  rate at least as fast as asked, else the fastest);
- no ARB ripple and no series resistance (`features`); the main output cuts off above its max
  current unless the source current limit (constant current) is on, which the driver switches on
  so an overload limits as on the N6705C.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
from otii_tcp_client import otii_client, otii_connection, otii_exception

from phonebench.core.errors import ConfigError, InstrumentError
from . import locks
from .power import SupplyAccuracy, SupplyFeatures, require_quantities
from .trace import Trace
from .visa import InstrumentIdentity

log = logging.getLogger(__name__)

DEFAULT_PORT = 1905
# Main current / voltage sample rates this driver chooses from (S/s); the Arc's own list.
SAMPLE_RATES = (1000, 2000, 4000, 10000, 20000, 50000)
CHANNELS = {"current": "mc", "voltage": "mv"}
# Otii Arc, high current range (a phone draws well above the low range's 19 mA).
ARC_ACCURACY = SupplyAccuracy(0.001, 150e-6, 0.001, 1.5e-3, "Otii Arc: +-(0.1 % + 150 uA), +-(0.1 % + 1.5 mV)")
RECORDING_MARGIN_S = 30.0  # a recording may lag real time by this much before the driver gives up
START_HINT = ("start the Otii application's TCP server (Otii 3: Settings > Automation; or `otii_server`) and check "
              "the station file's `host:port`")
T = TypeVar("T")


class QoitechOtii:
    """One Otii Arc or Ace behind an Otii TCP server; `device` picks it by name or id when several are attached."""

    role = "supply"
    family = "qoitech-otii"
    accuracy = ARC_ACCURACY
    features = SupplyFeatures(ripple=False, series_resistance=False)

    def __init__(self, address: str, device: str = "", timeout_s: float = 10.0, poll_s: float = 0.02) -> None:
        self.address = address
        self.host, self.port = _host_port(address)
        self.name = f"supply {self.family} at {address}"
        self.timeout_s, self.poll_s = timeout_s, poll_s
        self._client: otii_client.OtiiClient | None = None
        self._recording: Any = None
        self._armed: tuple[int, int, int, tuple[str, ...]] | None = None  # points, rate, pretrigger, quantities
        self._mark: int | None = None
        self._lock: Any = locks.acquire(address, self.name)
        try:
            self._open(device)
        except BaseException:
            self.close()
            raise

    # --- opening ---------------------------------------------------------------------------------
    def _open(self, device: str) -> None:
        self._client = otii_client.OtiiClient()
        try:
            self._otii = self._client.connect(host=self.host, port=self.port,
                                              try_for_seconds=max(1, int(self.timeout_s)))
        except OSError as exc:
            self._client = None
            raise InstrumentError(f"{self.name}: no Otii server answers ({exc.strerror or exc})",
                                  hint=START_HINT) from None
        except otii_client.OtiiClientException as exc:
            raise InstrumentError(f"{self.name}: no Otii Automation license could be reserved ({exc})",
                                  hint="log the Otii server in (credentials.json or OTII_USERNAME/OTII_PASSWORD) "
                                       "with an account holding a free Automation license") from None
        except otii_exception.Otii_Exception as exc:
            raise InstrumentError(f"{self.name}: the Otii server refused the session: {exc.message}",
                                  hint=START_HINT) from None
        self.arc = self._pick(self._call("list its devices", self._otii.get_devices, 3), device)
        version = self._call("read the device's version", self.arc.get_version)
        self.identity = InstrumentIdentity("Qoitech", f"Otii {self.arc.type}", self.arc.id,
                                           str(version.get("fw_version", "")), self.address, self.role, self.family,
                                           {"hw_version": str(version.get("hw_version", "")), "name": self.arc.name})
        label = self.arc.type if self.arc.name == self.arc.type else f"{self.arc.type} {self.arc.name}"
        self.name = f"supply {self.family} at {self.address} (Otii {label})"
        self._call("choose auto-ranging", self.arc.set_range, "low")
        self._call("switch the source current limit on", self.arc.set_src_cur_limit_enabled, True)
        self._project = self._active_project()
        log.info("%s is %s", self.name, self.identity)

    def _pick(self, devices: list[Any], wanted: str) -> Any:
        names = ", ".join(f"{d.name} ({d.id})" for d in devices) or "none"
        chosen = [d for d in devices if wanted in (d.name, d.id)] if wanted else devices
        if len(chosen) == 1:
            return chosen[0]
        if not devices:
            raise InstrumentError(f"{self.name}: the Otii server lists no Arc or Ace",
                                  hint="plug the Otii into the server's host (USB) and check it shows in the Otii app")
        raise ConfigError(f"{self.name}: device {wanted!r} is not one of: {names}" if wanted
                          else f"{self.name}: several Otii devices ({names})",
                          hint="set the supply's `device` option in the station file to one name or id")

    def _active_project(self) -> Any:
        try:
            return self._otii.get_active_project()
        except Exception:  # the client raises its own OtiiException when none is open
            return self._call("create a project", self._otii.create_project)

    def _call(self, what: str, function: Callable[..., T], *args: Any) -> T:
        """One client call; the server's refusals and a lost link become InstrumentError naming both."""
        try:
            return function(*args)
        except otii_exception.Otii_Exception as exc:
            raise InstrumentError(f"{self.name}: could not {what}: {exc.type}: {exc.message}",
                                  hint="the Otii refused the request; check the value against its ranges") from None
        except (otii_connection.DisconnectedException, OSError) as exc:
            raise InstrumentError(f"{self.name}: lost the Otii server while trying to {what} ({exc or 'closed'})",
                                  hint=START_HINT) from None

    # --- output ------------------------------------------------------------------------------------
    def output(self, on: bool) -> None:
        self._call("switch the main output", self.arc.set_main, bool(on))

    def set_voltage(self, volts: float) -> None:
        self._call(f"set the main voltage to {volts:g} V", self.arc.set_main_voltage, float(volts))

    def set_current_limit(self, amps: float) -> None:
        self._call(f"set the max current to {amps:g} A", self.arc.set_max_current, float(amps))

    def battery_emulation(self, on: bool) -> None:
        """The Arc sources as a stiff supply (power box); its battery emulator needs a battery
        profile and a Battery Toolbox license, which the bench does not use."""
        self._call("set voltage regulation", self.arc.set_power_regulation, "voltage")

    def set_output_resistance(self, ohms: float | None) -> None:
        if ohms:
            raise InstrumentError(f"{self.name}: cannot put {ohms:g} ohm in series with its output",
                                  hint="the check should ask `features.series_resistance` first")

    def set_ripple(self, amplitude_v: float, frequency_hz: float, offset_v: float | None = None) -> None:
        raise InstrumentError(f"{self.name}: has no arbitrary-waveform source for a ripple",
                              hint="ripple checks need a supply with `features.ripple` (e.g. keysight-n6705c)")

    def start_ripple(self) -> None:
        self.set_ripple(0.0, 0.0)

    def stop_ripple(self) -> None:
        """Nothing runs: stopping is always true."""

    # --- meters ------------------------------------------------------------------------------------
    def measure_voltage(self) -> float:
        return float(self._call("read the main voltage", self.arc.get_value, "mv"))

    def measure_current(self) -> float:
        return float(self._call("read the main current", self.arc.get_value, "mc"))

    # --- recordings as sweeps ------------------------------------------------------------------------
    def digitizer_interval(self, interval_s: float) -> float:
        return 1.0 / _rate_for(interval_s)

    def arm_digitizer(self, points: int, interval_s: float, pretrigger_points: int = 0,
                      quantities: Sequence[str] = ("current", "voltage")) -> None:
        require_quantities(self.name, quantities, tuple(CHANNELS))
        if points < 1 or pretrigger_points < 0 or pretrigger_points > points:
            raise ConfigError(f"{self.name}: {points} points with {pretrigger_points} before the trigger",
                              hint="points >= 1 and 0 <= pretrigger_points <= points")
        rate = _rate_for(interval_s)
        self._end_recording()
        for quantity, channel in CHANNELS.items():
            self._call(f"enable channel {channel}", self.arc.enable_channel, channel, quantity in quantities)
            if quantity in quantities:
                self._call(f"set channel {channel} to {rate} S/s", self.arc.set_channel_samplerate, channel, rate)
        self._call("start a recording", self._project.start_recording)
        self._recording = self._call("find the new recording", self._project.get_last_recording)
        self._armed, self._mark = (points, rate, pretrigger_points, tuple(quantities)), None

    def trigger(self) -> None:
        """Mark the recording's current sample as t = 0, once its pre-trigger samples are in."""
        points, rate, pretrigger, quantities = self._require_armed()
        self._mark = max(pretrigger, self._await_samples(pretrigger, quantities[0], rate))

    def fetch(self) -> Trace:
        points, rate, pretrigger, quantities = self._require_armed()
        if self._mark is None:
            raise InstrumentError(f"{self.name}: fetch before trigger", hint="arm, trigger, then fetch")
        start = self._mark - pretrigger
        self._await_samples(start + points, quantities[0], rate)
        self._call("stop the recording", self._project.stop_recording)
        arrays = {q: self._samples(CHANNELS[q], start, points, rate) for q in quantities}
        self._end_recording()
        t = (np.arange(points) - pretrigger) / rate
        return Trace(t, 1.0 / rate, pretrigger, arrays.get("current"), arrays.get("voltage"), self.name)

    def digitize(self, points: int, interval_s: float, pretrigger_points: int = 0,
                 quantities: Sequence[str] = ("current", "voltage")) -> Trace:
        self.arm_digitizer(points, interval_s, pretrigger_points, quantities)
        self.trigger()
        return self.fetch()

    def _require_armed(self) -> tuple[int, int, int, tuple[str, ...]]:
        if self._armed is None or self._recording is None:
            raise InstrumentError(f"{self.name}: no recording armed", hint="arm, trigger, then fetch")
        return self._armed

    def _await_samples(self, wanted: int, quantity: str, rate: int) -> int:
        """Poll the recording until it holds `wanted` samples; returns its count then."""
        channel = CHANNELS[quantity]
        deadline = time.monotonic() + wanted / rate + RECORDING_MARGIN_S
        while True:
            count = int(self._call("count the recorded samples", self._recording.get_channel_data_count,
                                   self.arc.id, channel))
            if count >= wanted:
                return count
            if time.monotonic() > deadline:
                raise InstrumentError(f"{self.name}: the recording holds {count} of {wanted} samples after "
                                      f"{wanted / rate + RECORDING_MARGIN_S:g} s",
                                      hint="the Otii stopped delivering data: check its USB link and the Otii app")
            time.sleep(min(self.poll_s, (wanted - count) / rate))

    def _samples(self, channel: str, start: int, points: int, rate: int) -> np.ndarray:
        data = self._call(f"read channel {channel}", self._recording.get_channel_data, self.arc.id, channel,
                          start, points)
        values = np.asarray(data.get("values", []), dtype=np.float32)
        interval = float(data.get("interval", 0.0))
        if values.size != points or not np.isclose(interval, 1.0 / rate, rtol=1e-6):
            raise InstrumentError(f"{self.name}: channel {channel} gave {values.size} samples at {interval:g} s, "
                                  f"asked {points} at {1.0 / rate:g} s",
                                  hint="the recording's settings changed under the driver; re-arm")
        return values

    def _end_recording(self) -> None:
        recording, self._recording = self._recording, None
        if recording is None:
            return
        try:
            if recording.is_running():
                self._project.stop_recording()
            recording.delete()
        except (otii_exception.Otii_Exception, otii_connection.DisconnectedException, OSError) as exc:
            log.warning("%s: could not remove recording %s: %s", self.name, getattr(recording, "id", "?"), exc)

    # --- closing -----------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop and remove the driver's recording, return the license, release the lock (idempotent)."""
        client, self._client = self._client, None
        if client is not None:
            if getattr(self, "_project", None) is not None:
                self._end_recording()
            try:
                client.disconnect()
            except Exception as exc:  # the server may already be gone; the lock must still go
                log.warning("%s: disconnect: %s", self.name, exc)
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()

    def __enter__(self) -> QoitechOtii:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host:
        return address, DEFAULT_PORT
    if not port.isdigit() or "::" in address:
        raise ConfigError(f"Otii address {address!r} is not host:port",
                          hint=f"write the Otii server's address as e.g. \"192.168.1.20:{DEFAULT_PORT}\"")
    return host, int(port)


def _rate_for(interval_s: float) -> int:
    if not interval_s > 0:
        raise ConfigError(f"sample interval {interval_s!r} s is not positive", hint="ask for an interval > 0")
    faster = [rate for rate in SAMPLE_RATES if rate * interval_s >= 1.0 - 1e-9]
    return faster[0] if faster else SAMPLE_RATES[-1]
