"""The adb server's client protocol (smart sockets), our own: what ServerAdbPhone needs of it.

A request is its length as four hex digits and the text ("000chost:version"); the server
answers OKAY, or FAIL and a length-prefixed message. After `host:transport:SERIAL` (or
`host:tport:serial:SERIAL`, which also answers the transport's id) the same socket is a stream
to the phone's service. AOSP documents it in adb/SERVICES.TXT and adb/protocol.txt.

Why not adbutils: its connection class can only be tuned through private members (it starts an
adb server on its own default port when ours is down, leaves Nagle on, so each small request
waits out a delayed ACK, ~40 ms a command, and sleeps 10 ms in every close), and the protocol is
a dozen lines.
"""
from __future__ import annotations

import contextlib
import platform
import socket

from phonebench.core.errors import TooMuchData

_OKAY, _FAIL = b"OKAY", b"FAIL"
_CONNECT_TIMEOUT_S = 3.0  # the server is local or on the lab's LAN: it answers at once or not at all
# One recv asks for at most this much: recv(n) allocates n at once, and n may come from the phone.
_RECV_MAX = 1024 * 1024


class AdbServerError(Exception):
    """The adb server refused a request (its FAIL message), or its stream broke off."""


class AdbServerTimeout(AdbServerError):
    """The adb server (or the phone behind it) did not answer in time."""


class ServerConnection:
    """One socket to the adb server: requests, their answers, then the service's stream."""

    def __init__(self, host: str, port: int, timeout_s: float | None = None) -> None:
        try:
            sock = socket.create_connection((host, port), timeout=_CONNECT_TIMEOUT_S)
        except socket.timeout:
            raise AdbServerTimeout(f"connect to adb server {host}:{port} timed out") from None
        except OSError as exc:
            raise AdbServerError(f"connect to adb server {host}:{port} failed: {exc}") from None
        # Requests are small writes: with Nagle each one waits for the last one's delayed ACK.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        if platform.system() == "Linux":  # a server host that vanished is noticed within a minute
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 10)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 3)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 10)
        sock.settimeout(timeout_s)
        self.conn = sock  # the name shell_v2.Stream and the sync channel use

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.close()

    def __enter__(self) -> "ServerConnection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_command(self, command: str) -> None:
        raw = command.encode()
        self.conn.sendall(b"%04x" % len(raw) + raw)

    def check_okay(self) -> None:
        try:
            status = self.read_exact(4)
        except EOFError:
            raise AdbServerError("the adb server closed the connection") from None
        if status == _FAIL:
            raise AdbServerError(self.read_string_block())
        if status != _OKAY:
            raise AdbServerError(f"unexpected answer from the adb server: {status!r}")

    def read_exact(self, n: int) -> bytes:
        """Exactly n bytes; EOFError if the stream ends first. A block that arrives in one piece
        (a sync DATA block usually does) is returned without a copy."""
        parts, got = [], 0
        sock = self.conn
        try:
            while got < n:
                chunk = sock.recv(min(n - got, _RECV_MAX))
                if not chunk:
                    raise EOFError(f"expected {n} bytes, got {got}")
                parts.append(chunk)
                got += len(chunk)
        except socket.timeout:
            raise AdbServerTimeout("the adb server stream timed out") from None
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def read_string_block(self) -> str:
        """A hex length and that many bytes of text (the server's answers and FAIL messages)."""
        try:
            length = int(self.read_exact(4), 16)
        except (EOFError, ValueError):
            raise AdbServerError("the adb server closed the connection") from None
        return self.read_exact(length).decode("utf-8", errors="replace")

    def read_until_close(self, limit: int | None = None) -> bytes:
        """Everything until the stream closes; more than `limit` bytes is TooMuchData."""
        parts, size = [], 0
        sock = self.conn
        try:
            while chunk := sock.recv(65536):
                size += len(chunk)
                if limit is not None and size > limit:
                    raise TooMuchData(f"the command's output passed {limit} bytes (the shell output cap)")
                parts.append(chunk)
        except socket.timeout:
            raise AdbServerTimeout("the adb server stream timed out") from None
        return b"".join(parts)


class AdbServerClient:
    """The requests the bench makes of one adb server (host, port)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._version: int | None = None

    def connection(self, timeout_s: float | None = None) -> ServerConnection:
        return ServerConnection(self.host, self.port, timeout_s)

    def _ask(self, request: str, timeout_s: float | None = None) -> str:
        with self.connection(timeout_s) as conn:
            conn.send_command(request)
            conn.check_okay()
            return conn.read_string_block()

    def server_version(self) -> int:
        # Asked before every transport switch: cached, one round trip per command saved
        if self._version is None:
            self._version = int(self._ask("host:version"), 16)
        return self._version

    def devices(self) -> str:
        """The `host:devices` listing: one "SERIAL<TAB>STATE" line per device."""
        return self._ask("host:devices")

    def connect(self, address: str, timeout_s: float | None = None) -> str:
        """`adb connect ADDRESS`; the server's answer ("connected to ...", "failed to ...")."""
        return self._ask(f"host:connect:{address}", timeout_s)

    def disconnect(self, address: str) -> str:
        """`adb disconnect ADDRESS`; a refusal (not connected) is answered as its message."""
        try:
            return self._ask(f"host:disconnect:{address}")
        except AdbServerError as exc:
            return str(exc)

    def features(self, serial: str, timeout_s: float | None = None) -> str:
        """The phone's feature list, comma-separated ("shell_v2,cmd,stat_v2,...")."""
        return self._ask(f"host-serial:{serial}:features", timeout_s)

    def kill(self) -> None:
        """`adb kill-server`."""
        with self.connection() as conn:
            conn.send_command("host:kill")
            conn.check_okay()

    def open_transport(self, serial: str, timeout_s: float | None = None) -> ServerConnection:
        """A connection switched to the phone: what is sent next goes to its adbd."""
        tport = self.server_version() >= 41
        conn = self.connection(timeout_s)
        try:
            if tport:
                conn.send_command(f"host:tport:serial:{serial}")
                conn.check_okay()
                conn.read_exact(8)  # the transport id: unused
            else:  # adb 1.0.40 and older have no tport
                conn.send_command(f"host:transport:{serial}")
                conn.check_okay()
        except BaseException:
            conn.close()
            raise
        return conn
