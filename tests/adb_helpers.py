"""A private adb server for tests: its own port and HOME (keys), never the user's server on 5037."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from drivers.adb_server import AdbServer

CALL_TIMEOUT_S = 30


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def private_server_env(home: Path, port: int) -> dict[str, str]:
    env = dict(os.environ, HOME=str(home), ANDROID_ADB_SERVER_PORT=str(port))
    env.pop("ADB_SERVER_SOCKET", None)
    env["ADB_MDNS"] = "0"  # no network discovery from a test's server
    return env


def private_adb_server(home: Path) -> Iterator[AdbServer]:
    """Start `adb -P PORT start-server` with HOME=home; kill it afterwards."""
    if shutil.which("adb") is None:
        pytest.skip("the adb binary is not on PATH (Debian: apt-get install adb)")
    port = free_port()
    env = private_server_env(home, port)
    subprocess.run(["adb", "-P", str(port), "start-server"], env=env, capture_output=True, check=True,
                   timeout=CALL_TIMEOUT_S, stdin=subprocess.DEVNULL)
    try:
        yield AdbServer("127.0.0.1", port)
    finally:
        subprocess.run(["adb", "-P", str(port), "kill-server"], env=env, capture_output=True,
                       timeout=CALL_TIMEOUT_S, stdin=subprocess.DEVNULL)
