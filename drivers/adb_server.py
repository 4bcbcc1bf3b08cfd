"""ServerAdbPhone: one DUT through the host's adb server, the way a lab runs it.

Every lab host runs an adb server; it owns the USB interfaces and the `adb connect`-ed TCP
devices, so the bench, `adb logcat`, `adb reboot` and a person's `adb shell` share the phone.
phonebench.drivers.adb_client speaks the server's protocol; commands use the shell protocol
(shell v2), so exit codes are the command's own, with stdout and stderr kept in order. File
transfer speaks sync over the server's transport with whole reads. The serverless path is
phonebench.drivers.adb.AdbPhone (`transport = "direct"`).

The server is the one named by ADB_SERVER_SOCKET (tcp:HOST:PORT) or ANDROID_ADB_SERVER_PORT,
else 127.0.0.1:5037; when it is down it is started on that port, never on another, with the
system's `adb` or the one the bench carries (phonebench.drivers.adb_binary).
"""
from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
import stat as stat_mod
import struct
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, Sequence

from phonebench.core.errors import (AuthRefused, CommandFailed, CommandTimeout, ConfigError, DeviceDisconnected, DeviceError,
                          DeviceUnreachable, TooMuchData)
from phonebench.core.file_stat import FileStat
from . import shell_v2
from .adb_binary import INSTALL_HINT, SYSTEM, AdbBinary, find_adb
from .adb_client import AdbServerClient, AdbServerError, AdbServerTimeout, ServerConnection
from .adb import BACKOFF_FIRST_S, TOO_MUCH_HINT, UNREACHABLE_HINT, AdbPhone, quote_command, timed_lines
from .device import ShellCommands, ShellResult, TimedShellResult
from .limits import MAX_SYNC_DATA, MAX_SYNC_TEXT, byte_limits

log = logging.getLogger(__name__)

DEFAULT_SERVER = ("127.0.0.1", 5037)
SERVER_START_TIMEOUT_S = 20.0
SYNC_CHUNK = 64 * 1024  # the sync protocol's largest DATA block
_POLL_S = 0.1
_SERVER_HINT = "is the adb server running? `adb start-server` (Debian: apt-get install adb)"
_SERVER_USB_HINT = ("plug the phone in and enable USB debugging; `adb devices` must list its serial "
                    "(check `lsusb` and udev permissions)")


def server_address(env: dict[str, str] | None = None) -> tuple[str, int]:
    """Where the adb server listens, as the adb binary itself reads it from the environment."""
    env = os.environ if env is None else env
    spec = env.get("ADB_SERVER_SOCKET", "")
    if spec:
        kind, _, rest = spec.partition(":")
        host, _, port = rest.rpartition(":")
        if kind != "tcp" or not port.isdigit():
            raise ConfigError(f"ADB_SERVER_SOCKET={spec!r}: expected tcp:HOST:PORT", hint="e.g. tcp:127.0.0.1:5037")
        return host or "127.0.0.1", int(port)
    port = env.get("ANDROID_ADB_SERVER_PORT", "")
    if port:
        if not port.isdigit():
            raise ConfigError(f"ANDROID_ADB_SERVER_PORT={port!r} is not a port number")
        return DEFAULT_SERVER[0], int(port)
    return DEFAULT_SERVER


