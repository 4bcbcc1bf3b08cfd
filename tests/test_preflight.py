"""Station preflight (`bench station check`, and `bench run`'s gate): a ready emulated station,
and stations with a wrong address, a missing instrument, an expired calibration, USB instruments
without pyusb and a USB phone behind a running adb server."""
from __future__ import annotations

import dataclasses
import datetime as dt
import socket
from pathlib import Path

import pytest

from phonebench.bench.procedures import preflight
from phonebench.bench.procedures.calibration.records import Criterion, Reading, conclude, utcnow
from phonebench.bench.procedures.calibration.settings import CalibrationSettings
from phonebench.bench.procedures.calibration.station import instrument_equipment, open_book
from phonebench.bench.cli import main
from phonebench.core.station import EmulatedConfig, EmulatedPhoneConfig, InstrumentConfig, StationConfig
from phonebench.emulation.station import EmulatedStation


@pytest.fixture(scope="module")
def emulated():
    config = EmulatedConfig(phones=[EmulatedPhoneConfig(serial="EMU-PRE")])
    with EmulatedStation(config) as station:
        yield station


@pytest.fixture()
def station(emulated, tmp_path) -> StationConfig:
    return emulated.merge_into(StationConfig(name="pre", source=None, results_dir=tmp_path))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _write_station(path: Path, station: StationConfig) -> Path:
    lines = ['[station]', 'name = "pre"', 'results_dir = "out"']
    for dut in station.duts:
        lines += ["[[dut]]", f'name = "{dut.name}"', f'adb = "{dut.address}"']
    for role, cfg in station.instruments.items():
        lines += [f"[instruments.{role}]", f'family = "{cfg.family}"', f'address = "{cfg.address}"']
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_the_emulated_station_is_ready(station):
    report = preflight.run_preflight(station, CalibrationSettings())
    assert report.ok and not report.unreachable, report.render()
    text = report.render()
    thermal = next(i for i in report.items if i.subject.startswith("thermal keysight-daq970a"))
    assert any("DAQ970A" in f for f in thermal.found) and "modules/options: slot1 DAQM901A" in thermal.found
    assert "calibration: uncalibrated" in thermal.found and "never calibrated" in thermal.warnings[0]
    assert "phone EMU-PRE" in text and "serial EMU-PRE" in text
    assert "VISA: pyvisa" in text and "USB instruments:" in text
    assert "ready: every" not in text  # never "ready" while instruments are uncalibrated without saying so
    assert text.endswith("ready to run, but 3 instrument(s) are uncalibrated or due: results will be marked so; "
                         "next: `bench calibrate`")
    assert "run `bench calibrate`" in thermal.warnings[0]
    phones_only = preflight.run_preflight(station, CalibrationSettings(), roles=set())
    assert phones_only.render().endswith("ready: every phone and instrument answered")


def test_wrong_address_and_missing_instrument_are_listed_to_fix(station):
    scope = station.instruments["scope"]
    instruments = dict(station.instruments)
    instruments["thermal"] = InstrumentConfig("thermal", "keysight-daq970a", scope.address)  # the scope answers
    instruments["supply"] = InstrumentConfig("supply", "keysight-n6705c",
                                             f"TCPIP::127.0.0.1::{_free_port()}::SOCKET")  # nothing there
    report = preflight.run_preflight(dataclasses.replace(station, instruments=instruments), CalibrationSettings())
    assert not report.ok
    assert {i.subject.split()[0] for i in report.unreachable} == {"thermal", "supply"}
    problems = "\n".join(report.problems)
    assert "not a DAQ970A" in problems and "DSOX3024T" in problems
    assert f"supply keysight-n6705c at {instruments['supply'].address}" in problems
    assert "to fix:" in report.render()
    subject = f"supply keysight-n6705c at {instruments['supply'].address}"
    assert all(p.count(subject) <= 1 for p in report.problems), report.problems  # no prefix said twice


def test_a_missing_serial_device_is_named(station):
    instruments = {"thermal": InstrumentConfig("thermal", "generic-ascii", "/dev/ttyUSB-nonexistent")}
    report = preflight.run_preflight(dataclasses.replace(station, instruments=instruments, duts=[]),
                                     CalibrationSettings())
    assert "serial device /dev/ttyUSB-nonexistent does not exist" in report.problems[0]


