"""The emulated phone's ADB daemon: a real device-side ADB server on TCP loopback.

Speaks the ADB transport protocol (CNXN, AUTH, OPEN/OKAY/WRTE/CLSE) to any client: the
bench's driver (adb-shell underneath) and the stock `adb` binary alike. One thread reads each
connection; every stream runs in its own thread, so several streams of one connection can be
open at once; a per-connection lock keeps packets whole on the wire.

Services: `shell:<cmd>` (v1: stdout and stderr merged, no exit status), `shell,v2[,raw|pty]
[,TERM=..]:<cmd>` (the shell protocol: stdout, stderr and the exit status in framed packets, as
AOSP's shell_protocol.h defines them), `exec:<cmd>` (stdout only), `sync:` (phonebench.emulation.adb_sync)
and `reboot:` (the phone goes away, comes back after a simulated boot). A command raising
DaemonKilled makes the daemon die like a crashed adbd: every connection drops and nothing more
is accepted.
"""
from __future__ import annotations

import logging
import os
import socket
import struct
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Union

import numpy as np

from .adb_auth import AuthPolicy
from .adb_shell_v2 import EXIT as SHELL_EXIT, STDERR as SHELL_STDERR, STDOUT as SHELL_STDOUT, HostPace, packet
from .adb_sync import SyncSession
from .shell import CommandResult, DaemonKilled

if TYPE_CHECKING:
    from .device import EmulatedPhone

__all__ = ["AdbDaemon", "AuthPolicy", "MAX_DATA", "VERSION", "SUPPORTED_FEATURES", "checksum"]

log = logging.getLogger(__name__)


def _command(name: bytes) -> int:
    return int.from_bytes(name, "little")


A_CNXN, A_AUTH, A_OPEN, A_OKAY = _command(b"CNXN"), _command(b"AUTH"), _command(b"OPEN"), _command(b"OKAY")
A_WRTE, A_CLSE, A_SYNC = _command(b"WRTE"), _command(b"CLSE"), _command(b"SYNC")
_NAMES = {A_CNXN: "CNXN", A_AUTH: "AUTH", A_OPEN: "OPEN", A_OKAY: "OKAY", A_WRTE: "WRTE", A_CLSE: "CLSE",
          A_SYNC: "SYNC"}

VERSION = 0x01000000                 # checksummed packets: what adb-shell requires
VERSION_SKIP_CHECKSUM = 0x01000001
MAX_DATA = 256 * 1024                # advertised maxdata; clients may ask for less
# Largest payload accepted from a client: the maxdata this daemon's CNXN declares (a client sends
# at most the smaller of the two sides' maxdata). Larger is refused from the header, unallocated.
MAX_RECEIVE = MAX_DATA
AUTH_TOKEN, AUTH_SIGNATURE, AUTH_RSAPUBLICKEY = 1, 2, 3
TOKEN_SIZE = 20
# Banner features this daemon really implements; the phone's banner may list more.
SUPPORTED_FEATURES = ("shell_v2", "stat_v2", "ls_v2", "fixed_push_mkdir", "fixed_push_symlink_timestamp")
# A reboot as the phone's clock sees it: down (no adbd), then adbd up but still booting.
REBOOT_DOWN_S, REBOOT_BOOTING_S = 20.0, 10.0
_REBOOT_STEPS = 20      # each phase passes in this many steps ...
_REBOOT_STEP_PAUSE_S = 0.02  # ... with this real pause between, so a host can see the phone gone

_HEADER = struct.Struct("<6I")
Buffer = Union[bytes, bytearray, memoryview]
_INBOX_WINDOW = 2                     # host WRTEs queued per stream before OKAY is held back
_POLL_S = 0.25                        # how often blocked waits re-check that their peer is alive
_STOP_JOIN_S = 2.0
_INTERACTIVE_NOTE = (b"phonebench emulated phone: no interactive shell; "
                     b"run a command instead, e.g. `adb shell getprop`\n")


