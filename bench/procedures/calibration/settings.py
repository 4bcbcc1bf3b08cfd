"""Calibration settings of a station: asset tags, intervals, acceptance criteria, the reference
thermometer and the fixture's geometry. Defaults suit the emulated station; a lab writes a TOML
file (docs/production.md) and points `bench calibrate` / `bench accept` at it with
`--calibration-config FILE` or $PHONEBENCH_CALIBRATION.
"""
from __future__ import annotations

import datetime as dt
import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from phonebench.core.errors import ConfigError

ENV_VAR = "PHONEBENCH_CALIBRATION"

# Days between calibrations, per procedure: drift-prone corrections are redone more often.
DEFAULT_INTERVALS_DAYS = {
    "scope-deskew": 180.0,
    "fixture-delay": 30.0,
    "supply-zero": 7.0,
    "thermocouple-offsets": 30.0,
    "dut": 3650.0,  # per unit, at the line: its corrections live on the phone
}


@dataclass(frozen=True)
class Limits:
    """Acceptance criteria of the procedures (what a healthy instrument or fixture shows)."""

    max_skew_s: float = 100e-6  # |channel-2 skew| a deskew may correct
    fixture_delay_s: tuple[float, float] = (100e-6, 1e-3)  # 3.4 cm .. 34 cm of air
    max_delay_spread_s: float = 10e-6  # std of the loopback delay over the trials
    max_current_zero_a: float = 5e-3
    max_thermocouple_offset_c: float = 1.0
    max_offset_spread_c: float = 0.3  # std of one channel's differences to the reference (noise, a loose probe)
    ripple_onset_mv: tuple[float, float] = (15.0, 45.0)
    min_trigger_mv: float = 10.0
    max_skin_offset_c: float = 3.0


@dataclass(frozen=True)
class ReferenceThermometer:
    """The reference standard the thermocouples are compared with (itself calibrated elsewhere).

    Either the probe board's own reference input (`channel`), taped beside each thermocouple in
    turn (`points`: thermocouple -> the point the operator tapes the reference to), or a separate
    reference thermometer (`family`, `address`) whose channels sit beside the thermocouples
    (`channels`: thermocouple -> reference channel).
    """

    channel: str = "REF"
    points: dict[str, str] = field(default_factory=lambda: {"T1": "cover_a", "T2": "cover_b", "T3": "ambient"})
    family: str = ""
    address: str = ""
    channels: dict[str, str] = field(default_factory=dict)
    certificate: str = ""  # its own certificate (traceability to national standards)
    due: str = ""  # its own due date, ISO


@dataclass(frozen=True)
class CalibrationSettings:
    operator: str = ""
    humidity_pct: float | None = None  # the lab's hygrometer reading, if it records one
    asset_tags: dict[str, str] = field(default_factory=dict)  # role (scope, supply, thermal, fixture) -> tag
    intervals_days: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_INTERVALS_DAYS))
    limits: Limits = Limits()
    reference: ReferenceThermometer = ReferenceThermometer()
    fixture_path_m: float = 0.10  # documented acoustic path of the fixture (speaker -> phone -> mic)
    ambient_channel: str = "T3"  # the probe that hangs in free air
    loopback_trials: int = 8
    zero_readings: int = 20
    thermal_readings: int = 20
    skin_reference: dict[str, float] = field(default_factory=lambda: {"T1": 0.7, "T2": 0.3})
    ripple_sweep_mv: tuple[float, float, float] = (14.0, 46.0, 1.0)  # start, stop, step
    trigger_margin_mv: float = 2.0
    hysteresis_mv: float = 5.0
    unattended: bool = False  # a relay board (or wiring done beforehand) sets the loopbacks: nobody is asked
    source: Path | None = None

    def interval(self, procedure: str) -> dt.timedelta:
        return dt.timedelta(days=self.intervals_days.get(procedure, DEFAULT_INTERVALS_DAYS.get(procedure, 30.0)))

    def asset_tag(self, role: str) -> str | None:
        return self.asset_tags.get(role) or None

    def operator_name(self) -> str:
        return self.operator or os.environ.get("USER") or os.environ.get("LOGNAME") or "unknown"