class AdbServer:
    """The adb server the bench uses (one per host and port; shared by every ServerAdbPhone)."""

    def __init__(self, host: str | None = None, port: int | None = None, adb: str | None = None) -> None:
        default_host, default_port = server_address()
        self.host, self.port = host or default_host, port or default_port
        self._adb = adb
        self._lock = threading.Lock()
        self.client = AdbServerClient(self.host, self.port)

    def __repr__(self) -> str:
        return f"AdbServer({self.host}:{self.port})"

    @property
    def binary(self) -> AdbBinary:
        """The adb that starts this server when it is down: the one given, the system's, or the bundled one."""
        found = AdbBinary(self._adb, SYSTEM) if self._adb else find_adb()
        if found is None:
            raise DeviceUnreachable(f"adb server {self.host}:{self.port} is down and there is no `adb` binary to "
                                    "start it", hint=INSTALL_HINT)
        return found

    @property
    def adb(self) -> str:
        return self.binary.path

    def describe(self) -> str:
        """One line: which adb server the bench uses, and which binary starts it when it is down."""
        if self.running():
            return f"adb: the server already running on {self.host}:{self.port} (it is used, never killed)"
        found = AdbBinary(self._adb, SYSTEM) if self._adb else find_adb()
        if found is None:
            return f"adb: no server on {self.host}:{self.port} and no adb binary to start one"
        return f"adb: no server on {self.host}:{self.port}: the bench starts one with {found.describe()}"

    def running(self) -> bool:
        with contextlib.suppress(OSError), socket.create_connection((self.host, self.port), timeout=1.0):
            return True
        return False

    def ensure_running(self) -> None:
        with self._lock:
            if self.running():
                return
            binary = self.binary
            log.info("adb server %s:%d is down: starting it with %s", self.host, self.port, binary.describe())
            try:
                subprocess.run([binary.path, "-P", str(self.port), "start-server"], capture_output=True, text=True,
                               timeout=SERVER_START_TIMEOUT_S, check=True, stdin=subprocess.DEVNULL)
            except (subprocess.SubprocessError, OSError) as exc:
                # Several bench processes (a run's bays) may start it at once: only one can bind the
                # port, and the others' `start-server` fails although the server is now up.
                if self._came_up():
                    return
                raise DeviceUnreachable(f"adb server {self.host}:{self.port}: `adb start-server` failed: {exc}",
                                        hint=_SERVER_HINT) from None

    def _came_up(self, within_s: float = SERVER_START_TIMEOUT_S) -> bool:
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            if self.running():
                return True
            time.sleep(0.1)
        return False

    def kill(self) -> None:
        """`adb kill-server` for this server (tests own theirs; a lab's is left alone)."""
        with contextlib.suppress(Exception):
            self.client.kill()

    def state(self, serial: str) -> str | None:
        """The server's state for `serial` ("device", "offline", "unauthorized", "no permissions (...)",
        ...), None if unlisted."""
        try:
            listing = self.client.devices()
        except (AdbServerError, OSError) as exc:
            raise DeviceUnreachable(f"adb server {self.host}:{self.port}: {exc}", hint=_SERVER_HINT) from None
        return parse_devices(listing).get(serial)


def parse_devices(listing: str) -> dict[str, str]:
    """The adb server's `host:devices` answer, {serial: state}: one "SERIAL<TAB>STATE" line per
    device, where a state may hold spaces ("no permissions (user in plugdev group; ...)")."""
    states = {}
    for line in listing.splitlines():
        serial, tab, state = line.partition("\t")
        if tab and serial.strip():
            states[serial.strip()] = state.strip()
    return states


def state_error(where: str, state: str | None, connect_answer: str = "") -> DeviceError | None:
    """The error for a phone the server lists in a state it cannot be used in, worded as `adb`
    words it, with what to do; None for `device` and for states that may still change."""
    if state == "unauthorized" or (state != "device" and "failed to authenticate" in connect_answer):
        return AuthRefused(f"{where}: unauthorized: the adb server failed to authenticate to the phone "
                           f"({connect_answer.strip() or 'adb devices lists it as unauthorized'})",
                           hint="accept this host's key on the phone (the 'Allow USB debugging?' prompt; tick "
                                "'Always allow'), or add the adb server's key (~/.android/adbkey.pub of the user "
                                "running the server) to the phone's keys (/data/misc/adb/adb_keys)")
    if state is not None and state.startswith("no permissions"):
        return DeviceUnreachable(f"{where}: no permissions: the adb server may not open the phone's USB device "
                                 f"({state})",
                                 hint="add a udev rule for the phone (Debian: the android-sdk-platform-tools-common "
                                      "package), put the server's user in the plugdev group, replug the phone, "
                                      "then `adb kill-server`")
    return None


_OFFLINE_HINT = ("offline: the adb server sees the phone but its adbd does not answer: replug the cable or "
                 "`adb reconnect offline`; on the phone switch USB debugging off and on; over the network check "
                 "the phone is reachable (on the phone: `adb tcpip 5555`)")


_SERVERS: dict[tuple[str, int], AdbServer] = {}
_SERVERS_LOCK = threading.Lock()


def default_server() -> AdbServer:
    """The AdbServer of this environment's address (one object per address)."""
    address = server_address()
    with _SERVERS_LOCK:
        if address not in _SERVERS:
            _SERVERS[address] = AdbServer(*address)
        return _SERVERS[address]


