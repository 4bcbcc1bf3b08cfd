"""The host side of ADB without a server, over adb-shell's public pieces (docs/adb-protocol.md).

- HardenedTcpTransport: adb-shell's transport interface (BaseTransport) over TCP, with
  TCP_NODELAY (stock: Nagle + delayed ACK cost ~40-90 ms per command), writes that loop until
  every byte is out (stock ignores partial non-blocking sends and desynchronises the stream),
  EOF raising DeviceDisconnected at once (stock spins until its read timeout), socket errors
  as DeviceDisconnected / DeviceUnreachable.
- HardenedAdbDevice: the ADB packet layer (CNXN/AUTH/OPEN/OKAY/WRTE/CLSE and the sync
  protocol), our own, sending what adb-shell 0.4.4's AdbDevice sends: header and payload in one
  write on TCP, payload checksums with numpy (stock sums bytes in Python: ~2.5 ms per 256 KiB,
  a ~100 MB/s ceiling), an unexpected CLSE ending a wait at once (stock waits out its timeout),
  WRTE payloads stamped before they are acknowledged, zero-copy pulls. adb-shell offers none of
  these through public API (its packet layer is private), hence ours; its transports, signers,
  constants and exceptions are used as they are. Every length the phone declares is checked
  before anything is allocated for it: a packet over the maxdata this host sent in its CNXN, a
  sync block over AOSP's SYNC_DATA_MAX, shell output over its cap are TooMuchData.
"""
from __future__ import annotations

import contextlib
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Callable, Iterator, NamedTuple

import numpy as np
from adb_shell import constants, exceptions
from adb_shell.transport.base_transport import BaseTransport

from phonebench.core.errors import DeviceDisconnected, DeviceUnreachable, TooMuchData
from .limits import MAX_SYNC_DATA, MAX_SYNC_TEXT

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


class DeviceFile(NamedTuple):
    """A LIST entry of the sync protocol."""
    filename: bytes
    mode: int
    size: int
    mtime: int


@dataclass
class _Stream:
    """One ADB stream (OPEN .. CLSE) and the timeouts it runs under."""
    local_id: int
    remote_id: int | None
    transport_timeout_s: float | None
    read_timeout_s: float
    timeout_s: float | None = None


@dataclass
class _Sync:
    """A sync service's send buffer (requests batched into one WRTE, as adb-shell does) and the
    part of the last received packet not yet consumed."""
    message_size: int
    buffer: bytearray
    filled: int = 0
    unread: memoryview = field(default_factory=lambda: memoryview(b""))


