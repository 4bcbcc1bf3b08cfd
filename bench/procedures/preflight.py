"""Station preflight: before a run, reach every phone and instrument of a station and say what
is wrong in words an operator can act on.

For each instrument: its identity (*IDN? or the model's own), installed modules / options, its
calibration state and due date from the calibration book, whether another bench process holds it
(phonebench.drivers.locks). For each phone: ADB reachability, serial and model, and for USB phones whether a
running adb server would take the device away from the bench. For the host: the VISA library and
backend in use, and whether USB instruments are usable (pyvisa-py needs pyusb and libusb).

`bench station check` prints it; `bench run --station FILE` runs it first and stops before any
test when an instrument cannot be reached (`Preflight.unreachable`).
"""
from __future__ import annotations

import contextlib
import datetime as dt
import importlib
import logging
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from phonebench.core.errors import BenchError
from phonebench.core.station import DutConfig, InstrumentConfig, StationConfig

if TYPE_CHECKING:  # the calibration book and the owner are opened where they are used
    from ..station.owner import StationOwner
    from .calibration.book import CalibrationBook
    from .calibration.settings import CalibrationSettings
    from .calibration.state import RoleCalibration
    import pytest

log = logging.getLogger(__name__)

ADB_SERVER_PORT = 5037
DUE_SOON_DAYS = 7
CALIBRATE = "`bench calibrate`"  # in every calibration line that asks for one


@dataclass
class Item:
    """One thing the preflight looked at."""

    subject: str  # "thermal keysight-daq970a at TCPIP::...", "phone bay1 at 10.0.0.20:5555", "host"
    found: list[str] = field(default_factory=list)  # what it is (identity, options, calibration)
    problems: list[str] = field(default_factory=list)  # what must be fixed before a run
    warnings: list[str] = field(default_factory=list)  # worth knowing, not blocking
    reachable: bool = True

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass
class Preflight:
    station: str
    items: list[Item] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(i.ok for i in self.items)

    @property
    def problems(self) -> list[str]:
        return [f"{i.subject}: {p}" for i in self.items for p in i.problems]

    @property
    def unreachable(self) -> list[Item]:
        """Phones and instruments that did not answer: a run must not start without them."""
        return [i for i in self.items if not i.reachable]

    @property
    def to_calibrate(self) -> list[str]:
        """Instruments uncalibrated, expired or due soon: `bench calibrate` is the next step."""
        return [i.subject for i in self.items if any(CALIBRATE in t for t in i.problems + i.warnings)]

    def render(self, station_file: str | Path | None = None) -> str:
        lines = [f"station {self.station}"]
        for item in self.items:
            mark = "ok  " if item.ok else "FAIL"
            lines.append(f"  [{mark}] {item.subject}")
            lines += [f"         {text}" for text in item.found]
            lines += [f"         warning: {text}" for text in item.warnings]
            lines += [f"         problem: {text}" for text in item.problems]
        if self.problems:
            lines.append("to fix:")
            lines += [f"  - {p}" for p in self.problems]
        calibrate = f"bench calibrate{f' --station {station_file}' if station_file else ''}"
        if not self.problems and self.to_calibrate:
            lines.append(f"ready to run, but {len(self.to_calibrate)} instrument(s) are uncalibrated or due: "
                         f"results will be marked so; next: `{calibrate}`")
        elif not self.problems:
            lines.append("ready: every phone and instrument answered"
                         + (f"; next: `bench run --station {station_file}`" if station_file else ""))
        elif self.to_calibrate:
            lines.append(f"then: `{calibrate}`")
        return "\n".join(lines)


# --- host --------------------------------------------------------------------------------------
def _version(module: str) -> str | None:
    try:
        return getattr(importlib.import_module(module), "__version__", "installed")
    except ImportError:
        return None


def usb_instruments_usable() -> tuple[bool, str]:
    """(usable, why): pyvisa-py reaches USBTMC instruments through pyusb and a libusb backend."""
    if _version("usb") is None:
        return False, "pyusb is not installed (pip install pyusb; and the libusb-1.0 system library)"
    try:
        import usb.backend.libusb1 as libusb1

        if libusb1.get_backend() is None:
            return False, "pyusb finds no libusb-1.0 library (apt install libusb-1.0-0)"
    except Exception as exc:  # a broken libusb install raises its own errors
        return False, f"pyusb cannot load libusb: {exc}"
    return True, "pyusb and libusb-1.0 present"


def check_host(station: StationConfig) -> Item:
    item = Item("host")
    item.found.append(f"VISA: pyvisa {_version('pyvisa') or 'missing'}, backend pyvisa-py "
                      f"{_version('pyvisa_py') or 'missing'} ('@py'), pyserial {_version('serial') or 'missing'}")
    usable, why = usb_instruments_usable()
    item.found.append(f"USB instruments: {'usable' if usable else 'not usable'} ({why})")
    if any(d.transport == "server" for d in station.duts):  # which adb server, or which adb starts one
        from phonebench.drivers.adb_server import default_server

        item.found.append(default_server().describe())
    usb = [f"{r} at {c.address}" for r, c in station.instruments.items() if c.address.upper().startswith("USB")]
    if usb and not usable:
        item.problems.append(f"USB instruments configured ({', '.join(usb)}) but {why}")
    return item


