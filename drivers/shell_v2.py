"""The adb shell protocol (shell v2) on a stream the adb server has switched to a phone.

Packets are `id (1 byte) | length (uint32 LE) | data`, ids from AOSP adb/shell_protocol.h:
0 stdin, 1 stdout, 2 stderr, 3 exit (one byte: the status), 4 close stdin, 5 window size.

- read_shell: stdout and stderr in arrival order, and the exit status. The bench never feeds a
  command, so stdin is closed at once (what `adb shell -n` does).
- read_shell_timed: every stdout packet is stamped on the station clock the moment its last
  byte arrives, then acknowledged with an empty stdin packet. A real adbd writes nothing to the
  command for an empty stdin packet; the emulated adbd holds a streaming command until the
  acknowledgement comes, so its simulated world cannot run ahead of the stamp (docs/adb.md).
"""
from __future__ import annotations

import socket
import struct
from typing import Callable, Protocol

from phonebench.core.errors import TooMuchData
from .limits import MAX_SHELL_PACKET

HEADER = struct.Struct("<BI")
STDIN, STDOUT, STDERR, EXIT, CLOSE_STDIN, WINDOW_SIZE = range(6)
ACK = HEADER.pack(STDIN, 0)            # "stamped": an empty stdin packet
CLOSE = HEADER.pack(CLOSE_STDIN, 0)
_QUICKACK = getattr(socket, "TCP_QUICKACK", None)  # Linux only


class Stream(Protocol):
    """What is needed of a server connection (phonebench.drivers.adb_client.ServerConnection)."""

    conn: socket.socket

    def send_command(self, command: str) -> None: ...

    def check_okay(self) -> None: ...

    def read_exact(self, n: int) -> bytes: ...


def _packet(conn: Stream) -> tuple[int, bytes]:
    try:
        kind, length = HEADER.unpack(conn.read_exact(HEADER.size))
    except EOFError:
        raise EOFError("the phone closed the shell before its exit status") from None
    if length > MAX_SHELL_PACKET:  # refused from the header: nothing read or allocated for it
        raise TooMuchData(f"the phone sent a shell-protocol packet declaring {length} bytes, over the "
                          f"{MAX_SHELL_PACKET} adbd ever frames")
    return kind, conn.read_exact(length) if length else b""


def _take(output: bytearray, data: bytes, limit: int | None) -> None:
    if limit is not None and len(output) + len(data) > limit:
        raise TooMuchData(f"the command's output passed {limit} bytes (the shell output cap)")
    output += data


def _open(conn: Stream, command: str) -> None:
    conn.send_command(f"shell,v2,raw:{command}")
    conn.check_okay()
    _quick_ack(conn)


def _quick_ack(conn: Stream) -> None:
    """ACK what was read at once. The adb server sends its OKAY and then the command's first
    output in two small writes: with the OKAY unacknowledged (Linux delays ACKs ~40 ms) Nagle
    holds the output back. A plain command sends CLOSE_STDIN at once, which carries the ACK; a
    stamped one has nothing to send until its first packet arrives."""
    if _QUICKACK is not None:
        conn.conn.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)


def read_shell(conn: Stream, command: str, limit: int | None = None) -> tuple[bytes, int]:
    """Run `command`; (stdout and stderr in arrival order, exit status). More than `limit` bytes
    of output is TooMuchData."""
    _open(conn, command)
    conn.conn.sendall(CLOSE)
    output = bytearray()
    while True:
        kind, data = _packet(conn)
        if kind in (STDOUT, STDERR):
            _take(output, data, limit)
        elif kind == EXIT:
            return bytes(output), data[0] if data else -1


def read_shell_timed(conn: Stream, command: str, clock: Callable[[], float],
                     limit: int | None = None) -> tuple[float, list[tuple[float, bytes]], bytes, int]:
    """Run `command` with stdout stamped on arrival: (send time, [(arrival, stdout packet)],
    stdout and stderr in arrival order, exit status)."""
    sent_t = clock()
    _open(conn, command)
    chunks: list[tuple[float, bytes]] = []
    output = bytearray()
    while True:
        kind, data = _packet(conn)
        if kind == STDOUT:
            stamp = clock()
            _take(output, data, limit)
            chunks.append((stamp, data))
            conn.conn.sendall(ACK)
        elif kind == STDERR:
            _take(output, data, limit)
        elif kind == EXIT:
            return sent_t, chunks, bytes(output), data[0] if data else -1
