"""A lab's own tool against the emulated phones (issue 31): Google's Mobly, its AndroidDevice
controller through its public API only, against `bench emulate`'s phone through the stock adb
(a private server of this test's own): registration with the logcat collector, build info,
getprop, shell exit codes, pipes, quoting, push/pull, a logcat dump, a bug report, a reboot."""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from phonebench.core.station import load_station
from tests.adb_helpers import ADB, ADB_PATH, free_port
from tests.system_packages import needs

pytestmark = needs("adb", ADB is not None)
mobly_adb = pytest.importorskip("mobly.controllers.android_device_lib.adb")
android_device = pytest.importorskip("mobly.controllers.android_device")

REPO = Path(__file__).resolve().parent.parent
STATION = """[station]
name = "mobly"
[emulated]
instruments = false
[[emulated.phone]]
serial = "EMU-MOBLY"
npu_persona = "MT6989-MP"
"""


@pytest.fixture(scope="module")
def serial(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`bench emulate` in its own process, a private adb server that `adb connect`s its phone, and
    the environment Mobly's adb calls read (its port, HOME for the key, the stock adb on PATH)."""
    home = tmp_path_factory.mktemp("mobly")
    (home / "emulated.toml").write_text(STATION)
    live = home / "live.toml"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    emulator = subprocess.Popen([sys.executable, "-m", "phonebench.bench.cli", "emulate", "--station",
                                 str(home / "emulated.toml"), "--write-station", str(live)], cwd=home, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    saved = {k: os.environ.get(k) for k in ("ANDROID_ADB_SERVER_PORT", "HOME", "PATH", "ADB_MDNS")}
    os.environ.update(ANDROID_ADB_SERVER_PORT=str(free_port()), HOME=str(home), ADB_MDNS="0",
                      PATH=f"{Path(ADB_PATH).parent}{os.pathsep}{os.environ['PATH']}")
    logging.log_path = str(home / "logs")  # type: ignore[attr-defined]  # where Mobly puts device logs
    try:
        deadline = time.monotonic() + 300
        while not live.exists():
            assert emulator.poll() is None and time.monotonic() < deadline, "bench emulate wrote no station file"
            time.sleep(0.1)
        address = load_station(live).duts[0].address
        subprocess.run([ADB_PATH, "connect", address], check=True, capture_output=True, timeout=60)
        subprocess.run([ADB_PATH, "-s", address, "wait-for-device"], check=True, capture_output=True, timeout=60)
        yield address
    finally:
        subprocess.run([ADB_PATH, "kill-server"], capture_output=True, timeout=60)
        emulator.send_signal(signal.SIGTERM)
        emulator.wait(timeout=60)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def ad(serial: str) -> Iterator[object]:
    """Registration as a Mobly test does it: `create` starts the logcat collector."""
    ads = android_device.create([{"serial": serial}])
    try:
        yield ads[0]
    finally:
        android_device.destroy(ads)


def test_registration_collects_logcat_into_its_file(ad) -> None:
    ad.adb.shell(["log", "-t", "MoblyMarker", "collected while running"])
    deadline = time.monotonic() + 30
    path = Path(ad.adb_logcat_file_path)
    while time.monotonic() < deadline and "MoblyMarker" not in (path.read_text() if path.exists() else ""):
        time.sleep(0.2)
    assert "collected while running" in path.read_text()


def test_build_info_is_a_consistent_user_build(ad) -> None:
    info = ad.build_info
    assert info["build_id"] == "AP3A.241105.008" and info["build_type"] == "user"
    assert info["build_version_codename"] == "REL" and info["debuggable"] == "0"
    assert info["product_name"] == "pbemu_mt6989"
    assert info["build_fingerprint"].startswith(f"phonebench/{info['product_name']}/")
    assert not ad.is_rootable


def test_getprop_and_the_model(ad) -> None:
    assert ad.adb.getprop("ro.serialno") == "EMU-MOBLY"
    assert ad.model == "pbemu_mt6989"


def test_shell_exit_codes_pipes_and_quoting(ad) -> None:
    with pytest.raises(mobly_adb.AdbError) as failed:
        ad.adb.shell("exit 3")
    assert failed.value.ret_code == 3
    assert ad.adb.shell("getprop | grep ro.build.id").decode().strip() == "[ro.build.id]: [AP3A.241105.008]"
    assert ad.adb.shell("echo abc | cat").decode() == "abc\n"
    assert ad.adb.shell('X=42; echo "x=$X" \'$X\'').decode() == "x=42 $X\n"
    assert ad.adb.shell("id -u").decode() == "2000\n"
    with pytest.raises(mobly_adb.AdbError) as refused:
        ad.adb.shell("echo $(id)")
    assert refused.value.ret_code != 0 and b"not implemented" in refused.value.stderr


def test_push_pull_and_rm_r(ad, tmp_path: Path) -> None:
    src = tmp_path / "payload.bin"
    src.write_bytes(os.urandom(100_000))
    ad.adb.shell("mkdir -p /data/local/tmp/mobly")
    ad.adb.push([str(src), "/data/local/tmp/mobly/payload.bin"])
    ad.adb.pull(["/data/local/tmp/mobly/payload.bin", str(tmp_path / "back.bin")])
    assert (tmp_path / "back.bin").read_bytes() == src.read_bytes()
    ad.adb.shell("rm -r /data/local/tmp/mobly")
    with pytest.raises(mobly_adb.AdbError):
        ad.adb.shell("ls /data/local/tmp/mobly")


def test_logcat_dump_and_screencap(ad, tmp_path: Path) -> None:
    ad.adb.shell(["log", "-t", "MoblyDump", "in the dump"])
    assert b"MoblyDump" in ad.adb.logcat(["-d"])
    ad.adb.shell("screencap -p /sdcard/screen.png")
    ad.adb.pull(["/sdcard/screen.png", str(tmp_path / "screen.png")])
    assert (tmp_path / "screen.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_bug_report(ad, tmp_path: Path) -> None:
    path = ad.take_bug_report(test_name="mobly", destination=str(tmp_path))
    assert path and Path(path).stat().st_size > 0


def test_reboot_keeps_files_and_comes_back(ad) -> None:
    ad.adb.shell("echo kept > /data/local/tmp/kept.txt")
    ad.reboot()
    assert ad.adb.shell("cat /data/local/tmp/kept.txt").decode() == "kept\n"
    assert ad.adb.getprop("sys.boot_completed") == "1"