# --- instruments -------------------------------------------------------------------------------
def _describe_instrument(role: str, cfg: InstrumentConfig) -> str:
    return f"{role} {cfg.family} at {cfg.address}"


def _serial_path_problem(address: str) -> str | None:
    if not address.startswith("/dev/"):
        return None
    if not os.path.exists(address):
        return f"serial device {address} does not exist (unplugged, or another /dev/ttyUSB number after replugging)"
    if not os.access(address, os.R_OK | os.W_OK):
        return f"no permission on {address} (add the user to the dialout group)"
    return None


def check_instrument(role: str, cfg: InstrumentConfig,
                     calibration: Callable[[str, Any], RoleCalibration] | None = None) -> Item:
    """Open the instrument as a run would (waiting for a shared one only), describe it, close it."""
    from ..station.owner import open_configured
    from phonebench.drivers import locks

    item = Item(_describe_instrument(role, cfg))
    problem = _serial_path_problem(cfg.address)
    if problem:
        item.problems.append(problem)
        item.reachable = False
        return item
    try:
        # A shared instrument is another bay's or place's for one test at a time: wait for it as the
        # run would; any other holder is another run on this station, reported at once.
        with locks.acquire(cfg.address, item.subject, wait_s=None if cfg.shared else 0.0):
            driver = open_configured(cfg)
            try:
                identity = driver.identity
                item.found.append(f"identity: {identity}")
                if identity.options:
                    item.found.append("modules/options: " + ", ".join(f"{k} {v}" for k, v in identity.options.items()))
                channels = getattr(driver, "channels", None)
                if channels:
                    item.found.append(f"channels: {', '.join(map(str, channels))}")
                if role == "chamber":  # an open door or a tripped limit: said before the run, not in it
                    state = driver.state()
                    item.found.append(f"air: {state.air_c:.1f} °C, set point {state.set_point_c:g} °C"
                                      f"{'' if state.running else ' (standby)'}")
                    item.problems.extend(f"alarm: {alarm}" for alarm in driver.alarms())
            finally:
                driver.close()
    except locks.InstrumentBusy as exc:
        item.problems.append(str(exc).split("\n")[0])
        item.reachable = False
        return item
    except BenchError as exc:
        item.problems.append(_problem(exc, item.subject))
        item.reachable = False
        return item
    if calibration is not None:
        _calibration_lines(item, calibration(role, identity))
    return item


def _problem(exc: BenchError, *prefixes: str) -> str:
    """An error as one problem line: the subject it is listed under is not repeated, the hint
    follows as what to do."""
    text = str(exc).replace("\n  hint:", "; fix:")
    for prefix in prefixes:
        text = text.removeprefix(f"{prefix}: ")
    return text


def _calibration_lines(item: Item, role_cal: RoleCalibration) -> None:
    from .calibration.records import utcnow
    from .calibration.state import EXPIRED, FAILED, NOT_REQUIRED, UNCALIBRATED

    if role_cal.state == NOT_REQUIRED:
        item.found.append("calibration: not required for this role")
        return
    due = role_cal.due
    item.found.append(f"calibration: {role_cal.state}" + (f", due {due:%Y-%m-%d}" if due else ""))
    for proc in role_cal.procedures:
        if proc.state in (EXPIRED, FAILED):
            item.problems.append(f"{proc.problem()} — run {CALIBRATE}")
        elif proc.state == UNCALIBRATED:
            item.warnings.append(f"{proc.problem()} (results will be marked uncalibrated; run {CALIBRATE})")
    if due is not None and role_cal.state not in (EXPIRED, FAILED):
        left = due - utcnow()
        if left < dt.timedelta(days=DUE_SOON_DAYS):
            item.warnings.append(f"calibration due in {left.days} days ({due:%Y-%m-%d}); run {CALIBRATE} before then")


# --- phones ------------------------------------------------------------------------------------
def adb_server_running(port: int | None = None) -> bool:
    """Is a host adb server listening? It claims every USB phone it sees, so the bench cannot."""
    port = port or int(os.environ.get("ANDROID_ADB_SERVER_PORT", ADB_SERVER_PORT))
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.settimeout(0.3)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def check_phone(owner: StationOwner, cfg: DutConfig, connect_timeout_s: float = 5.0) -> Item:

    item = Item(f"phone {cfg.name} at {cfg.address}")
    if cfg.address.startswith("usb") and adb_server_running():
        item.problems.append(f"an adb server is running on this host (port {ADB_SERVER_PORT}) and holds USB "
                             "phones; run `adb kill-server` (and stop IDEs that restart it) before the bench")
        item.reachable = False
        return item
    try:
        with owner.connected(cfg.name, connect_timeout_s=connect_timeout_s) as phone:
            serial, model = phone.getprop("ro.serialno"), phone.getprop("ro.product.model")
            item.found.append(f"serial {serial}, model {model or '?'}, "
                              f"Android {phone.getprop('ro.build.version.release') or '?'}")
    except BenchError as exc:
        item.problems.append(_problem(exc, item.subject, f"{cfg.name} ({cfg.address})"))
        item.reachable = False
        return item
    if cfg.expected_serial and serial != cfg.expected_serial:
        item.problems.append(f"serial {serial!r} is not the expected {cfg.expected_serial!r} "
                             "(wrong unit on this fixture? check the station file)")
    return item


