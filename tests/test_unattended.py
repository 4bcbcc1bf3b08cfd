"""Every documented flow runs with nobody at the keyboard (cron, CI, `</dev/null`): the production
flow of docs/production.md from an empty folder, `bench calibrate` on a real fixture (a clear
error instead of a prompt, or --unattended), and `bench line serve` stopped by SIGTERM or SIGINT
taking every fixture worker, and its listening ports, with it."""
from __future__ import annotations

import re

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from phonebench.core.paths import SOURCE_ROOT
from phonebench.emulation.line import EmulatedLine
from tests.signal_helpers import sigint_as_from_a_terminal

WAIT_S = 600.0  # an upper bound for a loaded 2-core machine: a hang fails, nothing is timed


def bench(*args: str, cwd: Path, timeout: float = WAIT_S) -> subprocess.CompletedProcess:
    """`bench ARGS` as cron runs it: no terminal on stdin."""
    env = dict(os.environ, PYTHONPATH=str(SOURCE_ROOT))
    return subprocess.run([sys.executable, "-m", "phonebench.bench.cli", *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout)


def test_documented_production_flow_passes_from_an_empty_folder(tmp_path: Path) -> None:
    """docs/production.md: `bench calibrate && bench accept --serial EMU0001`, nothing else: the
    emulated station it calibrates is the station the acceptance fixture is."""
    calibrated = bench("calibrate", cwd=tmp_path)
    assert calibrated.returncode == 0, calibrated.stdout + calibrated.stderr
    bays = calibrated.stdout.count("bay bay")  # every bay of the emulated station, four procedures each
    assert bays == 4 and calibrated.stdout.count("PASS") == 4 * bays and "DAQ970A" in calibrated.stdout
    accepted = bench("accept", "--serial", "EMU0001", cwd=tmp_path)
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert "EMU0001: unit accepted" in accepted.stdout and "NOT CALIBRATED" not in accepted.stdout
    # control: without the calibration the same acceptance is refused (exit 5), nothing tested
    fresh = tmp_path / "uncalibrated"
    fresh.mkdir()
    refused = bench("accept", "--serial", "EMU0001", cwd=fresh)
    assert refused.returncode == 5 and "never calibrated" in refused.stdout + refused.stderr


@pytest.fixture(scope="module")
def real_fixture(tmp_path_factory: pytest.TempPathFactory):
    """A station file of loopback instruments and no [emulated] table, and no fixture controller:
    to the bench, a real fixture whose steps a person does."""
    folder = tmp_path_factory.mktemp("fixture")
    with EmulatedLine(count=1) as line:
        path = line.write_station(folder / "station.toml", results_dir=folder / "reports")
        text = path.read_text(encoding="utf-8")
        path.write_text(re.sub(r"\[instruments\.fixture\]\n(?:[^\[\n][^\n]*\n)*", "", text), encoding="utf-8")
        yield path, folder


def test_calibrate_without_a_terminal_says_so_instead_of_prompting(real_fixture: tuple[Path, Path]) -> None:
    station, folder = real_fixture
    done = bench("calibrate", "--station", str(station), cwd=folder)
    assert done.returncode == 2
    assert "no terminal to ask at" in done.stderr and "--unattended" in done.stderr
    assert "Traceback" not in done.stderr and "EOFError" not in done.stderr and ">>>" not in done.stdout


def test_calibrate_unattended_asks_nobody_and_keeps_its_records(real_fixture: tuple[Path, Path]) -> None:
    station, folder = real_fixture
    done = bench("calibrate", "--station", str(station), "--unattended", cwd=folder)
    assert done.returncode in (0, 1), done.stderr  # a loopback nobody set fails its criteria, stored
    assert ">>>" not in done.stdout and "Traceback" not in done.stderr
    for procedure in ("scope-deskew", "fixture-delay", "supply-zero", "thermocouple-offsets"):
        assert procedure in done.stdout
    # the same from the calibration settings (a station setting, no option)
    settings = folder / "calibration.toml"
    settings.write_text("[calibration]\nunattended = true\n", encoding="utf-8")
    again = bench("calibrate", "--station", str(station), "--calibration-config", str(settings),
                  "--procedure", "supply-zero", "--procedure", "thermocouple-offsets", cwd=folder)
    assert again.returncode in (0, 1) and "thermocouple-offsets" in again.stdout and ">>>" not in again.stdout


def _listening(process: psutil.Process) -> set[int]:
    try:
        return {c.laddr.port for c in process.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN}
    except psutil.NoSuchProcess:
        return set()


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_line_serve_stopped_by_a_signal_ends_every_fixture_worker(tmp_path: Path, stop: signal.Signals) -> None:
    from phonebench.bench.operator.accounts import OperatorBook

    env = dict(os.environ, PYTHONPATH=str(SOURCE_ROOT))
    operators = OperatorBook(tmp_path / "operators.json")  # the page starts only with someone who may sign in
    operators.add("alice", "correct horse battery")
    serve = subprocess.Popen([sys.executable, "-m", "phonebench.bench.cli", "line", "serve", "--port", "0", "--fixtures", "2",
                              "--count", "2", "--faulty", "0", "--results-dir", str(tmp_path / "reports"),
                              "--operators", str(operators.path)],
                             cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, preexec_fn=sigint_as_from_a_terminal)
    try:
        station = psutil.Process(serve.pid)
        deadline = time.monotonic() + WAIT_S
        workers: dict[int, set[int]] = {}
        while time.monotonic() < deadline and serve.poll() is None:  # each worker's line listening
            children = [c for c in station.children() if "resource_tracker" not in " ".join(c.cmdline())]
            workers = {c.pid: _listening(c) for c in children}
            if len(workers) == 2 and all(len(ports) >= 5 for ports in workers.values()):  # 4 instruments + adbd
                break
            time.sleep(0.2)
        assert len(workers) == 2 and all(workers.values()), (workers, serve.poll())
        serve.send_signal(stop)
        _, errors = serve.communicate(timeout=WAIT_S)
    finally:
        if serve.poll() is None:
            serve.kill()
    assert serve.returncode == 0, errors
    assert "Traceback" not in errors
    assert all(_gone(pid) for pid in workers), {pid: _gone(pid) for pid in workers}
    for port in set().union(*workers.values()):  # nothing listens where the workers did
        with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
