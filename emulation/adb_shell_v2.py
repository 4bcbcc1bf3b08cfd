"""The shell protocol's framing on the emulated adbd, and how it paces a streaming command.

Packets (AOSP adb/shell_protocol.h): `id (1 byte) | length (uint32 LE) | data`; ids 0 stdin,
1 stdout, 2 stderr, 3 exit, 4 close stdin, 5 window size.

Pacing, an emulation property. Over the serverless transport the bench stamps each WRTE before
its OKAY, and the daemon's write waits for that OKAY, so the simulated world stands still until
the host has stamped what the phone sent. Through an adb server it is the server that
acknowledges WRTEs, at once: a world driven only by its own work would run ahead of the bench's
stamps. So a host that stamps says so in the shell protocol itself: after stamping a stdout
packet it sends an empty stdin packet (phonebench.drivers.shell_v2). A real adbd writes nothing to the
command for it and the runtime ignores stdin; this daemon holds a streaming command after each
stdout packet until the host has acknowledged every stdout packet so far. A host that closes
stdin (every plain command the bench runs, `adb shell` from a script) is not waited for; a host
that neither acknowledges nor closes is waited for PACE_WAIT_S of real time once, then no more.
Only output a command streams while it runs (ShellContext.emit) is paced, so ordinary commands
never wait. Waiting is on events, not on wall-clock speed: the simulated time a host sees does
not depend on how fast the machine is.
"""
from __future__ import annotations

import logging
import struct
import threading
import time
from typing import Callable

log = logging.getLogger(__name__)

STDIN, STDOUT, STDERR, EXIT, CLOSE_STDIN, WINDOW_SIZE = range(6)
HEADER = struct.Struct("<BI")
PACE_WAIT_S = 10.0   # real seconds a streaming command waits for a host that never acknowledges
_POLL_S = 0.25       # how often a wait re-checks that the stream is still open


def packet(kind: int, data: bytes) -> bytes:
    return HEADER.pack(kind, len(data)) + data


class HostPace:
    """The host's side of one shell-protocol stream: what it acknowledged on stdin, whether it
    closed stdin. `feed` runs on the connection's reader thread, `paced` on the command's."""

    def __init__(self, where: str) -> None:
        self.where = where
        self._cond = threading.Condition()
        self._buffer = bytearray()
        self._skip = 0  # stdin bytes still to pass by: a packet's data is never kept (nothing reads it)
        self._acks = 0
        self._sent = 0
        self._released = False  # stdin closed, or a wait ran out: no more pacing on this stream

    def feed(self, payload: bytes | bytearray) -> None:
        """Bytes the host wrote to the stream (packets may span WRTEs)."""
        with self._cond:
            view = memoryview(payload)
            passed = min(self._skip, len(view))
            self._skip -= passed
            self._buffer += view[passed:]
            # Only headers are kept: a packet declaring 4 GiB of stdin costs nothing but the wait.
            while not self._skip and len(self._buffer) >= HEADER.size:
                kind, length = HEADER.unpack_from(self._buffer)
                del self._buffer[:HEADER.size]
                if kind == STDIN and length == 0:
                    self._acks += 1
                elif kind == CLOSE_STDIN:
                    self._released = True
                passed = min(length, len(self._buffer))
                del self._buffer[:passed]
                self._skip = length - passed
            self._cond.notify_all()

    def paced(self, send: Callable[[bytes], None], closed: Callable[[], bool]) -> Callable[[bytes], None]:
        """A sink that sends each chunk as a stdout packet, then waits for the host's stamp."""
        def sink(data: bytes) -> None:
            send(packet(STDOUT, data))
            self._await_ack(closed)
        return sink

    def _await_ack(self, closed: Callable[[], bool]) -> None:
        with self._cond:
            self._sent += 1
            deadline = time.monotonic() + PACE_WAIT_S
            while not self._released and self._acks < self._sent and not closed():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    log.info("adbd %s: the host neither acknowledges stdout nor closes stdin; streaming unpaced",
                             self.where)
                    self._released = True
                    break
                self._cond.wait(min(remaining, _POLL_S))