# --- the whole station -------------------------------------------------------------------------
def _calibration_view(station: StationConfig, settings: CalibrationSettings
                      ) -> tuple[Callable[[str, Any], RoleCalibration], CalibrationBook]:
    """(role, identity) -> RoleCalibration from the station's calibration book, and the book."""
    from .calibration.station import StationCalibrationView, open_book

    book = open_book(station.database, station.results_dir)
    view = StationCalibrationView(station.name, station.location, settings, book)
    return view.role, book


def run_preflight(station: StationConfig, settings: CalibrationSettings | None = None, *, phones: bool = True,
                  connect_timeout_s: float = 5.0, roles: set[str] | None = None) -> Preflight:
    """Check every phone and instrument of a (ready) station, or with `roles` only the instruments
    in those roles (what the selected tests need); nothing is left open."""
    from .calibration.settings import load_settings

    report = Preflight(station.name, [check_host(station)])
    calibration, book = None, None
    try:
        calibration, book = _calibration_view(station, settings or load_settings())
    except BenchError as exc:
        report.items[0].warnings.append(f"calibration state unknown: {exc}")
    # A station of several bays: every instrument of its inventory, once (a shared one serves many bays).
    instruments = station.instruments or dict(station.inventory)
    try:
        for key in sorted(k for k, inst in instruments.items() if roles is None or inst.role in roles):
            report.items.append(check_instrument(instruments[key].role, instruments[key], calibration))
    finally:
        if book is not None:
            book.store.close()
    if phones:
        from ..station.owner import StationOwner

        with StationOwner(station) as owner:
            for dut in station.duts:
                report.items.append(check_phone(owner, dut, connect_timeout_s))
    present = {i.role for i in instruments.values()}
    missing = [r for r in ("scope", "supply", "thermal", "stimulus") if r not in present and (roles is None or r in roles)]
    if missing:
        report.items[0].warnings.append(f"no {', '.join(missing)} in the station: tests needing them are skipped")
    return report


def preflight_file(path: str | Path | None, settings: CalibrationSettings | None = None,
                   **kwargs: Any) -> Preflight:
    """Preflight of a station file (None: the embedded emulated station, started for the check)."""
    from ..station.backend import open_station

    with open_station(path) as station:
        return run_preflight(station, settings, **kwargs)


def gate(path: str | Path, roles: set[str] | None = None) -> tuple[bool, list[str]]:
    """`bench run`'s preflight: (go, lines to print). No-go when an instrument the selected tests
    need (`roles`; None: every instrument of the file) is unreachable, so the run stops before any
    test. Phones are not checked here: a run records an unreachable phone's error with each of its
    tests and goes on with the others. An emulated station is checked through the station file of
    addresses its run writes (a file that still holds an [emulated] table has nothing running yet)."""
    from phonebench.core.station import load_station

    station = load_station(path)
    present = {i.role for i in (station.instruments or station.inventory).values()}
    if station.emulated is not None or (roles is not None and not roles & present):
        return True, []  # emulated: started fresh by the run; or the selected tests use no instrument
    report = run_preflight(station, phones=False, roles=roles)
    if report.unreachable:
        return False, [report.render(path),
                       f"bench run: stopped before any test: {len(report.unreachable)} instrument(s) of {path} the "
                       f"selected tests need are unreachable; fix them (`bench station check --station {path}`), "
                       "or skip this check with --no-preflight"]
    lines = [f"bench run: preflight: {problem}" for problem in report.problems]
    if report.to_calibrate:
        lines.append(f"bench run: preflight: {len(report.to_calibrate)} instrument(s) uncalibrated or due; results "
                     f"are marked so (next: `bench calibrate --station {path}`)")
    return True, lines


class PreflightGate:
    """`bench run`'s preflight as a pytest plugin: after collection (and -k / -m), it checks the
    instruments the selected tests need, and deselects every test when one is unreachable."""

    def __init__(self, path: str | Path, roles_of: Callable[[Any], set[str]]) -> None:
        self.path, self.roles_of = path, roles_of  # roles_of(item) -> the instrument roles it needs
        self.refused = False
        self.lines: list[str] = []

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        roles: set[str] = set()
        for item in session.items:
            roles |= self.roles_of(item)
        go, self.lines = gate(self.path, roles)
        reporter = session.config.pluginmanager.getplugin("terminalreporter")
        if go and reporter is not None:  # said now, before the tests, not after them
            for line in self.lines:
                reporter.write_line(line, yellow=True)
            self.lines = []
        if not go:
            self.refused = True
            session.config.hook.pytest_deselected(items=list(session.items))
            session.items[:] = []
