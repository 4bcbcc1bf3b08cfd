"""The emulated runtime's persistent settings: `llmrt config get [KEY]` / `llmrt config set KEY VALUE`.

Settings live on the device in /data/vendor/llm/config.json (only keys that were set; the rest
take their defaults), written under a temporary name and renamed, so a crash never leaves half a
file. Production calibration writes `redundancy.trigger_mv` and `thermal.skin_offset_c` here.
An unreadable file is not fatal: the runtime runs on defaults and `config get` says why.
"""
from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from .filesystem import DeviceFileSystem

log = logging.getLogger(__name__)

CONFIG_PATH = "/data/vendor/llm/config.json"


class ConfigValueError(ValueError):
    """A key or value `llmrt config set` refuses (answered with status 2)."""


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in allowed:
            raise ConfigValueError(f"expected one of {', '.join(allowed)}, got {text!r}")
        return text
    return parse


def _number(lo: float, hi: float) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise ConfigValueError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value) or not lo <= value <= hi:
            raise ConfigValueError(f"expected a number in [{lo:g}, {hi:g}], got {text!r}")
        return value
    return parse


@dataclass(frozen=True)
class ConfigKey:
    name: str
    default: Any
    parse: Callable[[str], Any]
    doc: str


KEYS: dict[str, ConfigKey] = {k.name: k for k in (
    ConfigKey("redundancy.mode", "auto", _choice("auto", "on", "off"),
              "voltage redundancy: auto (engage on sensed ripple), on (always), off (never)"),
    ConfigKey("redundancy.trigger_mv", 30.0, _number(0.5, 1000.0),
              "auto mode engages when the sensed ripple amplitude exceeds this, mV"),
    ConfigKey("redundancy.release_mv", 25.0, _number(0.0, 1000.0),
              "auto mode releases below this, mV (hysteresis; at most trigger_mv takes effect)"),
    ConfigKey("thermal.skin_offset_c", 0.0, _number(-20.0, 20.0),
              "calibration offset added to the skin sensor's reading, degC"),
    ConfigKey("npu.perf_profile", "balanced", _choice("power_saver", "balanced", "burst"),
              "NPU clock: power_saver 800 MHz, balanced 1100 MHz, burst 1400 MHz"),
)}

PERF_PROFILE_MHZ = {"power_saver": 800.0, "balanced": 1100.0, "burst": 1400.0}


class RuntimeConfig:
    """Effective settings = defaults overridden by what config.json holds."""

    def __init__(self, fs: "DeviceFileSystem", path: str = CONFIG_PATH) -> None:
        self.fs = fs
        self.path = path

    def _stored(self) -> tuple[dict[str, Any], str | None]:
        """(valid stored overrides, problem with the file or None)."""
        if not self.fs.exists(self.path):
            return {}, None
        try:
            data = json.loads(self.fs.read(self.path))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return {}, f"{self.path} is not JSON ({exc}); running on defaults"
        if not isinstance(data, dict):
            return {}, f"{self.path} does not hold a JSON object; running on defaults"
        stored, problems = {}, []
        for name, value in data.items():
            key = KEYS.get(name)
            try:
                if key is None:
                    raise ConfigValueError("unknown key")
                stored[name] = key.parse(value if isinstance(value, str) else json.dumps(value))
            except ConfigValueError as exc:
                problems.append(f"{name}: {exc}")
        return stored, (f"{self.path}: ignored {'; '.join(problems)}" if problems else None)

    def values(self) -> dict[str, Any]:
        stored, problem = self._stored()
        if problem:
            log.warning("%s", problem)
        return {name: stored.get(name, key.default) for name, key in KEYS.items()}

    def get(self, name: str) -> Any:
        return self.values()[self.key(name).name]

    def problem(self) -> str | None:
        return self._stored()[1]

    @staticmethod
    def key(name: str) -> ConfigKey:
        try:
            return KEYS[name]
        except KeyError:
            raise ConfigValueError(f"unknown config key {name!r} (keys: {', '.join(KEYS)})") from None

    def set(self, name: str, text: str) -> tuple[Any, Any]:
        """Validate and persist one value; returns (new value, previous value)."""
        key = self.key(name)
        try:
            value = key.parse(text)
        except ConfigValueError as exc:
            raise ConfigValueError(f"{name}: {exc}") from None
        stored, _ = self._stored()
        previous = stored.get(name, key.default)
        stored[name] = value
        staging = self.path + ".tmp"
        self.fs.write(staging, (json.dumps(stored, indent=1, sort_keys=True) + "\n").encode())
        self.fs.rename(staging, self.path)
        return value, previous
