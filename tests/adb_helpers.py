"""ADB for tests: a private adb server (its own port and HOME, never the user's server on 5037),
and emulated phones reached over either transport (`over_adb`: the same test for both)."""
from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest

from phonebench.drivers.adb_binary import find_adb
from tests.system_packages import require
from phonebench.drivers.adb_server import AdbServer

CALL_TIMEOUT_S = 30
# The stock adb the bench itself would start a server with: the system's, else the bundled one.
ADB = find_adb()
ADB_PATH = ADB.path if ADB else "adb"


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
    if ADB is None:
        require("adb", False)
    port = free_port()
    env = private_server_env(home, port)
    subprocess.run([ADB_PATH, "-P", str(port), "start-server"], env=env, capture_output=True, check=True,
                   timeout=CALL_TIMEOUT_S, stdin=subprocess.DEVNULL)
    try:
        yield AdbServer("127.0.0.1", port)
    finally:
        subprocess.run([ADB_PATH, "-P", str(port), "kill-server"], env=env, capture_output=True,
                       timeout=CALL_TIMEOUT_S, stdin=subprocess.DEVNULL)


TRANSPORTS = ("direct", "server")


class EmulatedStation:
    """Emulated phones, each with its daemon and its world's SCPI time server, reached over one
    ADB transport the way a lab reaches hardware: `direct` (adb-shell) or `server` (the adb
    server given; a test's private one)."""

    def __init__(self, transport: str, key_path: Path, server: AdbServer | None = None) -> None:
        self.transport, self.key_path, self.server = transport, key_path, server
        self._started: list[tuple[Any, ...]] = []

    def start(self, persona: str = "nominal", *, npu: str = "SM8650-ES",
              clock_world: Any = None, **spec: Any) -> tuple[Any, Any, Any]:
        """(emulated phone, its driver, a station clock: its own world's, or `clock_world`'s)."""
        from phonebench.drivers.adb import AdbPhone
        from phonebench.drivers.adb_server import ServerAdbPhone
        from phonebench.drivers.clock import ScpiClock
        from phonebench.emulation.adb_auth import AuthPolicy
        from phonebench.emulation.adbd import AdbDaemon
        from phonebench.emulation.phones import emulated_phone
        from phonebench.emulation.instruments.clock import ClockServer
        from phonebench.emulation.npu_personas import phone_spec

        emulated = emulated_phone(phone_spec(npu, f"EMU-{persona}", sla_persona=persona, **spec))
        daemon = AdbDaemon(emulated, auth=AuthPolicy(accept_any=True))
        daemon.start()
        clock_server = ClockServer(clock_world if clock_world is not None else emulated.world)
        clock_server.start()
        name = f"{self.transport}-{persona}"
        if self.transport == "server":
            device: Any = ServerAdbPhone(daemon.address, server=self.server, name=name, connect_timeout_s=CALL_TIMEOUT_S)
        else:
            device = AdbPhone(daemon.address, key_path=self.key_path, name=name, connect_timeout_s=CALL_TIMEOUT_S)
        clock = ScpiClock(clock_server.address)
        self._started.append((daemon, clock_server, device, clock))
        return emulated, device.connect(), clock

    def close(self) -> None:
        for daemon, clock_server, device, clock in self._started:
            clock.close()
            getattr(device, "disconnect", device.close)()  # the adb server forgets the phone too
            clock_server.stop()
            daemon.stop()
        self._started.clear()


@pytest.fixture(scope="module")
def adb_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdbServer]:
    yield from private_adb_server(tmp_path_factory.mktemp("adbhome"))


@pytest.fixture(scope="module")
def adb_key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The direct transport's RSA key (the adb server has its own)."""
    from adb_shell.auth.keygen import keygen

    path = tmp_path_factory.mktemp("adbkey") / "adbkey"
    keygen(str(path))
    return path


@pytest.fixture(params=TRANSPORTS)
def over_adb(request: pytest.FixtureRequest, adb_key: Path) -> Iterator[EmulatedStation]:
    """An EmulatedStation on each transport in turn (the server one through a private adb server)."""
    server = request.getfixturevalue("adb_server") if request.param == "server" else None
    station = EmulatedStation(request.param, adb_key, server)
    yield station
    station.close()
