"""Two benches on one station with one phone, as a lab runs them: `bench emulate --write-station`
serves the phone, two plain pytest processes reach it through the adb server. The phone is never
driven by both at once: the second waits for the first (bounded) or stops naming the holder.

No timing bets: the first bench holds the phone inside a test until the test process tells it to
go on (a file), and the second bench's own line saying whom it waits for is what the test waits for.
"""
from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from phonebench.core.exits import PHONE_BUSY
from phonebench.drivers import locks
from tests.adb_helpers import ADB_PATH, free_port, private_server_env
from tests.lab_helpers import ONE_PHONE_STATION

HANDSHAKE_S = 600  # a bound on a hung subprocess, never a measured time

HOLDER = """\
import os
import time
from pathlib import Path

import pytest


@pytest.mark.evidence("measured")
def test_hold_the_phone(dut, record):
    Path("held").write_text(str(os.getpid()))  # this bench drives the phone now
    while not Path("go").exists():  # until the test process says go on
        time.sleep(0.05)
    assert not Path("second-drove").exists(), "the second bench drove the phone while this one held it"
    record.check("phone answers", float(dut.run("echo 1").strip()), "", 1.0, "==")
"""

SECOND = """\
from pathlib import Path

import pytest


@pytest.mark.evidence("measured")
def test_drive_the_phone(dut, record):
    Path("second-drove").write_text("")
    record.check("phone answers", float(dut.run("echo 1").strip()), "", 1.0, "==")
"""


BENCHES: list[subprocess.Popen] = []  # the benches a test started, stopped at its end whatever happened


@pytest.fixture
def station(tmp_path, monkeypatch):
    """One emulated phone behind `bench emulate --write-station`, a private adb server, a lock folder."""
    (tmp_path / "home").mkdir()
    monkeypatch.setenv(locks.ENV_DIR, str(tmp_path / "locks"))  # this process reads the holder records
    env = private_server_env(tmp_path / "home", free_port())
    env.pop("PHONEBENCH_STATION", None)
    env["PYTHONUNBUFFERED"] = "1"
    (tmp_path / "emulated.toml").write_text(ONE_PHONE_STATION)
    (tmp_path / "test_holder.py").write_text(HOLDER)
    (tmp_path / "test_second.py").write_text(SECOND)
    emulator = subprocess.Popen([sys.executable, "-m", "phonebench.bench.cli", "emulate", "--station", "emulated.toml",
                                 "--write-station", "live.toml"], cwd=tmp_path, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for line in emulator.stdout:
            if line.startswith("station file:"):
                break
        else:
            pytest.fail(f"bench emulate ended without a station file (exit {emulator.wait()})")
        yield tmp_path, env
    finally:
        (tmp_path / "go").write_text("")
        for proc in BENCHES:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.communicate(timeout=HANDSHAKE_S)
        BENCHES.clear()
        emulator.terminate()
        emulator.wait(timeout=HANDSHAKE_S)
        subprocess.run([ADB_PATH, "-P", env["ANDROID_ADB_SERVER_PORT"], "kill-server"], env=env, capture_output=True,
                       timeout=60, stdin=subprocess.DEVNULL)


def bench(folder: Path, env: dict[str, str], test_file: str, *extra: str) -> subprocess.Popen:
    """A plain pytest bench whose run id is its test file's name."""
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "--station", "live.toml", "-p", "no:cacheprovider",
                             "--run-id", Path(test_file).stem, test_file, *extra], cwd=folder, env=env,
                            stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    BENCHES.append(proc)
    return proc


def hold_the_phone(folder: Path, env: dict[str, str]) -> subprocess.Popen:
    """The first bench, inside its test, driving the phone until `go` exists."""
    first = bench(folder, env, "test_holder.py")
    held = folder / "held"
    while not held.exists():
        if first.poll() is not None:
            pytest.fail(f"the first bench ended before holding the phone:\n{first.stdout.read()[-3000:]}")
        try:
            first.wait(timeout=0.1)
        except subprocess.TimeoutExpired:
            pass
    return first


def finish(proc: subprocess.Popen, folder: Path) -> tuple[int, str, dict]:
    out, _ = proc.communicate(timeout=HANDSHAKE_S)
    run_id = proc.args[proc.args.index("--run-id") + 1]
    return proc.returncode, out, json.loads((folder / "reports" / run_id / "results.json").read_text())


def test_a_second_bench_stops_naming_the_holder(station):
    folder, env = station
    first = hold_the_phone(folder, env)
    address = re.search(r'adb = "([^"]+)"', (folder / "live.toml").read_text()).group(1)
    assert locks.holder(locks.phone_key(address))["pid"] == first.pid  # the holder record names the first bench
    code, out, second = finish(bench(folder, env, "test_second.py", "--phone-wait", "0"), folder)
    assert code == PHONE_BUSY, out[-3000:]
    message = f"phone EMU0001 ({address}) is in use by pid {first.pid} on "
    assert message in out and " since 20" in out and "(user " in out
    assert second["status"] == "incomplete" and second["tests"] == []
    assert message in second["duts"]["EMU0001"]["error"] and any(message in p for p in second["problems"])
    assert not (folder / "second-drove").exists()
    (folder / "go").write_text("")
    code, out, held = finish(first, folder)
    assert code == 0 and held["status"] == "complete", out[-3000:]
    assert locks.holder(locks.phone_key(address)) is None  # released with the session


def test_a_second_bench_waits_for_the_phone_then_drives_it(station):
    folder, env = station
    first = hold_the_phone(folder, env)
    second = bench(folder, env, "test_second.py", "--phone-wait", str(HANDSHAKE_S))
    said = []
    for line in second.stdout:  # the second bench's own line says whom it waits for
        said.append(line)
        if f"is in use by pid {first.pid} on " in line and "waiting up to" in line:
            break
    else:
        pytest.fail("the second bench never said it was waiting:\n" + "".join(said)[-3000:])
    assert not (folder / "second-drove").exists()
    (folder / "go").write_text("")
    code, out, held = finish(first, folder)
    assert code == 0 and held["summary"].get("passed") == 1, out[-3000:]  # its test saw no other driver
    code, out, drove = finish(second, folder)
    assert code == 0 and drove["status"] == "complete" and drove["summary"].get("passed") == 1, out[-3000:]
    assert (folder / "second-drove").exists()