def checksum(data: Buffer) -> int:
    """ADB v1 payload checksum: the byte sum, mod 2**32."""
    if len(data) < 512:
        return sum(data) & 0xFFFFFFFF
    # uint32 accumulation wraps mod 2**32: exactly the checksum, at twice the speed of uint64
    return int(np.frombuffer(data, dtype=np.uint8).sum(dtype=np.uint32))


def device_banner(phone_banner: bytes) -> bytes:
    """The phone's banner with its feature list cut down to what this daemon implements."""
    text = phone_banner.rstrip(b"\0").decode()
    fields = []
    for field in text.split("::", 1)[-1].split(";"):
        if field.startswith("features="):
            offered = field[len("features="):].split(",")
            dropped = [f for f in offered if f and f not in SUPPORTED_FEATURES]
            if dropped:
                log.debug("adbd: not advertising unimplemented features %s", ",".join(dropped))
            field = "features=" + ",".join(f for f in offered if f in SUPPORTED_FEATURES)
        fields.append(field)
    return f"{text.split('::', 1)[0]}::{';'.join(fields)}\0".encode()


class _Gone(Exception):
    """The stream or its connection closed under a service."""


class _ProtocolError(Exception):
    pass


class _Stream:
    """One ADB stream as its service sees it: flow-controlled writes, packet reads, close.

    Outbound, one WRTE is in flight (no delayed_ack): the next packet is framed while the
    previous one travels and the connection's reader sends it the moment the OKAY arrives.
    Inbound, the reader acknowledges a host WRTE at once while the service has fewer than
    _INBOX_WINDOW packets queued, so the host sends while the service works.
    """

    def __init__(self, conn: "_Connection", local_id: int, remote_id: int, service: str) -> None:
        self.conn, self.local_id, self.remote_id, self.service = conn, local_id, remote_id, service
        self.closed = False
        self._cond = threading.Condition()
        self._in_flight = False
        self._next: tuple[bytes, Buffer] | None = None
        self._inbox: deque[bytearray] = deque()
        self._okay_owed = False
        self._clse_sent = False
        # The shell protocol's stdin, as far as pacing a streaming command goes (adb_shell_v2).
        self.pace = HostPace(f"{conn.peer} {service[:40]}") if "v2" in (_shell_options(service) or ()) else None

    # --- called by the service ------------------------------------------------------------
    def write(self, data: Buffer) -> None:
        self.write_all((data,))

    def write_all(self, pieces: Iterable[Buffer]) -> None:
        """Send the concatenation of `pieces` as WRTE packets of at most maxdata; returns once
        the host has acknowledged the last one."""
        for payload in _packets(pieces, self.conn.maxdata):
            header = self.conn.header(A_WRTE, self.local_id, self.remote_id, payload)
            with self._cond:
                while self._next is not None and not self.closed:
                    self._cond.wait(_POLL_S)
                if self.closed:
                    raise _Gone()
                if self._in_flight:
                    self._next = (header, payload)
                else:
                    self._in_flight = True
                    self.conn.send_framed(header, payload)
        with self._cond:
            while (self._next is not None or self._in_flight) and not self.closed:
                self._cond.wait(_POLL_S)
            if self._next is not None or self._in_flight:
                raise _Gone()

    def read(self) -> bytearray | None:
        """The host's next WRTE payload; None once the stream is closed and drained."""
        with self._cond:
            while not self._inbox and not self.closed:
                self._cond.wait(_POLL_S)
            if not self._inbox:
                return None
            payload = self._inbox.popleft()
            owed, self._okay_owed = self._okay_owed, False
        if owed and not self.closed:
            self.conn.send(A_OKAY, self.local_id, self.remote_id)
        return payload

    def close(self) -> None:
        with self._cond:
            if self._clse_sent:
                return
            self._clse_sent = True
        self.conn.forget(self)
        try:
            self.conn.send(A_CLSE, self.local_id, self.remote_id)
        except _Gone:
            pass
        self.on_close()

    # --- called by the connection's reader -----------------------------------------------
    def on_okay(self) -> None:
        with self._cond:
            if self._next is not None:
                header, payload = self._next
                self._next = None
                self.conn.send_framed(header, payload)  # still one in flight
            else:
                self._in_flight = False
            self._cond.notify_all()

    def on_write(self, payload: bytearray) -> None:
        with self._cond:
            # OKAY before the service can see the payload: the host gets it ahead of any reply.
            if len(self._inbox) + 1 < _INBOX_WINDOW:
                self.conn.send(A_OKAY, self.local_id, self.remote_id)
            else:
                self._okay_owed = True
            self._inbox.append(payload)
            self._cond.notify_all()

    def on_close(self) -> None:
        with self._cond:
            self.closed = True
            self._cond.notify_all()