class ServerAdbPhone(ShellCommands):
    """One DUT through the adb server. address: "host:port" (TCP: `adb connect`), "usb:SERIAL"."""

    def __init__(self, address: str, *, server: AdbServer | None = None, connect_timeout_s: float = 10.0,
                 command_timeout_s: float = 120.0, retries: int = 3, name: str | None = None,
                 max_pull_bytes: int | None = None, max_shell_bytes: int | None = None) -> None:
        self.address = address
        self.limits = byte_limits(max_pull_bytes, max_shell_bytes)
        self.name = name or address
        self.connect_timeout_s = connect_timeout_s
        self.command_timeout_s = command_timeout_s
        self.retries = retries
        self._server = server
        if address.startswith("usb:") and address[4:]:
            self._serial_on_server, self._tcp = address[4:], False
        else:
            host, _, port = address.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ConfigError(f"{self.name}: ADB address {address!r} is not host:port or usb:SERIAL",
                                  hint='e.g. "192.168.1.20:5555" or "usb:R5CT1234" (the server lists serials: '
                                       '`adb devices`)')
            self._serial_on_server, self._tcp = address, True
        self._online = False
        self._features: set[str] | None = None
        self._serial: str | None = None

    def __repr__(self) -> str:
        return f"ServerAdbPhone({self.name!r}, {self.address!r})"

    @property
    def server(self) -> AdbServer:
        if self._server is None:
            self._server = default_server()
        return self._server

    # --- connection --------------------------------------------------------------------------
    @property
    def connected(self) -> bool:
        return self._online

    def connect(self) -> "ServerAdbPhone":
        """Until the server lists the phone as `device`: `adb connect` for TCP (a stale entry
        disconnected first), retries with backoff, all within connect_timeout_s."""
        if self._online:
            return self
        self.server.ensure_running()
        deadline = time.monotonic() + self.connect_timeout_s
        delay, attempts, last, state = BACKOFF_FIRST_S, 0, "no attempt made", None
        for attempt in range(self.retries + 1):
            if time.monotonic() >= deadline:
                break
            attempts += 1
            state = self.server.state(self._serial_on_server)
            answer = ""
            if state != "device" and self._tcp:
                if state is not None:  # offline or unauthorized from an earlier life: start clean
                    self.server.client.disconnect(self.address)
                last = answer = self._adb_connect(deadline)
                if "authenticate" in answer:  # the phone shows its prompt: wait for the user, within budget
                    state = self._await_state(deadline)
                elif "connected to" in answer:
                    state = self._await_state(min(deadline, time.monotonic() + 2.0))
            if state == "device":
                self._online = True
                log.info("%s: online through adb server %s:%d", self._where, self.server.host, self.server.port)
                return self
            refused = state_error(self._where, state, answer)
            if refused is not None:
                if self._tcp:
                    with contextlib.suppress(Exception):  # leave no unauthorized entry behind
                        self.server.client.disconnect(self.address)
                raise refused
            last = f"adb server lists it as {state}" if state else last if self._tcp else "not listed by the adb server"
            log.info("%s: connect attempt %d: %s", self._where, attempts, last)
            pause = min(delay, deadline - time.monotonic())
            if attempt < self.retries and pause > 0:
                time.sleep(pause)
                delay *= 2
        if self._tcp:
            with contextlib.suppress(Exception):  # leave no offline entry behind
                self.server.client.disconnect(self.address)
        hint = _OFFLINE_HINT if state == "offline" else UNREACHABLE_HINT if self._tcp else _SERVER_USB_HINT
        raise DeviceUnreachable(f"{self._where}: cannot connect ({attempts} attempts in {self.connect_timeout_s:g} s): "
                                f"{last}", hint=hint)

    def _adb_connect(self, deadline: float) -> str:
        try:
            answer = self.server.client.connect(self.address, timeout_s=max(0.5, deadline - time.monotonic()))
        except (AdbServerError, OSError) as exc:
            return f"adb connect failed: {exc}"
        log.debug("%s: adb connect: %s", self._where, answer)
        return answer

    def _await_state(self, deadline: float) -> str | None:
        """Poll the server until the phone is `device` (or the deadline); returns the last state."""
        while True:
            state = self.server.state(self._serial_on_server)
            if state == "device" or time.monotonic() >= deadline:
                return state
            time.sleep(_POLL_S)

    def close(self) -> None:
        """Forget the device (the server keeps its connection: other users share it)."""
        self._online = False
        self._features = None

    def disconnect(self) -> None:
        """`adb disconnect` a TCP phone (the phone is gone for every user of the server)."""
        self.close()
        if self._tcp:
            with contextlib.suppress(Exception):
                self.server.client.disconnect(self.address)

    def fork(self) -> "ServerAdbPhone":
        """An independent handle on the same phone (the server multiplexes streams itself)."""
        return ServerAdbPhone(self.address, server=self._server, connect_timeout_s=self.connect_timeout_s,
                              command_timeout_s=self.command_timeout_s, retries=self.retries, name=self.name,
                              max_pull_bytes=self.limits.pull_bytes, max_shell_bytes=self.limits.shell_bytes)

    def __enter__(self) -> "ServerAdbPhone":
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def online(self) -> bool:
        """One bounded look (no retries): is the phone `device` on the server right now? A TCP
        phone that is not is `adb connect`-ed once (its stale entry disconnected first)."""
        state = self.server.state(self._serial_on_server)
        if state != "device" and self._tcp:
            if state is not None:
                self.server.client.disconnect(self.address)
            if "connected to" in self._adb_connect(time.monotonic() + 2.0):
                state = self._await_state(time.monotonic() + 2.0)
        if state != "device":
            self.close()
            return False
        self._online = True
        return True

    def reboot(self) -> None:
        """`adb reboot`: returns once the phone has taken the request (it then drops off)."""
        with self._operation("reboot", self.command_timeout_s):
            conn = self._open_transport(self.command_timeout_s)
            try:
                conn.send_command("reboot:")
                conn.check_okay()
                with contextlib.suppress(OSError, AdbServerError):
                    conn.read_until_close()
            finally:
                conn.close()
        self.close()

    # --- commands -------------------------------------------------------------------------------
    def shell(self, command: str | Sequence[str], timeout_s: float | None = None) -> ShellResult:
        """Run a shell command over the shell protocol: the exit status is the command's."""
        text = quote_command(command)
        timeout = timeout_s if timeout_s is not None else self.command_timeout_s
        with self._operation(f"`{text}`", timeout):
            conn = self._open_transport(timeout)
            try:
                if self._has_shell_v2():
                    output, status = shell_v2.read_shell(conn, text, self.limits.shell_bytes)
                else:  # an old phone: shell v1, the status through an echoed marker
                    output, status = _read_shell_v1(conn, text, self.limits.shell_bytes)
            finally:
                conn.close()
        return ShellResult(self.name, text, output.decode("utf-8", errors="replace"), status)

    def shell_timed(self, command: str | Sequence[str], clock: Callable[[], float],
                    timeout_s: float | None = None) -> TimedShellResult:
        """shell(), with every stdout packet of the shell protocol stamped by `clock` as its bytes
        arrive and then acknowledged on stdin (phonebench.drivers.shell_v2): the same contract as
        phonebench.drivers.adb.AdbPhone.shell_timed, through the adb server."""
        text = quote_command(command)
        timeout = timeout_s if timeout_s is not None else self.command_timeout_s
        with self._operation(f"`{text}`", timeout):
            if not self._has_shell_v2():
                raise CommandFailed(f"{self._where}: the phone has no shell protocol (shell_v2): its output cannot "
                                    "be stamped packet by packet through the adb server",
                                    hint='set transport = "direct" for this phone in the station file')
            conn = self._open_transport(timeout)
            try:
                sent_t, chunks, output, status = shell_v2.read_shell_timed(conn, text, clock, self.limits.shell_bytes)
            finally:
                conn.close()
        return TimedShellResult(self.name, text, output.decode("utf-8", errors="replace"), status,
                                sent_t=sent_t, lines=timed_lines(chunks))

    def _has_shell_v2(self) -> bool:
        if self._features is None:
            features = self.server.client.features(self._serial_on_server, self.command_timeout_s)
            self._features = set(features.split(","))
        return "shell_v2" in self._features

    # --- files ------------------------------------------------------------------------------------
    def push_bytes(self, data: bytes, remote: str, mode: int = 0o644) -> None:
        with self._sync(f"push to {remote}") as sync:
            sync.send(remote, stat_mod.S_IFREG | (mode & 0o7777), [memoryview(data)], int(time.time()))

    def push(self, local: str | Path, remote: str) -> None:
        local = Path(local)
        if not local.is_file():
            raise ConfigError(f"{self.name}: cannot push {local}: not a file", hint="check the local path")
        st = local.stat()
        with local.open("rb") as source, self._sync(f"push {local} to {remote}") as sync:
            sync.send(remote, stat_mod.S_IFREG | (st.st_mode & 0o7777), iter(lambda: source.read(SYNC_CHUNK), b""),
                      int(st.st_mtime))

    def pull_bytes(self, remote: str) -> bytes:
        parts: list[bytes] = []
        limit, size = self.limits.pull_bytes, 0

        def keep(block: bytes) -> None:
            nonlocal size
            size += len(block)
            if size > limit:
                raise TooMuchData(f"the file passed {limit} bytes (the pull cap)")
            parts.append(block)

        with self._sync(f"pull {remote}") as sync:
            sync.recv(remote, keep)
        return b"".join(parts)

    def pull(self, remote: str, local: str | Path) -> None:
        """Pull into `local`; nothing is left behind on failure."""
        local = Path(local)
        partial = local.with_name(local.name + ".part")
        try:
            with partial.open("wb") as sink, self._sync(f"pull {remote}") as sync:
                sync.recv(remote, sink.write)
            os.replace(partial, local)
        finally:
            partial.unlink(missing_ok=True)

    def stat(self, remote: str) -> FileStat | None:
        with self._sync(f"stat {remote}") as sync:
            mode, size, mtime = sync.stat(remote)
        return FileStat(mode, size, mtime) if mode else None

    def listdir(self, remote: str) -> list[str]:
        with self._sync(f"list {remote}") as sync:
            names = sync.list(remote)
        return sorted(n for n in names if n not in (".", ".."))

    # --- internals ------------------------------------------------------------------------------
    @property
    def _where(self) -> str:
        return self.name if self.name == self.address else f"{self.name} ({self.address})"

    @contextlib.contextmanager
    def _sync(self, what: str) -> Iterator["_SyncChannel"]:
        timeout = self.command_timeout_s
        with self._operation(what, timeout):
            conn = self._open_transport(timeout)
            try:
                conn.send_command("sync:")
                conn.check_okay()
                yield _SyncChannel(conn, f"{self._where}: {what}")
            finally:
                conn.close()

    def _open_transport(self, timeout_s: float) -> ServerConnection:
        """A server connection switched to this phone. Nothing has reached the phone yet when the
        switch fails (the server lists it offline a moment after a drop): reconnect once, then
        retry; a command is never sent twice."""
        try:
            return self.server.client.open_transport(self._serial_on_server, timeout_s)
        except AdbServerTimeout:
            raise
        except AdbServerError as exc:
            log.info("%s: the server could not switch to the phone (%s): reconnecting", self._where, exc)
            self.close()
            self.connect()
            return self.server.client.open_transport(self._serial_on_server, timeout_s)

    @contextlib.contextmanager
    def _operation(self, what: str, timeout_s: float) -> Iterator[None]:
        """Connect if needed, run, map every failure; a dropped link is not retried (the
        command may have run), but the next call reconnects."""
        if not self._online:
            self.connect()
        try:
            yield
        except TooMuchData as exc:  # the connection is closed by the caller: nothing more is read
            raise TooMuchData(f"{self._where}: {what}: {exc}", hint=TOO_MUCH_HINT) from None
        except DeviceError:
            raise
        except CommandFailed:
            raise
        except AdbServerTimeout:
            self.close()
            raise CommandTimeout(f"{self._where}: {what} did not finish within {timeout_s:g} s",
                                 hint="pass a longer timeout_s (or command_timeout_s) if it is legitimately long; "
                                      "otherwise the phone may be hung") from None
        except (AdbServerError, EOFError, OSError) as exc:
            self.close()
            text = str(exc) or type(exc).__name__
            if isinstance(exc, OSError) and exc.strerror:
                text = exc.strerror
            raise DeviceDisconnected(f"{self._where}: lost the connection during {what}: {text}",
                                     hint="the phone rebooted, its adbd died or the link dropped; the next call "
                                          "reconnects (the command was not re-run)") from None