def load_settings(path: str | Path | None = None) -> CalibrationSettings:
    """Settings from `path`, else $PHONEBENCH_CALIBRATION, else the defaults."""
    chosen = path or os.environ.get(ENV_VAR)
    if not chosen:
        return CalibrationSettings()
    file = Path(chosen)
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"calibration settings {file} do not exist",
                          hint=f"give an existing file (--calibration-config or ${ENV_VAR})") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"calibration settings {file}: {exc}", hint="see docs/production.md") from None
    return parse_settings(data, str(file), source=file)


_TOP = {"operator", "humidity_pct", "asset_tags", "intervals_days", "limits", "reference", "fixture_path_m",
        "ambient_channel",
        "loopback_trials", "zero_readings", "thermal_readings", "skin_reference", "ripple_sweep_mv",
        "trigger_margin_mv", "hysteresis_mv", "unattended"}


def parse_settings(data: dict[str, Any], origin: str = "<settings>", source: Path | None = None) -> CalibrationSettings:
    table = data.get("calibration", data)
    unknown = set(table) - _TOP
    if unknown:
        raise ConfigError(f"{origin}: unknown calibration setting(s) {sorted(unknown)}",
                          hint=f"known: {', '.join(sorted(_TOP))} (see docs/production.md)")
    base = CalibrationSettings()
    values: dict[str, Any] = {}
    try:
        if "unattended" in table:
            if not isinstance(table["unattended"], bool):
                raise ValueError(f"unattended must be true or false, got {table['unattended']!r}")
            values["unattended"] = table["unattended"]
        for key in ("operator", "ambient_channel"):
            if key in table:
                values[key] = str(table[key])
        for key in ("humidity_pct", "fixture_path_m", "trigger_margin_mv", "hysteresis_mv"):
            if key in table:
                values[key] = float(table[key])
        for key in ("loopback_trials", "zero_readings", "thermal_readings"):
            if key in table:
                values[key] = int(table[key])
                if values[key] < 2:
                    raise ValueError(f"{key} must be at least 2")
        if "asset_tags" in table:
            values["asset_tags"] = {str(k): str(v) for k, v in dict(table["asset_tags"]).items()}
        if "intervals_days" in table:
            values["intervals_days"] = {**base.intervals_days,
                                        **{str(k): float(v) for k, v in dict(table["intervals_days"]).items()}}
        if "skin_reference" in table:
            values["skin_reference"] = {str(k): float(v) for k, v in dict(table["skin_reference"]).items()}
        if "ripple_sweep_mv" in table:
            start, stop, step = (float(x) for x in table["ripple_sweep_mv"])
            if not 0 <= start < stop or step <= 0:
                raise ValueError("ripple_sweep_mv must be [start, stop, step] with 0 <= start < stop, step > 0")
            values["ripple_sweep_mv"] = (start, stop, step)
        if "limits" in table:
            limits: dict[str, Any] = {k: (tuple(float(x) for x in v) if isinstance(v, list) else float(v))
                                      for k, v in dict(table["limits"]).items()}  # from TOML: Limits' fields
            values["limits"] = replace(base.limits, **limits)
        if "reference" in table:
            ref = dict(table["reference"])
            unknown_ref = set(ref) - {"channel", "points", "family", "address", "channels", "certificate", "due"}
            if unknown_ref:
                raise ValueError(f"unknown [calibration.reference] key(s) {sorted(unknown_ref)}")
            default = ReferenceThermometer()
            values["reference"] = ReferenceThermometer(
                channel=str(ref.get("channel", default.channel)),
                points={str(k): str(v) for k, v in dict(ref.get("points", default.points)).items()},
                family=str(ref.get("family", "")), address=str(ref.get("address", "")),
                channels={str(k): str(v) for k, v in dict(ref.get("channels", {})).items()},
                certificate=str(ref.get("certificate", "")), due=str(ref.get("due", "")))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{origin}: {exc}", hint="see docs/production.md for the calibration settings") from None
    return replace(base, source=source, **values)