def _packets(pieces: Iterable[Buffer], size: int) -> Iterator[Buffer]:
    """Re-cut a sequence of buffers into packets of `size` bytes (the last one shorter);
    large buffers are sliced, not copied."""
    buf = bytearray()
    for piece in pieces:
        view = memoryview(piece)
        while not buf and len(view) >= size:
            yield view[:size]
            view = view[size:]
        while view:
            take = min(len(view), size - len(buf))
            buf += view[:take]
            view = view[take:]
            if len(buf) == size:
                yield buf
                buf = bytearray()
    if buf:
        yield buf


class _Connection:
    def __init__(self, daemon: "AdbDaemon", sock: socket.socket, peer: str) -> None:
        self.daemon, self.sock, self.peer = daemon, sock, peer
        self.maxdata = MAX_DATA
        self.closed = False
        self.online = False
        self._check_checksums = False
        self._token = b""
        self._send_lock = threading.Lock()
        self._streams: dict[int, _Stream] = {}
        self._streams_lock = threading.Lock()
        self._next_id = 1
        self._header = bytearray(_HEADER.size)

    # --- wire ----------------------------------------------------------------------------
    @staticmethod
    def header(command: int, arg0: int, arg1: int, payload: Buffer = b"") -> bytes:
        return _HEADER.pack(command, arg0, arg1, len(payload), checksum(payload), command ^ 0xFFFFFFFF)

    def send(self, command: int, arg0: int, arg1: int, payload: Buffer = b"") -> None:
        self.send_framed(self.header(command, arg0, arg1, payload), payload)

    def send_framed(self, header: bytes, payload: Buffer) -> None:
        with self._send_lock:
            if self.closed:
                raise _Gone()
            try:
                _send_buffers(self.sock, header, payload)
            except OSError as exc:
                log.debug("adbd %s: send failed: %s", self.peer, exc)
                self.closed = True
                raise _Gone() from None

    def _recv_into(self, buf: bytearray | memoryview) -> bool:
        view, got = memoryview(buf), 0
        while got < len(view):
            n = self.sock.recv_into(view[got:])
            if n == 0:
                return False
            got += n
        return True

    def _read_packet(self) -> tuple[int, int, int, bytearray] | None:
        if not self._recv_into(self._header):
            return None
        command, arg0, arg1, length, check, magic = _HEADER.unpack(self._header)
        if magic != command ^ 0xFFFFFFFF:
            raise _ProtocolError(f"bad magic {magic:#x} for command {command:#x}")
        if length > MAX_RECEIVE:
            raise _ProtocolError(f"{_NAMES.get(command, hex(command))} payload of {length} bytes exceeds the "
                                 f"{MAX_RECEIVE} this daemon's CNXN allows")
        payload = bytearray(length)
        if length and not self._recv_into(payload):
            return None
        verify = self._check_checksums or (command == A_CNXN and arg0 < VERSION_SKIP_CHECKSUM)
        if verify and length and checksum(payload) != check:
            raise _ProtocolError(f"{_NAMES.get(command, hex(command))} payload checksum mismatch")
        return command, arg0, arg1, payload

    # --- life cycle ------------------------------------------------------------------------
    def run(self) -> None:
        try:
            while not self.closed:
                packet = self._read_packet()
                if packet is None:
                    break
                self._dispatch(*packet)
        except _ProtocolError as exc:
            log.warning("adbd %s: protocol error, dropping connection: %s", self.peer, exc)
        except (OSError, _Gone):
            pass
        finally:
            self.close()
            log.info("adbd %s: disconnected", self.peer)

    def close(self) -> None:
        # No send lock here: a sender blocked on a full socket must not block the close
        # (shutting the socket down is what unblocks it).
        self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        with self._streams_lock:
            streams, self._streams = list(self._streams.values()), {}
        for stream in streams:
            stream.on_close()
        self.daemon._forget(self)

    def forget(self, stream: _Stream) -> None:
        with self._streams_lock:
            self._streams.pop(stream.local_id, None)

    # --- packets -----------------------------------------------------------------------------
    def _dispatch(self, command: int, arg0: int, arg1: int, payload: bytearray) -> None:
        if command == A_CNXN:
            self._on_connect(arg0, arg1, payload)
        elif command == A_AUTH:
            self._on_auth(arg0, bytes(payload))
        elif not self.online:
            log.debug("adbd %s: %s before authentication, ignored", self.peer, _NAMES.get(command, hex(command)))
        elif command == A_OPEN:
            self._on_open(arg0, bytes(payload).rstrip(b"\0").decode("utf-8", errors="replace"))
        else:
            with self._streams_lock:
                stream = self._streams.get(arg1)
            if stream is None:
                return  # e.g. the host's CLSE answering ours
            if command == A_OKAY:
                stream.on_okay()
            elif command == A_WRTE:
                if stream.service == "sync:":
                    stream.on_write(payload)
                else:  # shell stdin: no command here reads it; the shell protocol's may pace one
                    self.send(A_OKAY, stream.local_id, stream.remote_id)
                    if stream.pace is not None:
                        stream.pace.feed(payload)
            elif command == A_CLSE:
                stream.close()

    def _on_connect(self, version: int, maxdata: int, banner: bytearray) -> None:
        self.maxdata = min(maxdata, MAX_DATA) if maxdata > 0 else 4096  # 4096: the v1 default
        self._check_checksums = min(version, VERSION) < VERSION_SKIP_CHECKSUM
        log.info("adbd %s: CNXN from %s (version %#x, maxdata %d)", self.peer,
                 bytes(banner).rstrip(b"\0").decode(errors="replace")[:60], version, maxdata)
        if self.daemon.auth is None:
            self._go_online()
        else:
            self._send_token()

    def _send_token(self) -> None:
        self._token = os.urandom(TOKEN_SIZE)
        self.send(A_AUTH, AUTH_TOKEN, 0, self._token)

    def _go_online(self) -> None:
        self.online = True
        self.send(A_CNXN, VERSION, MAX_DATA, self.daemon.banner)

    def _on_auth(self, kind: int, payload: bytes) -> None:
        policy = self.daemon.auth
        if policy is None or self.online or not self._token:
            return
        if kind == AUTH_SIGNATURE:
            key = policy.verify(self._token, payload)
            if key is not None:
                log.info("adbd %s: authenticated with key %s (%s)", self.peer, key.fingerprint, key.comment)
                self._go_online()
            else:
                self._send_token()  # as adbd: a fresh token for the host's next key
        elif kind == AUTH_RSAPUBLICKEY:
            if policy.offer(payload) is not None:
                self._go_online()
            else:  # as a phone whose user refuses (or ignores) the prompt: the link stays, unanswered
                log.info("adbd %s: key refused; the connection waits unauthorized", self.peer)

    def _on_open(self, remote_id: int, service: str) -> None:
        if not service.startswith(("shell:", "shell,", "exec:")) and service not in ("sync:", "reboot:"):
            log.info("adbd %s: unsupported service %r", self.peer, service)
            self.send(A_CLSE, 0, remote_id)
            return
        with self._streams_lock:
            local_id, self._next_id = self._next_id, self._next_id % 0xFFFFFFFF + 1
            stream = self._streams[local_id] = _Stream(self, local_id, remote_id, service)
        self.daemon._spawn(self._serve, stream, name=f"adbd-{self.daemon.port}-{service[:16]}")

    # --- services ------------------------------------------------------------------------------
    def _serve(self, stream: _Stream) -> None:
        try:
            self.send(A_OKAY, stream.local_id, stream.remote_id)
            if stream.service == "sync:":
                SyncSession(stream, self.daemon.phone.fs).serve()
            elif stream.service == "reboot:":
                self.daemon.reboot()
            else:
                command = stream.service.partition(":")[2]
                if stream.pace is not None:
                    self._run_v2(stream, stream.pace, command)
                else:
                    self._run_command(stream, command, merge_stderr=stream.service.startswith("shell"))
        except DaemonKilled as exc:
            log.warning("adbd %s: daemon killed by `%s` (injected fault)", self.peer, exc)
            self.daemon.kill()
        except _Gone:
            pass
        except Exception:  # a bug in a service must not take the daemon down silently
            log.exception("adbd %s: service %r failed", self.peer, stream.service)
        finally:
            stream.close()

    def _run_command(self, stream: _Stream, command: str, merge_stderr: bool) -> None:
        if not command.strip():
            stream.write(_INTERACTIVE_NOTE)
            return
        result = self.daemon.phone.shell.execute(command, sink=stream.write, merge_stderr=merge_stderr,
                                                 closed=lambda: stream.closed)
        output = result.stdout + result.stderr if merge_stderr else result.stdout
        if output:
            stream.write(output)


    def _run_v2(self, stream: _Stream, pace: HostPace, command: str) -> None:
        """Shell protocol: stdout and stderr kept apart, then the exit status (one byte). What a
        command streams as it runs goes out at once, paced by the host (adb_shell_v2)."""
        if not command.strip():
            stream.write(packet(SHELL_STDOUT, _INTERACTIVE_NOTE) + packet(SHELL_EXIT, b"\0"))
            return
        try:
            result = self.daemon.phone.shell.execute(command, sink=pace.paced(stream.write, lambda: stream.closed),
                                                     closed=lambda: stream.closed)
        except (DaemonKilled, _Gone):
            raise
        except Exception as exc:  # whatever broke, the host gets an exit status, never a silent close
            if stream.closed:
                raise
            log.exception("adbd %s: shell command %r failed", self.peer, command[:80])
            result = CommandResult(stderr=f"/system/bin/sh: emulated shell failed: {type(exc).__name__}\n".encode(),
                                   status=1)
        pieces = [packet(kind, data) for kind, data in ((SHELL_STDOUT, result.stdout),
                                                        (SHELL_STDERR, result.stderr)) if data]
        stream.write_all([*pieces, packet(SHELL_EXIT, bytes([result.status & 0xFF]))])


