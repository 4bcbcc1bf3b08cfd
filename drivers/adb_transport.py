"""What adb-shell 0.4.4 gets wrong on TCP, fixed underneath it (docs/adb-protocol.md).

- HardenedTcpTransport: TCP_NODELAY (stock: Nagle + delayed ACK cost ~40-90 ms per command),
  writes loop until every byte is out (stock ignores partial non-blocking sends and
  desynchronises the stream), EOF raises DeviceDisconnected at once (stock spins until its
  read timeout), socket errors become DeviceDisconnected / DeviceUnreachable.
- HardenedIOManager: header and payload in one write on TCP, payload checksums with numpy
  (stock sums bytes in Python: ~2.5 ms per 256 KiB, a ~100 MB/s ceiling).

Both plug into adb-shell's private I/O layer; adb-shell is pinned (==0.4.4) and unmaintained,
so that layer does not move.
"""
from __future__ import annotations

import contextlib
import socket
import struct
from typing import Callable

import numpy as np
from adb_shell import constants, exceptions
from adb_shell.adb_device import AdbDevice, _AdbIOManager
from adb_shell.transport.base_transport import BaseTransport

from phonebench.core.errors import DeviceDisconnected, DeviceUnreachable

_HEADER = struct.Struct(constants.MESSAGE_FORMAT.decode())
_COALESCE_MAX = 64 * 1024  # above this, two sends cost less than concatenating
_VIEW_MIN = 4096           # sync messages at least this big are handed out as views, not copies


def fast_checksum(data: bytes | bytearray | memoryview) -> int:
    """ADB payload checksum (byte sum mod 2**32), vectorised for large payloads."""
    if len(data) < 512:
        return sum(data) & 0xFFFFFFFF
    # uint32 accumulation wraps mod 2**32: exactly the checksum, at twice the speed of uint64
    return int(np.frombuffer(data, dtype=np.uint8).sum(dtype=np.uint32))


