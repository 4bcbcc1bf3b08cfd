"""Exclusive instrument access across bench processes (phonebench.drivers.locks), and the drivers using it."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from phonebench.bench.procedures import preflight
from phonebench.bench.procedures.calibration.settings import CalibrationSettings
from phonebench.core.station import InstrumentConfig, StationConfig
from phonebench.drivers import locks
from phonebench.drivers.daq970a import KeysightDaq970a
from phonebench.drivers.thermal_generic import GenericAsciiProbe
from phonebench.emulation.instruments.daq970a import Daq970aServer
from phonebench.emulation.instruments.thermal_probe import ThermalProbeServer
from phonebench.emulation.world import World

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def lock_folder(tmp_path, monkeypatch):
    monkeypatch.setenv(locks.ENV_DIR, str(tmp_path / "locks"))
    return tmp_path / "locks"


class Holder:
    """Another bench process holding an instrument until told to let go (its stdin closes)."""

    def __init__(self, code: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", code + "\nprint('held', flush=True)\nsys.stdin.read()"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO,
                                     env={**os.environ, "PYTHONPATH": str(REPO)})
        assert self.proc.stdout.readline().strip() == "held"

    def release(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def hold(address: str) -> Holder:
    return Holder(f"import sys\nfrom phonebench.drivers.locks import acquire\nacquire({address!r}, 'the other run')")


def test_a_second_process_is_refused_with_the_holder_named():
    holder = hold("TCPIP::10.0.0.5::5025::SOCKET")
    try:
        with pytest.raises(locks.InstrumentBusy) as err:
            locks.acquire("TCPIP::10.0.0.5::5025::SOCKET", "scope at 10.0.0.5", wait_s=0.2)
        text = str(err.value)
        assert f"pid {holder.proc.pid} on " in text and "since 20" in text and "the other run" in text
        assert "waited 0.2 s" in text
        locks.acquire("TCPIP::10.0.0.6::5025::SOCKET", wait_s=0).release()  # another address is free
    finally:
        holder.release()
    locks.acquire("TCPIP::10.0.0.5::5025::SOCKET", wait_s=0).release()  # the holder's exit freed it


def test_a_waiting_user_gets_the_instrument_when_the_holder_lets_go(caplog):
    holder = hold("/dev/ttyUSB0")
    got: list[locks.ResourceLock] = []
    waiter = threading.Thread(target=lambda: got.append(locks.acquire("/dev/ttyUSB0", "probe", wait_s=60)))
    with caplog.at_level(logging.WARNING, logger="phonebench.drivers.locks"):
        waiter.start()
        while waiter.is_alive() and not any("is in use by" in r.getMessage() for r in caplog.records):
            waiter.join(0.05)  # until the waiter has said whom it waits for
        holder.release()
        waiter.join(60)
    assert got and f"pid {holder.proc.pid}" in caplog.text
    assert locks.holder("/dev/ttyUSB0")["pid"] == os.getpid()
    got[0].release()
    assert locks.holder("/dev/ttyUSB0") is None  # released: the file no longer names anyone


def test_reentrant_within_one_process():
    first = locks.acquire("socket://127.0.0.1:1")
    second = locks.acquire("socket://127.0.0.1:1", wait_s=0)
    first.release()
    assert locks.holder("socket://127.0.0.1:1")["pid"] == os.getpid()  # still held by the second
    second.release()
    second.release()  # idempotent
    assert locks.holder("socket://127.0.0.1:1") is None


def test_lock_files_are_distinct_per_address(lock_folder):
    paths = {locks.lock_path(a) for a in ("TCPIP0::10.0.0.5::INSTR", "tcpip0::10.0.0.5::instr", "/dev/ttyUSB0")}
    assert len(paths) == 3 and all(p.parent == lock_folder for p in paths)


def test_serial_probe_open_is_exclusive_between_processes():
    with ThermalProbeServer(World(seed=2)) as server:
        holder = Holder("import sys\nfrom phonebench.drivers.thermal_generic import GenericAsciiProbe\n"
                        f"probe = GenericAsciiProbe({server.address!r})")
        try:
            with pytest.raises(locks.InstrumentBusy, match=f"thermal generic-ascii at {server.address} is in use"):
                GenericAsciiProbe(server.address, lock_wait_s=0.2)
        finally:
            holder.release()
        probe = GenericAsciiProbe(server.address, timeout_s=1.0)
        assert probe.read().valid
        probe.close()
        assert locks.holder(server.address) is None


def test_visa_instrument_open_is_exclusive_and_preflight_names_the_holder(tmp_path, monkeypatch):
    monkeypatch.setenv(locks.ENV_WAIT, "0.2")
    with Daq970aServer(World(seed=2)) as server:
        holder = Holder("import sys\nfrom phonebench.drivers.daq970a import KeysightDaq970a\n"
                        f"daq = KeysightDaq970a({server.address!r})")
        try:
            with pytest.raises(locks.InstrumentBusy, match="in use by pid"):
                KeysightDaq970a(server.address)
            station = StationConfig("locks", None, results_dir=tmp_path,
                                    instruments={"thermal": InstrumentConfig("thermal", server.family, server.address)})
            report = preflight.run_preflight(station, CalibrationSettings())
            assert f"in use by pid {holder.proc.pid}" in report.problems[0] and report.unreachable
        finally:
            holder.release()
        daq = KeysightDaq970a(server.address)
        assert daq.read().valid
        daq.close()


def test_preflight_waits_for_a_shared_instrument_and_refuses_a_held_unshared_one(monkeypatch, caplog):
    """Places or bays sharing a probe board take turns: the preflight of one waits while another's
    test holds the board (it used to fail at once: "waited 0 s"); an unshared one held is another
    run on this station, reported at once."""
    monkeypatch.setenv(locks.ENV_WAIT, "600")  # a bound on a hung holder, never a measured time
    with ThermalProbeServer(World(seed=2)) as server:
        unshared = InstrumentConfig("thermal", "generic-ascii", server.address)
        holder = Holder("import sys\nfrom phonebench.drivers.thermal_generic import GenericAsciiProbe\n"
                        f"probe = GenericAsciiProbe({server.address!r})")
        try:
            refused = preflight.check_instrument("thermal", unshared)
            assert not refused.reachable and f"in use by pid {holder.proc.pid}" in refused.problems[0]
            items: list[preflight.Item] = []
            shared = InstrumentConfig("thermal", "generic-ascii", server.address, shared=True)
            waiter = threading.Thread(target=lambda: items.append(preflight.check_instrument("thermal", shared)))
            with caplog.at_level(logging.WARNING, logger="phonebench.drivers.locks"):
                waiter.start()
                while waiter.is_alive() and not any("is in use by" in r.getMessage() for r in caplog.records):
                    waiter.join(0.05)  # until the preflight says whom it waits for
                assert waiter.is_alive(), items and items[0].problems
        finally:
            holder.release()
        waiter.join(600)
    assert items and items[0].reachable and not items[0].problems, items[0].problems