def _shell_options(service: str) -> list[str] | None:
    """`shell,v2,raw:cmd` -> ["v2", "raw"]; None for a service that is not a shell."""
    kind = service.partition(":")[0]
    name, *options = kind.split(",")
    return options if name == "shell" else None


def _send_buffers(sock: socket.socket, header: bytes, payload: Buffer) -> None:
    """Header and payload in one system call where possible (with TCP_NODELAY: one segment)."""
    if len(payload) < 4096:
        sock.sendall(header + bytes(payload))
        return
    buffers = [memoryview(header), memoryview(payload)]
    while buffers:
        sent = sock.sendmsg(buffers)
        while buffers and sent >= len(buffers[0]):
            sent -= len(buffers[0])
            buffers.pop(0)
        if buffers and sent:
            buffers[0] = buffers[0][sent:]


class AdbDaemon:
    """ADB daemon of one emulated phone. auth=None: no authentication (straight CNXN)."""

    def __init__(self, phone: "EmulatedPhone", host: str = "127.0.0.1", port: int = 0,
                 auth: AuthPolicy | None = None) -> None:
        self.phone = phone
        self.host = host
        self.auth = auth
        self.banner = device_banner(phone.banner)
        self._requested_port = port
        self._port: int | None = None
        self._listener: socket.socket | None = None
        self._lock = threading.Lock()
        self._connections: set[_Connection] = set()
        self._threads: set[threading.Thread] = set()
        self._stopped = False  # stop() was called: a reboot in progress must not bring it back

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("AdbDaemon not started")
        return self._port

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def connection_count(self) -> int:
        with self._lock:
            return len(self._connections)

    @property
    def listening(self) -> bool:
        return self._listener is not None

    def start(self) -> int:
        """Listen and serve in background threads; returns the bound port."""
        if self._listener is not None:
            return self.port
        self._stopped = False
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, self._port or self._requested_port))
        listener.listen(16)
        listener.settimeout(_POLL_S)
        self._listener = listener
        self._port = listener.getsockname()[1]
        self._spawn(self._accept_loop, listener, name=f"adbd-{self._port}-accept")
        log.info("adbd for %s listening on %s", self.phone.spec.serial, self.address)
        return self._port

    def revive(self) -> int:
        """Start listening again on the same port after kill()."""
        return self.start()

    def reboot(self) -> None:
        """`adb reboot`: every connection drops, the phone is away for REBOOT_DOWN_S of its
        simulated time, then adbd is back while the boot finishes (sys.boot_completed 0 -> 1).
        With the fault "no-return-after-reboot" it never comes back."""
        phone = self.phone
        phone.props["sys.boot_completed"] = "0"
        phone.logs.log("I", "ShutdownThread", "Rebooting, reason: adb", pid=1000)
        log.info("adbd %s: rebooting %s", self._port, phone.spec.serial)
        self.kill()
        self._spawn(self._boot, name=f"adbd-{self._port}-boot")

    def _boot(self) -> None:
        def elapse(seconds: float) -> bool:
            for _ in range(_REBOOT_STEPS):
                time.sleep(_REBOOT_STEP_PAUSE_S)
                if self._stopped:
                    return False
                self.phone.world.wait(seconds / _REBOOT_STEPS)
            return True

        if not elapse(REBOOT_DOWN_S):
            return
        if "no-return-after-reboot" in self.phone.spec.faults:
            log.warning("adbd %s: %s stays down after the reboot (injected fault)", self._port, self.phone.spec.serial)
            return
        self.phone.boot()
        with self._lock:
            if self._stopped:
                return
        self.start()
        if not elapse(REBOOT_BOOTING_S):
            return
        self.phone.props["sys.boot_completed"] = "1"
        self.phone.logs.log("I", "ActivityManager", "Boot completed", pid=1000)

    def kill(self) -> None:
        """Die like a crashed adbd: stop accepting and drop every connection at once."""
        with self._lock:
            listener, self._listener = self._listener, None
            connections = list(self._connections)
        if listener is not None:
            _close_socket(listener)
        for conn in connections:
            conn.close()

    def stop(self) -> None:
        """kill(), then wait (bounded) for every thread to end."""
        self._stopped = True
        self.kill()
        deadline = time.monotonic() + _STOP_JOIN_S
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            # ident None: spawned a moment ago and not started yet; it finds everything closed.
            if thread is not threading.current_thread() and thread.ident is not None:
                thread.join(max(0.0, deadline - time.monotonic()))
        stragglers = [t.name for t in threads if t.is_alive() and t is not threading.current_thread()]
        if stragglers:  # a device command still running: daemon threads, gone at exit
            log.warning("adbd %s: threads still busy after stop: %s", self._port, ", ".join(stragglers))

    def __enter__(self) -> "AdbDaemon":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- internals --------------------------------------------------------------------------
    def _accept_loop(self, listener: socket.socket) -> None:
        while self._listener is listener:
            try:
                sock, (peer_host, peer_port) = listener.accept()
            except socket.timeout:
                continue
            except OSError:
                break
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Connection(self, sock, f"{self.port}<-{peer_host}:{peer_port}")
            with self._lock:
                if self._listener is not listener:
                    _close_socket(sock)
                    break
                self._connections.add(conn)
            self._spawn(conn.run, name=f"adbd-{self.port}-conn")

    def _spawn(self, target: Callable[..., None], *args: object, name: str) -> None:
        def run() -> None:
            try:
                target(*args)
            finally:
                with self._lock:
                    self._threads.discard(thread)

        thread = threading.Thread(target=run, name=name, daemon=True)
        with self._lock:
            self._threads.add(thread)
        thread.start()

    def _forget(self, conn: _Connection) -> None:
        with self._lock:
            self._connections.discard(conn)


def _close_socket(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