_V1_MARKER = "__pb_exit_"


def _read_shell_v1(conn: ServerConnection, command: str, limit: int | None = None) -> tuple[bytes, int]:
    marker = f"{_V1_MARKER}{secrets.token_hex(6)}__".encode()
    conn.send_command(f"shell:{command}\necho {marker.decode()}$?")
    conn.check_okay()
    raw = conn.read_until_close(None if limit is None else limit + len(marker) + 8)
    index = raw.rfind(marker)
    if index < 0:
        return raw, -1
    tail = raw[index + len(marker):].split(b"\n", 1)
    status = int(tail[0].strip() or b"-1") if tail[0].strip().isdigit() else -1
    return raw[:index] + (tail[1] if len(tail) > 1 else b""), status


TRANSPORTS = ("server", "direct")


def open_phone(address: str, transport: str = "server", *, key: str | Path | None = None,
               name: str | None = None, **options: float | int) -> "ServerAdbPhone | AdbPhone":
    """A DUT's driver by transport: "server" (the host's adb server) or "direct" (adb-shell,
    no server; `key` is its RSA key, the server uses its own)."""
    if transport == "server":
        return ServerAdbPhone(address, name=name, **options)  # type: ignore[arg-type]
    if transport == "direct":
        return AdbPhone(address, key_path=key, name=name, **options)  # type: ignore[arg-type]
    raise ConfigError(f"{name or address}: unknown ADB transport {transport!r}", hint=f"one of {', '.join(TRANSPORTS)}")