class HardenedTcpTransport(BaseTransport):
    """adb-shell's transport interface over TCP, with the fixes above (errors say what; the
    driver says who). Written on BaseTransport, adb-shell's public extension point: its own
    TcpTransport has the faults and keeps its socket in private members."""

    def __init__(self, host: str, port: int, connect_timeout_s: float = 10.0) -> None:
        self.host, self.port = host, port
        self.connect_timeout_s = connect_timeout_s
        self.sock: socket.socket | None = None
        self._timeout: float | None = None

    def connect(self, transport_timeout_s: float | None) -> None:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout_s)
        except OSError as exc:
            reason = "timed out" if isinstance(exc, socket.timeout) else (exc.strerror or str(exc))
            raise DeviceUnreachable(f"TCP connect to {self.host}:{self.port} failed: {reason}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock
        self._timeout = None
        self._set_timeout(transport_timeout_s)

    def close(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_RDWR)
            self.sock.close()
            self.sock = None

    def _set_timeout(self, timeout_s: float | None) -> socket.socket:
        if self.sock is None:
            raise DeviceDisconnected("not connected")
        if timeout_s != self._timeout:  # settimeout costs two fcntl calls: only on change
            self.sock.settimeout(timeout_s)
            self._timeout = timeout_s
        return self.sock

    def _lost(self, exc: OSError) -> DeviceDisconnected:
        return DeviceDisconnected(f"connection lost: {exc.strerror or exc}")

    def bulk_read(self, numbytes: int, transport_timeout_s: float | None) -> bytes:
        sock = self._set_timeout(transport_timeout_s)
        try:
            data = sock.recv(numbytes)
        except socket.timeout:
            raise exceptions.TcpTimeoutException(
                f"Reading from {self.host}:{self.port} timed out ({transport_timeout_s} seconds)") from None
        except OSError as exc:
            raise self._lost(exc) from None
        if not data:
            raise DeviceDisconnected("connection closed by the device")
        return data

    def read_exact(self, numbytes: int, transport_timeout_s: float | None) -> bytearray:
        """Exactly numbytes, straight into one buffer (transport_timeout_s bounds each silence)."""
        sock = self._set_timeout(transport_timeout_s)
        buf = bytearray(numbytes)
        view, got = memoryview(buf), 0
        try:
            while got < numbytes:
                n = sock.recv_into(view[got:])
                if n == 0:
                    raise DeviceDisconnected("connection closed by the device")
                got += n
        except socket.timeout:
            raise exceptions.TcpTimeoutException(
                f"Reading from {self.host}:{self.port} timed out ({transport_timeout_s} seconds)") from None
        except OSError as exc:
            raise self._lost(exc) from None
        return buf

    def bulk_write(self, data: bytes | bytearray | memoryview, transport_timeout_s: float | None) -> int:
        """Send every byte (looping over partial sends); returns len(data)."""
        sock = self._set_timeout(transport_timeout_s)
        view = memoryview(data)
        try:
            while view:
                sent = sock.send(view)
                view = view[sent:]
        except socket.timeout:
            raise exceptions.TcpTimeoutException(
                f"Sending data to {self.host}:{self.port} timed out after {transport_timeout_s} seconds") from None
        except OSError as exc:
            raise self._lost(exc) from None
        return len(data)


class StreamClosedByDevice(exceptions.AdbCommandFailureException):
    """The device closed the stream while the host waited for something else."""


class HardenedIOManager(_AdbIOManager):
    """adb-shell's packet layer with fast checksums; on TCP, one write per packet; an
    unexpected CLSE ends the wait at once (stock adb-shell ignores it and waits out its timeout)."""

    def read(self, expected_cmds, adb_info, allow_zeros=False):  # type: ignore[no-untyped-def]
        if constants.CLSE in expected_cmds:
            return super().read(expected_cmds, adb_info, allow_zeros)
        cmd, arg0, arg1, data = super().read([*expected_cmds, constants.CLSE], adb_info, allow_zeros)
        if cmd == constants.CLSE:
            waited = "/".join(c.decode(errors="replace") for c in expected_cmds)
            raise StreamClosedByDevice(f"the device closed the stream while the host waited for {waited}")
        return cmd, arg0, arg1, data

    def __init__(self, transport: BaseTransport) -> None:
        super().__init__(transport)
        self._tcp = isinstance(transport, HardenedTcpTransport)

    def _send(self, msg, adb_info) -> None:  # type: ignore[no-untyped-def]
        data = msg.data
        header = _HEADER.pack(msg.command, msg.arg0, msg.arg1, len(data), fast_checksum(data), msg.magic)
        timeout = adb_info.transport_timeout_s
        if self._tcp and len(data) <= _COALESCE_MAX:
            self._transport.bulk_write(header + bytes(data), timeout)
            return
        # USB needs header and payload as separate transfers; big TCP payloads aren't copied.
        self._transport.bulk_write(header, timeout)
        if data:
            self._transport.bulk_write(data, timeout)

    def _read_bytes_from_device(self, length, adb_info) -> bytes | bytearray:  # type: ignore[no-untyped-def]
        if self._tcp:
            return self._transport.read_exact(length, adb_info.transport_timeout_s)
        return super()._read_bytes_from_device(length, adb_info)

    def _read_packet_from_device(self, adb_info):  # type: ignore[no-untyped-def]
        header = self._read_bytes_from_device(constants.MESSAGE_SIZE, adb_info)
        cmd, arg0, arg1, length, check, _magic = _HEADER.unpack(header)
        command = constants.WIRE_TO_ID.get(cmd)
        if not command:
            raise exceptions.InvalidCommandError(f"Unknown command: {cmd:#x} (arg0 = {arg0}, arg1 = {arg1})")
        if length == 0:
            return command, arg0, arg1, b""
        data = self._read_bytes_from_device(length, adb_info)
        if fast_checksum(data) != check:
            raise exceptions.InvalidChecksumError(f"Received checksum {fast_checksum(data)} != {check}")
        return command, arg0, arg1, data


class HardenedAdbDevice(AdbDevice):
    """adb-shell's AdbDevice over any transport, with the hardened I/O manager."""

    def __init__(self, transport: BaseTransport, default_transport_timeout_s: float | None = None) -> None:
        super().__init__(transport, default_transport_timeout_s)
        self._io_manager = HardenedIOManager(transport)
        # Called with each WRTE payload before it is acknowledged (AdbPhone.shell_timed stamps
        # arrivals there: a device paced by flow control cannot run ahead of the stamp).
        self.on_write: Callable[[bytes | bytearray], None] | None = None

    def _read_until(self, expected_cmds, adb_info):  # type: ignore[no-untyped-def]
        cmd, _, _, data = self._io_manager.read(expected_cmds, adb_info, allow_zeros=True)
        if cmd == constants.WRTE:
            if self.on_write is not None:
                self.on_write(data)
            self._okay(adb_info)
        return cmd, data

    def _filesync_read_buffered(self, size, adb_info, filesync_info):  # type: ignore[no-untyped-def]
        # Stock appends every packet to one buffer and re-slices it per sync message (two
        # copies of everything pulled). Here a message that fits in the current packet is a
        # view into it (packets are fresh buffers, never reused); only small messages (headers,
        # names, FAIL texts, which adb-shell decodes) and those straddling packets are copied.
        view = getattr(filesync_info, "unread", None) or memoryview(b"")
        if len(view) >= size:
            filesync_info.unread = view[size:]
            return view[:size] if size >= _VIEW_MIN else bytearray(view[:size])
        assembled = bytearray(view)
        while len(assembled) < size:
            _, data = self._read_until([constants.WRTE], adb_info)
            packet = memoryview(data)
            need = size - len(assembled)
            assembled += packet[:need]
            view = packet[need:]
        filesync_info.unread = view
        return assembled
