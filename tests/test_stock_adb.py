"""Debian's stock `adb` client against the emulated daemon: connect, shell, push, pull, auth.

Runs a private adb server (ANDROID_ADB_SERVER_PORT) with a throwaway HOME, so it neither
touches the user's ~/.android keys nor clashes with a running adb server; killed at the end.
"""
from __future__ import annotations

import os
import random
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from phonebench.emulation.adb_auth import AuthPolicy
from phonebench.emulation.adbd import AdbDaemon
from phonebench.emulation.device import EmulatedPhone, PhoneSpec
from phonebench.emulation.phones import emulated_phone
from tests.adb_helpers import ADB, ADB_PATH
from tests.system_packages import needs

pytestmark = needs("adb", ADB is not None)
CALL_TIMEOUT_S = 30


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class StockAdb:
    home: Path
    env: dict[str, str]

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([ADB_PATH, *args], env=self.env, capture_output=True, text=True, timeout=CALL_TIMEOUT_S)
        if check and done.returncode != 0:
            raise AssertionError(f"adb {' '.join(args)} exited {done.returncode}: {done.stderr}{done.stdout}")
        return done

    def attach(self, address: str) -> str:
        answer = self("connect", address).stdout
        self("-s", address, "wait-for-device")
        return answer

    @property
    def public_key(self) -> Path:
        return self.home / ".android" / "adbkey.pub"


@pytest.fixture(scope="module")
def adb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StockAdb]:
    home = tmp_path_factory.mktemp("adbhome")
    stock = StockAdb(home, dict(os.environ, HOME=str(home), ANDROID_ADB_SERVER_PORT=str(_free_port())))
    stock("start-server")  # creates $HOME/.android/adbkey
    try:
        yield stock
    finally:
        stock("kill-server", check=False)


@pytest.fixture(scope="module")
def phone() -> EmulatedPhone:
    return emulated_phone(PhoneSpec(serial="EMU-STOCK-1"))


@pytest.fixture(scope="module")
def address(adb: StockAdb, phone: EmulatedPhone) -> Iterator[str]:
    with AdbDaemon(phone, auth=AuthPolicy(accept_any=True)) as daemon:
        # A phone that trusts the host: the signature is enough, `adb connect` says so at once.
        assert adb.attach(daemon.address).strip() == f"connected to {daemon.address}"
        yield daemon.address
        adb("disconnect", daemon.address, check=False)


def test_connect_and_getprop(adb: StockAdb, address: str) -> None:
    assert adb("-s", address, "shell", "getprop", "ro.serialno").stdout == "EMU-STOCK-1\n"
    assert adb("-s", address, "get-serialno").stdout.strip() == address
    listing = adb("devices", "-l").stdout
    assert f"{address}" in listing and "device product:pbemu" in listing


def test_exit_status_through_the_shell_protocol(adb: StockAdb, address: str) -> None:
    assert "shell_v2" in adb("-s", address, "features").stdout
    assert adb("-s", address, "shell", "cat", "/nope", check=False).returncode == 1
    assert adb("-s", address, "shell", "nosuchtool", check=False).returncode == 127
    done = adb("-s", address, "shell", "echo out; ls /nope", check=False)
    assert (done.stdout, done.stderr) == ("out\n", "ls: /nope: No such file or directory\n")


def test_first_connection_prompt(adb: StockAdb) -> None:
    """auth = "prompt": the stock client's first try fails to authenticate while the phone shows
    its dialogue; once accepted the phone is `device` and remembers the key."""
    prompting = emulated_phone(PhoneSpec(serial="EMU-STOCK-P"))
    with AdbDaemon(prompting, auth=AuthPolicy(accept_any=True, prompt=True)) as daemon:
        first = adb("connect", daemon.address).stdout
        assert f"failed to authenticate to {daemon.address}" in first
        adb("-s", daemon.address, "wait-for-device")
        assert adb("-s", daemon.address, "shell", "getprop", "ro.serialno").stdout == "EMU-STOCK-P\n"
        adb("disconnect", daemon.address)
        assert adb("connect", daemon.address).stdout.strip() == f"connected to {daemon.address}"  # key now known
        adb("disconnect", daemon.address, check=False)