class _SyncChannel:
    """The sync protocol (STAT, LIST, SEND, RECV) on one server stream, with whole reads."""

    def __init__(self, conn: ServerConnection, where: str) -> None:
        self.conn, self.where = conn, where

    def _request(self, ident: bytes, path: str) -> None:
        raw = path.encode()
        self.conn.conn.sendall(ident + struct.pack("<I", len(raw)) + raw)

    def _length(self, raw: bytes, bound: int, what: str) -> int:
        """A sync length field, refused above what AOSP's adbd ever sends (nothing read for it)."""
        (length,) = struct.unpack("<I", raw)
        if length > bound:
            raise TooMuchData(f"the phone sent a sync {what} declaring {length} bytes, over the protocol's {bound}")
        return int(length)

    def _fail(self) -> CommandFailed:
        length = self._length(self.conn.read_exact(4), MAX_SYNC_TEXT, "FAIL message")
        message = self.conn.read_exact(length).decode("utf-8", errors="replace")
        return CommandFailed(f"{self.where} failed: {message}",
                             hint="check the device path and its permissions (`adb shell ls -l`)")

    def stat(self, path: str) -> tuple[int, int, int]:
        self._request(b"STAT", path)
        reply = self.conn.read_exact(16)
        if reply[:4] != b"STAT":
            raise AdbServerError(f"sync: unexpected {reply[:4]!r} for STAT")
        mode, size, mtime = struct.unpack("<3I", reply[4:])
        return mode, size, mtime

    def list(self, path: str) -> list[str]:
        self._request(b"LIST", path)
        names = []
        while True:
            entry = self.conn.read_exact(20)
            if entry[:4] == b"DONE":
                return names
            if entry[:4] != b"DENT":
                raise AdbServerError(f"sync: unexpected {entry[:4]!r} for LIST")
            length = self._length(entry[16:], MAX_SYNC_TEXT, "directory entry name")
            names.append(self.conn.read_exact(length).decode("utf-8", errors="replace"))

    def send(self, path: str, mode: int, chunks: Iterator[bytes | memoryview] | list[memoryview], mtime: int) -> None:
        self._request(b"SEND", f"{path},{mode}")
        sock = self.conn.conn
        for chunk in chunks:
            view = memoryview(chunk)
            for start in range(0, len(view), SYNC_CHUNK):
                piece = view[start:start + SYNC_CHUNK]
                sock.sendall(b"DATA" + struct.pack("<I", len(piece)))
                sock.sendall(piece)
        sock.sendall(b"DONE" + struct.pack("<I", mtime))
        reply = self.conn.read_exact(4)
        if reply == b"FAIL":
            raise self._fail()
        self.conn.read_exact(4)  # OKAY carries a zero length
        if reply != b"OKAY":
            raise AdbServerError(f"sync: unexpected {reply!r} after SEND")

    def recv(self, path: str, sink: Callable[[bytes], object]) -> None:
        self._request(b"RECV", path)
        while True:
            ident = self.conn.read_exact(4)
            if ident == b"DONE":
                self.conn.read_exact(4)
                return
            if ident == b"FAIL":
                raise self._fail()
            if ident != b"DATA":
                raise AdbServerError(f"sync: unexpected {ident!r} for RECV")
            length = self._length(self.conn.read_exact(4), MAX_SYNC_DATA, "DATA block")
            sink(self.conn.read_exact(length))