class HardenedAdbDevice:
    """The host side of one ADB connection over any adb-shell transport: CNXN and AUTH, then
    streams for shell, reboot and the sync protocol. The packets on the wire are adb-shell
    0.4.4's, message for message (tests/test_adb_driver.py keeps stock adb-shell as the
    reference); over its AdbDevice it adds fast checksums, one write per packet on TCP, an
    unexpected CLSE ending the wait at once, each WRTE payload handed to `on_write` before it is
    acknowledged, and zero-copy sync pulls. adb-shell has no public hook for any of these: its
    packet layer is private, so this one is ours (README "What we wrote ourselves")."""

    def __init__(self, transport: BaseTransport, default_transport_timeout_s: float | None = None) -> None:
        self.transport = transport
        self.default_transport_timeout_s = default_transport_timeout_s
        self.available = False
        self.maxdata = constants.MAX_PUSH_DATA
        # What this host accepts per packet: the maxdata its CNXN declares (the device's maxdata
        # bounds what the host sends, this bounds what the device may send).
        self.max_receive = constants.MAX_ADB_DATA
        self._local_id = 0
        self._tcp = isinstance(transport, HardenedTcpTransport)
        # Called with each WRTE payload before it is acknowledged (AdbPhone.shell_timed stamps
        # arrivals there: a device paced by flow control cannot run ahead of the stamp).
        self.on_write: Callable[[bytes | bytearray], None] | None = None

    @property
    def max_chunk_size(self) -> int:
        return min(constants.MAX_CHUNK_SIZE, self.maxdata // 2) or constants.MAX_PUSH_DATA

    # --- packets ----------------------------------------------------------------------------------
    def _send(self, command: bytes, arg0: int, arg1: int, data: bytes | bytearray | memoryview,
              timeout_s: float | None) -> None:
        wire = constants.ID_TO_WIRE[command]
        header = _HEADER.pack(wire, arg0, arg1, len(data), fast_checksum(data), wire ^ 0xFFFFFFFF)
        if self._tcp and len(data) <= _COALESCE_MAX:
            self.transport.bulk_write(header + bytes(data), timeout_s)
            return
        # USB needs header and payload as separate transfers; big TCP payloads aren't copied.
        self.transport.bulk_write(header, timeout_s)
        if data:
            self.transport.bulk_write(data, timeout_s)

    def _read_bytes(self, length: int, transport_timeout_s: float | None, read_timeout_s: float) -> bytes | bytearray:
        if isinstance(self.transport, HardenedTcpTransport):
            return self.transport.read_exact(length, transport_timeout_s)
        start, data = time.time(), bytearray()
        while len(data) < length:
            data += self.transport.bulk_read(length - len(data), transport_timeout_s)
            if len(data) < length and time.time() - start > read_timeout_s:
                raise exceptions.AdbTimeoutError(f"Timeout: read {len(data)} of {length} bytes")
        return data

    def _packet(self, transport_timeout_s: float | None,
                read_timeout_s: float) -> tuple[bytes, int, int, bytes | bytearray]:
        header = self._read_bytes(constants.MESSAGE_SIZE, transport_timeout_s, read_timeout_s)
        cmd, arg0, arg1, length, check, _magic = _HEADER.unpack(header)
        command = constants.WIRE_TO_ID.get(cmd)
        if not command:
            raise exceptions.InvalidCommandError(f"Unknown command: {cmd:#x} (arg0 = {arg0}, arg1 = {arg1})")
        if length > self.max_receive:  # refused from the header alone: nothing allocated, nothing read
            raise TooMuchData(f"the device sent a {command.decode(errors='replace')} packet declaring {length} bytes, "
                              f"over the {self.max_receive} this host accepts (its CNXN maxdata)")
        if length == 0:
            return command, arg0, arg1, b""
        data = self._read_bytes(length, transport_timeout_s, read_timeout_s)
        if fast_checksum(data) != check:
            raise exceptions.InvalidChecksumError(f"Received checksum {fast_checksum(data)} != {check}")
        return command, arg0, arg1, data

    def _expect(self, expected: list[bytes], transport_timeout_s: float | None,
                read_timeout_s: float) -> tuple[bytes, int, int, bytes | bytearray]:
        """The next packet of one of the expected kinds, any stream (the handshake)."""
        start = time.time()
        while True:
            packet = self._packet(transport_timeout_s, read_timeout_s)
            if packet[0] in expected:
                return packet
            if time.time() - start > read_timeout_s:
                raise exceptions.AdbTimeoutError(f"Never got one of the expected responses: {expected}")

    def _read(self, stream: _Stream, expected: list[bytes]) -> tuple[bytes, int, int, bytes | bytearray]:
        """The stream's next packet of an expected kind. Packets of other streams (late ones of
        streams already closed: one stream runs at a time) are dropped, as are unexpected kinds,
        except CLSE: the device gave up on the stream, so waiting on is pointless."""
        start = time.time()
        while True:
            cmd, arg0, arg1, data = self._packet(stream.transport_timeout_s, stream.read_timeout_s)
            ours = (stream.remote_id is None or arg0 in (0, stream.remote_id)) and arg1 in (0, stream.local_id)
            if ours and cmd in expected:
                return cmd, arg0, arg1, data
            if ours and cmd == constants.CLSE:
                waited = "/".join(c.decode(errors="replace") for c in expected)
                raise StreamClosedByDevice(f"the device closed the stream while the host waited for {waited}")
            if time.time() - start > stream.read_timeout_s:
                raise exceptions.AdbTimeoutError(f"Never got one of the expected responses: {expected}")

    def _read_until(self, stream: _Stream, expected: list[bytes]) -> tuple[bytes, bytes | bytearray]:
        cmd, _, _, data = self._read(stream, expected)
        if cmd == constants.WRTE:
            self._acknowledge(stream, data)
        return cmd, data

    def _acknowledge(self, stream: _Stream, data: bytes | bytearray) -> None:
        """A WRTE payload taken: stamped (on_write), then its OKAY."""
        if self.on_write is not None:
            self.on_write(data)
        self._send(constants.OKAY, stream.local_id, stream.remote_id or 0, b"", stream.transport_timeout_s)

    # --- connection ---------------------------------------------------------------------------------
    def connect(self, rsa_keys: list[Any] | None = None, transport_timeout_s: float | None = None,
                auth_timeout_s: float = constants.DEFAULT_AUTH_TIMEOUT_S,
                read_timeout_s: float = constants.DEFAULT_READ_TIMEOUT_S,
                auth_callback: Callable[["HardenedAdbDevice"], None] | None = None) -> bool:
        """CNXN, then AUTH: each key signs the device's token; if none is known, the first key's
        public key is offered (auth_callback is told) and the user has auth_timeout_s to accept."""
        timeout, read_timeout_s = _timeouts(self._timeout(transport_timeout_s), read_timeout_s, None)
        self.available = False
        self.transport.close()
        self.transport.connect(timeout)
        self._send(constants.CNXN, constants.VERSION, self.max_receive, b"host::%s\0" % _banner(), timeout)
        cmd, arg0, maxdata, token = self._expect([constants.AUTH, constants.CNXN], timeout, read_timeout_s)
        if cmd == constants.AUTH:
            maxdata = self._authenticate(rsa_keys or [], arg0, token, timeout, auth_timeout_s, read_timeout_s,
                                         auth_callback)
        # The device's maxdata sizes the sync send buffer: a device declaring 4 GiB gets this host's own
        self.available, self.maxdata = True, min(maxdata, self.max_receive)
        return True

    def _authenticate(self, rsa_keys: list[Any], arg0: int, token: bytes | bytearray, timeout: float | None,
                      auth_timeout_s: float, read_timeout_s: float,
                      auth_callback: Callable[["HardenedAdbDevice"], None] | None) -> int:
        if not rsa_keys:
            self.transport.close()
            raise exceptions.DeviceAuthError("Device authentication required, no keys available.")
        for key in rsa_keys:
            if arg0 != constants.AUTH_TOKEN:
                self.transport.close()
                raise exceptions.InvalidResponseError(f"Unknown AUTH response: {arg0}")
            self._send(constants.AUTH, constants.AUTH_SIGNATURE, 0, key.Sign(token), timeout)
            cmd, arg0, maxdata, token = self._expect([constants.CNXN, constants.AUTH], timeout, read_timeout_s)
            if cmd == constants.CNXN:
                return maxdata
        public = rsa_keys[0].GetPublicKey()
        if not isinstance(public, (bytes, bytearray)):
            public = public.encode()
        if auth_callback is not None:
            auth_callback(self)
        self._send(constants.AUTH, constants.AUTH_RSAPUBLICKEY, 0, bytes(public) + b"\0", timeout)
        _, _, maxdata, _ = self._expect([constants.CNXN], auth_timeout_s, read_timeout_s)
        return maxdata

    def close(self) -> None:
        self.available = False
        self.transport.close()

    def _timeout(self, transport_timeout_s: float | None) -> float | None:
        return transport_timeout_s if transport_timeout_s is not None else self.default_transport_timeout_s

    def _open(self, destination: bytes, transport_timeout_s: float | None, read_timeout_s: float,
              timeout_s: float | None) -> _Stream:
        if not self.available:
            raise exceptions.AdbConnectionError("ADB command not sent: not connected")
        self._local_id = self._local_id % (2 ** 32 - 1) + 1
        stream = _Stream(self._local_id, None, *_timeouts(self._timeout(transport_timeout_s), read_timeout_s, timeout_s),
                         timeout_s)
        self._send(constants.OPEN, stream.local_id, 0, destination + b"\0", stream.transport_timeout_s)
        _, stream.remote_id, _, _ = self._read(stream, [constants.OKAY])
        return stream

    def _close(self, stream: _Stream) -> None:
        self._send(constants.CLSE, stream.local_id, stream.remote_id or 0, b"", stream.transport_timeout_s)
        self._read_until(stream, [constants.CLSE])

    # --- services -----------------------------------------------------------------------------------
    def shell(self, command: str, transport_timeout_s: float | None = None,
              read_timeout_s: float = constants.DEFAULT_READ_TIMEOUT_S, timeout_s: float | None = None,
              decode: bool = True, max_bytes: int | None = None) -> str | bytes:
        """`shell:command`: its output (v1: stdout and stderr together) until the device closes;
        more than max_bytes of it is TooMuchData."""
        stream = self._open(b"shell:" + command.encode(), transport_timeout_s, read_timeout_s, timeout_s)
        start, output, size = time.time(), [], 0
        while True:
            cmd, _, _, data = self._read(stream, [constants.CLSE, constants.WRTE])
            if cmd == constants.CLSE:
                self._send(constants.CLSE, stream.local_id, stream.remote_id or 0, b"", stream.transport_timeout_s)
                break
            size += len(data)
            if max_bytes is not None and size > max_bytes:  # before the OKAY: the device gets no more room
                raise TooMuchData(f"the command's output passed {max_bytes} bytes (the shell output cap)")
            self._acknowledge(stream, data)
            output.append(data)
            if timeout_s is not None and time.time() - start > timeout_s:
                raise exceptions.AdbTimeoutError(f"The command did not complete within {timeout_s} seconds")
        raw = b"".join(output)
        return raw.decode("utf8", "backslashreplace") if decode else raw

    def reboot(self, transport_timeout_s: float | None = None,
               read_timeout_s: float = constants.DEFAULT_READ_TIMEOUT_S, timeout_s: float | None = None) -> None:
        self._open(b"reboot:", transport_timeout_s, read_timeout_s, timeout_s)

    def stat(self, device_path: str, transport_timeout_s: float | None = None,
             read_timeout_s: float = constants.DEFAULT_READ_TIMEOUT_S) -> tuple[int, int, int]:
        stream, sync = self._sync(device_path, transport_timeout_s, read_timeout_s, constants.FILESYNC_STAT_FORMAT)
        self._sync_send(stream, sync, constants.STAT, device_path.encode())
        _, (mode, size, mtime), _ = self._sync_read(stream, sync, [constants.STAT])
        self._close(stream)
        return mode, size, mtime

    def list(self, device_path: str, transport_timeout_s: float | None = None,
             read_timeout_s: float = constants.DEFAULT_READ_TIMEOUT_S) -> list[DeviceFile]:
        stream, sync = self._sync(device_path, transport_timeout_s, read_timeout_s, constants.FILESYNC_LIST_FORMAT)
        self._sync_send(stream, sync, constants.LIST, device_path.encode())
        files = []
        while True:
            cmd_id, header, name = self._sync_read(stream, sync, [constants.DENT, constants.DONE])
            if cmd_id == constants.DONE:
                break
            mode, size, mtime = header
            files.append(DeviceFile(bytes(name), mode, size, mtime))
        self._close(stream)
        return files

    def pull(self, device_path: str, local_path: str | BinaryIO, transport_timeout_s: float | None = None,
             read_timeout_s: float = constants.DEFAULT_READ_TIMEOUT_S) -> None:
        """RECV into a file path or a stream (which is written packet views: see _sync_read_buffered)."""
        with _opened(local_path, "wb") as sink:
            stream, sync = self._sync(device_path, transport_timeout_s, read_timeout_s,
                                      constants.FILESYNC_PULL_FORMAT)
            try:
                self._sync_send(stream, sync, constants.RECV, device_path.encode())
                while True:
                    cmd_id, _, data = self._sync_read(stream, sync, [constants.DATA, constants.DONE])
                    if cmd_id == constants.DONE:
                        break
                    sink.write(data)
            finally:
                self._close(stream)

    def push(self, local_path: str | BinaryIO, device_path: str, st_mode: int = constants.DEFAULT_PUSH_MODE,
             mtime: int = 0, transport_timeout_s: float | None = None,
             read_timeout_s: float = constants.DEFAULT_READ_TIMEOUT_S) -> None:
        """SEND from a file path or a stream, in DATA blocks of max_chunk_size."""
        with _opened(local_path, "rb") as source:
            stream, sync = self._sync(device_path, transport_timeout_s, read_timeout_s,
                                      constants.FILESYNC_PUSH_FORMAT)
            self._sync_send(stream, sync, constants.SEND, f"{device_path},{int(st_mode)}".encode())
            while data := source.read(self.max_chunk_size):
                self._sync_send(stream, sync, constants.DATA, data)
            self._sync_send(stream, sync, constants.DONE, b"", size=mtime or int(time.time()))
            cmd_id, _, reply = self._sync_read(stream, sync, [constants.OKAY, constants.FAIL])
            if cmd_id == constants.FAIL:
                raise exceptions.PushFailedError(reply)
        self._close(stream)

    # --- the sync protocol -----------------------------------------------------------------------
    def _sync(self, device_path: str, transport_timeout_s: float | None, read_timeout_s: float,
              message_format: bytes) -> tuple[_Stream, _Sync]:
        if not device_path:
            raise exceptions.DevicePathInvalidError("Cannot use an empty device path")
        stream = self._open(b"sync:", transport_timeout_s, read_timeout_s, None)
        return stream, _Sync(struct.calcsize(message_format), bytearray(self.maxdata))

    def _sync_send(self, stream: _Stream, sync: _Sync, command_id: bytes, data: bytes, size: int | None = None) -> None:
        # adb-shell's rule, kept for the same packets: what would reach maxdata flushes first
        if sync.filled + sync.message_size + len(data) >= self.maxdata:
            self._sync_flush(stream, sync)
        message = struct.pack("<2I", constants.FILESYNC_ID_TO_WIRE[command_id], len(data) if size is None else size)
        sync.buffer[sync.filled:sync.filled + 8 + len(data)] = message + data
        sync.filled += 8 + len(data)

    def _sync_flush(self, stream: _Stream, sync: _Sync) -> None:
        self._send(constants.WRTE, stream.local_id, stream.remote_id or 0, memoryview(sync.buffer)[:sync.filled],
                   stream.transport_timeout_s)
        self._read_until(stream, [constants.OKAY])
        sync.filled = 0

    def _sync_read(self, stream: _Stream, sync: _Sync,
                   expected: list[bytes]) -> tuple[bytes, tuple[int, ...], bytes | bytearray | memoryview]:
        if sync.filled:
            self._sync_flush(stream, sync)
        header = struct.unpack(f"<{sync.message_size // 4}I", self._sync_read_buffered(stream, sync, sync.message_size))
        command_id = constants.FILESYNC_WIRE_TO_ID[header[0]]  # KeyError on garbage: a link error
        if command_id == constants.STAT:
            data: bytes | bytearray | memoryview = b""
            fields = header[1:]
        else:
            bound = MAX_SYNC_DATA if command_id == constants.DATA else MAX_SYNC_TEXT
            if header[-1] > bound:  # AOSP's adbd never sends more in one sync message
                raise TooMuchData(f"the device sent a sync {command_id.decode(errors='replace')} message declaring "
                                  f"{header[-1]} bytes, over the protocol's {bound}")
            data, fields = self._sync_read_buffered(stream, sync, header[-1]), header[1:-1]
        if command_id not in expected:
            if command_id == constants.FAIL:
                raise exceptions.AdbCommandFailureException(f"Command failed: {bytes(data).decode(errors='replace')}")
            raise exceptions.InvalidResponseError(f"Expected one of {expected}, got {command_id}")
        return command_id, fields, data

    def _sync_read_buffered(self, stream: _Stream, sync: _Sync, size: int) -> bytearray | memoryview:
        # A message that fits in the current packet is a view into it (packets are fresh
        # buffers, never reused); only small messages (headers, names, FAIL texts) and those
        # straddling packets are copied.
        view = sync.unread
        if len(view) >= size:
            sync.unread = view[size:]
            return view[:size] if size >= _VIEW_MIN else bytearray(view[:size])
        assembled = bytearray(view)
        while len(assembled) < size:
            _, data = self._read_until(stream, [constants.WRTE])
            packet = memoryview(data)
            need = size - len(assembled)
            assembled += packet[:need]
            view = packet[need:]
        sync.unread = view
        return assembled


def _timeouts(transport_timeout_s: float | None, read_timeout_s: float,
              timeout_s: float | None) -> tuple[float, float]:
    """(transport, read) timeouts, each bounded by the next, as adb-shell bounds them."""
    read = read_timeout_s if timeout_s is None else min(read_timeout_s, timeout_s)
    return (read if transport_timeout_s is None else min(transport_timeout_s, read)), read


def _banner() -> bytes:
    try:
        return socket.gethostname().encode()
    except OSError:
        return b"unknown"


@contextlib.contextmanager
def _opened(target: str | BinaryIO, mode: str) -> Iterator[BinaryIO]:
    """A path opened (and closed), or a stream as it is."""
    if isinstance(target, str):
        with open(target, mode) as handle:  # noqa: SIM115 (binary, mode given)
            yield handle  # type: ignore[misc]
    else:
        yield target