def test_an_expired_calibration_is_a_problem(station, emulated):
    from phonebench.drivers.registry import open_instrument

    cfg = station.instruments["thermal"]
    driver = open_instrument("thermal", cfg.family, cfg.address)
    identity = driver.identity
    driver.close()
    settings = CalibrationSettings()
    long_ago = utcnow() - dt.timedelta(days=90)
    record = conclude(instrument_equipment("thermal", identity, settings), "thermocouple-offsets", "1.0",
                      [Reading("T1_offset_c", 0.3, "degC")], {"T1_offset_c": 0.3},
                      [Criterion("T1_offset_c", "degC", max_abs=1.0)], dt.timedelta(days=30), performed=long_ago)
    book = open_book(station.database, station.results_dir)
    try:
        book.save(record)
    finally:
        book.store.close()
    report = preflight.run_preflight(station, settings)
    thermal = next(i for i in report.items if i.subject.startswith("thermal"))
    assert thermal.reachable and not thermal.ok
    assert any("expired on" in p and "bench calibrate" in p for p in thermal.problems)
    assert f"calibration: expired, due {record.due:%Y-%m-%d}" in thermal.found
    assert not report.unreachable  # an expired calibration does not stop a run; it marks its results


def test_usb_instruments_without_pyusb(station, monkeypatch):
    monkeypatch.setattr(preflight, "usb_instruments_usable", lambda: (False, "pyusb is not installed"))
    usb = {"scope": InstrumentConfig("scope", "keysight-infiniivision", "USB0::0x2A8D::0x1770::MY5810::INSTR")}
    item = preflight.check_host(dataclasses.replace(station, instruments=usb))
    assert item.problems == ["USB instruments configured (scope at USB0::0x2A8D::0x1770::MY5810::INSTR) but "
                             "pyusb is not installed"]
    assert preflight.check_host(station).ok  # no USB instrument configured: only a note


def test_usb_phone_behind_a_running_adb_server(monkeypatch):
    from phonebench.core.station import DutConfig

    monkeypatch.setattr(preflight, "adb_server_running", lambda port=None: True)
    item = preflight.check_phone(None, DutConfig("bay2", "usb:R5CT5678"))
    assert not item.reachable and "adb kill-server" in item.problems[0]


def test_adb_server_detection_sees_a_listener():
    with socket.create_server(("127.0.0.1", 0)) as server:
        assert preflight.adb_server_running(server.getsockname()[1])
    assert not preflight.adb_server_running(_free_port())


def test_bench_station_check_exit_codes(station, tmp_path, capsys):
    good = _write_station(tmp_path / "good.toml", station)
    assert main(["station", "check", "--station", str(good)]) == 0
    assert f"next: `bench calibrate --station {good}`" in capsys.readouterr().out
    broken = dict(station.instruments)
    broken["thermal"] = InstrumentConfig("thermal", "keysight-daq970a", f"TCPIP::127.0.0.1::{_free_port()}::SOCKET")
    bad = _write_station(tmp_path / "bad.toml", dataclasses.replace(station, instruments=broken))
    assert main(["station", "check", "--station", str(bad), "--no-phones"]) == 1
    out = capsys.readouterr().out
    assert "[FAIL] thermal keysight-daq970a" in out and "to fix:" in out


def test_bench_run_stops_before_any_test_when_an_instrument_is_unreachable(station, tmp_path, capsys):
    broken = dict(station.instruments)
    broken["thermal"] = InstrumentConfig("thermal", "keysight-daq970a", f"TCPIP::127.0.0.1::{_free_port()}::SOCKET")
    bad = _write_station(tmp_path / "bad.toml", dataclasses.replace(station, instruments=broken))
    assert main(["run", "--station", str(bad), "-q", "--run-id", "stopped"]) == 2
    err = capsys.readouterr().err
    assert "stopped before any test" in err and "--no-preflight" in err and "Traceback" not in err
    assert not (tmp_path / "out" / "stopped").exists()


def test_the_gate_checks_only_the_roles_the_selected_tests_need(station, tmp_path):
    broken = dict(station.instruments)
    broken["supply"] = InstrumentConfig("supply", "keysight-n6705c", f"TCPIP::127.0.0.1::{_free_port()}::SOCKET")
    bad = _write_station(tmp_path / "bad.toml", dataclasses.replace(station, instruments=broken))
    assert preflight.gate(bad, roles=set()) == (True, [])  # e.g. -k identity: no instrument at all
    go, lines = preflight.gate(bad, roles={"scope"})
    assert go and not any("supply" in line for line in lines)
    assert any("bench calibrate --station" in line for line in lines)  # the scope is uncalibrated
    go, lines = preflight.gate(bad, roles={"supply"})
    assert not go and "--no-preflight" in lines[-1] and "the selected tests need" in lines[-1]