def test_shell_commands(adb: StockAdb, address: str, phone: EmulatedPhone) -> None:
    phone.fs.write("/data/local/tmp/stock/a.txt", b"a")
    assert adb("-s", address, "shell", "ls", "/data/local/tmp/stock").stdout == "a.txt\n"
    assert "uid=2000(shell)" in adb("-s", address, "shell", "id").stdout
    assert "no interactive shell" in adb("-s", address, "shell").stdout


def test_push_pull_identical(adb: StockAdb, address: str, phone: EmulatedPhone, tmp_path: Path) -> None:
    source, back = tmp_path / "payload.bin", tmp_path / "back.bin"
    source.write_bytes(random.Random(11).randbytes(4 * 1024 * 1024 + 123))
    adb("-s", address, "push", str(source), "/data/local/tmp/stock/payload.bin")
    assert phone.fs.read("/data/local/tmp/stock/payload.bin") == source.read_bytes()
    adb("-s", address, "pull", "/data/local/tmp/stock/payload.bin", str(back))
    assert back.read_bytes() == source.read_bytes()
    # push into a directory keeps the name (stat_v2 tells the client it is a directory)
    adb("-s", address, "push", str(source), "/data/local/tmp/stock/")
    assert phone.fs.exists("/data/local/tmp/stock/payload.bin")
    assert "payload.bin" in adb("-s", address, "ls", "/data/local/tmp/stock").stdout


def test_pull_missing_file_fails_cleanly(adb: StockAdb, address: str, tmp_path: Path) -> None:
    failed = adb("-s", address, "pull", "/no/such/file", str(tmp_path / "x"), check=False)
    assert failed.returncode != 0
    assert "No such file or directory" in failed.stderr + failed.stdout


def test_only_listed_keys(adb: StockAdb, address: str, tmp_path: Path) -> None:
    # `address` made the server create its key; a phone that lists it lets the stock client in ...
    listed = emulated_phone(PhoneSpec(serial="EMU-STOCK-2"))
    with AdbDaemon(listed, auth=AuthPolicy(accept_any=False, allowed_keys=[adb.public_key])) as daemon:
        assert "connected to" in adb("connect", daemon.address).stdout
        adb("-s", daemon.address, "wait-for-device")
        assert adb("-s", daemon.address, "shell", "getprop", "ro.serialno").stdout == "EMU-STOCK-2\n"
        adb("disconnect", daemon.address, check=False)
    # ... and one that lists another key refuses it.
    from adb_shell.auth.keygen import keygen

    keygen(str(tmp_path / "other"))
    strict = emulated_phone(PhoneSpec(serial="EMU-STOCK-3"))
    with AdbDaemon(strict, auth=AuthPolicy(accept_any=False, allowed_keys=[tmp_path / "other.pub"])) as daemon:
        connect = adb("connect", daemon.address, check=False)
        assert "connected to" not in connect.stdout
        assert adb("-s", daemon.address, "shell", "true", check=False).returncode != 0
        adb("disconnect", daemon.address, check=False)


def test_reboot_wait_for_device_and_logcat(adb: StockAdb) -> None:
    """What a lab does by hand with the stock client: reboot, wait for the phone, read its log."""
    rebooting = emulated_phone(PhoneSpec(serial="EMU-STOCK-R"))
    with AdbDaemon(rebooting, auth=AuthPolicy(accept_any=True)) as daemon:
        adb.attach(daemon.address)
        adb("-s", daemon.address, "reboot")
        adb("-s", daemon.address, "wait-for-device")  # the server reconnects once the phone is back
        deadline = 50
        while adb("-s", daemon.address, "shell", "getprop", "sys.boot_completed").stdout.strip() != "1" and deadline:
            deadline -= 1
        assert rebooting.booted
        log = adb("-s", daemon.address, "logcat", "-d").stdout
        assert "System now ready" in log and "Rebooting" not in log  # the buffer starts afresh at boot
        adb("disconnect", daemon.address, check=False)
