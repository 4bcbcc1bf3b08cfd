"""phonebench.drivers.adb_client: the adb server's smart-socket protocol, byte for byte."""
from __future__ import annotations

import socket
import threading
from typing import Callable, Iterator

import pytest

from phonebench.drivers.adb_client import AdbServerClient, AdbServerError, AdbServerTimeout

Answer = Callable[[str], bytes]


def _block(text: str) -> bytes:
    raw = text.encode()
    return b"%04x" % len(raw) + raw


class _FakeServer:
    """An adb server on loopback that records every request and answers from a table."""

    def __init__(self, answer: Answer) -> None:
        self.answer, self.requests = answer, []  # type: ignore[var-annotated]
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._session, args=(conn,), daemon=True).start()

    def _session(self, conn: socket.socket) -> None:
        with conn:
            while True:
                length = conn.recv(4, socket.MSG_WAITALL)
                if len(length) < 4:
                    break
                request = conn.recv(int(length, 16), socket.MSG_WAITALL).decode()
                self.requests.append(request)
                reply = self.answer(request)
                if reply:
                    conn.sendall(reply)
                if not request.startswith("host:tport:") and not request.startswith("host:transport:"):
                    break  # a host request's connection ends with its answer


@pytest.fixture
def server_with() -> Iterator[Callable[[Answer], _FakeServer]]:
    servers: list[_FakeServer] = []

    def make(answer: Answer) -> _FakeServer:
        servers.append(_FakeServer(answer))
        return servers[-1]

    yield make
    for server in servers:
        server.listener.close()


def _adb_41(request: str) -> bytes:
    if request == "host:version":
        return b"OKAY" + _block("0029")
    if request.startswith("host:tport:serial:"):
        return b"OKAY" + (7).to_bytes(8, "little")
    if request.startswith("host:connect:"):
        return b"OKAY" + _block(f"connected to {request.removeprefix('host:connect:')}")
    if request.startswith("host:disconnect:"):
        return b"FAIL" + _block("no such device")
    if request.endswith(":features"):
        return b"OKAY" + _block("shell_v2,cmd")
    if request == "host:devices":
        return b"OKAY" + _block("R5CT1234\tdevice\n")
    return b"FAIL" + _block(f"unknown request {request}")


def test_requests_are_hex_length_prefixed_and_answers_read(server_with: Callable[[Answer], _FakeServer]) -> None:
    server = server_with(_adb_41)
    client = AdbServerClient("127.0.0.1", server.port)
    assert client.devices() == "R5CT1234\tdevice\n"
    assert client.connect("10.0.0.20:5555", timeout_s=2.0) == "connected to 10.0.0.20:5555"
    assert client.features("R5CT1234") == "shell_v2,cmd"
    assert client.disconnect("10.0.0.20:5555") == "no such device"  # a refusal is its message, not an error
    assert server.requests == ["host:devices", "host:connect:10.0.0.20:5555", "host-serial:R5CT1234:features",
                               "host:disconnect:10.0.0.20:5555"]


def test_a_refused_request_raises_the_servers_message(server_with: Callable[[Answer], _FakeServer]) -> None:
    client = AdbServerClient("127.0.0.1", server_with(_adb_41).port)
    with pytest.raises(AdbServerError, match="unknown request host:kill"):
        client.kill()


def test_transport_switch_uses_tport_and_asks_the_version_once(server_with: Callable[[Answer], _FakeServer]) -> None:
    server = server_with(_adb_41)
    client = AdbServerClient("127.0.0.1", server.port)
    for _ in range(2):
        with client.open_transport("R5CT1234", timeout_s=2.0) as conn:
            assert conn.conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)  # small requests go out at once
            assert conn.conn.gettimeout() == 2.0
    assert server.requests == ["host:version", "host:tport:serial:R5CT1234", "host:tport:serial:R5CT1234"]


def test_an_old_server_is_switched_with_host_transport(server_with: Callable[[Answer], _FakeServer]) -> None:
    def adb_40(request: str) -> bytes:
        return b"OKAY" + (_block("0028") if request == "host:version" else b"")

    server = server_with(adb_40)
    AdbServerClient("127.0.0.1", server.port).open_transport("R5CT1234").close()
    assert server.requests == ["host:version", "host:transport:R5CT1234"]


def test_a_silent_stream_times_out(server_with: Callable[[Answer], _FakeServer]) -> None:
    client = AdbServerClient("127.0.0.1", server_with(_adb_41).port)
    conn = client.open_transport("R5CT1234", timeout_s=0.2)
    with conn, pytest.raises(AdbServerTimeout):
        conn.read_exact(4)


def test_a_down_server_is_an_error_and_nothing_is_started() -> None:
    with socket.create_server(("127.0.0.1", 0)) as spare:
        port = spare.getsockname()[1]
    with pytest.raises(AdbServerError, match=f"127.0.0.1:{port}"):
        AdbServerClient("127.0.0.1", port).devices()
    with pytest.raises(ConnectionRefusedError):  # still down: no server was started on it
        socket.create_connection(("127.0.0.1", port), timeout=1.0)
