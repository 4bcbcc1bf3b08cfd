"""AdbPhone: the bench's ADB driver for one DUT, without a server (phonebench.drivers.adb_transport:
adb-shell's transports and signers under our own packet layer).

Over stock adb-shell: TCP_NODELAY, whole writes, immediate disconnect detection and fast
checksums (phonebench.drivers.adb_transport); every timeout passed explicitly (adb-shell otherwise gives
up on a command silent for 10 s); bounded reconnect with backoff; exit status through a
marker; every failure raised as a phonebench.core.errors type naming the device, its address and what
to do.

One AdbPhone is one ADB connection, serialised by a lock: the packet layer is not thread-safe, and a
connection shared by threads can hand a stream's CLSE to the wrong reader. Concurrent
activities (say, a power-sampling loop next to a generate run) each take their own
connection with fork().
"""
from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import secrets
import shlex
import stat as stat_mod
import struct
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, Sequence

from adb_shell import exceptions as adb_exc
from adb_shell.auth.keygen import write_public_keyfile
from adb_shell.auth.sign_cryptography import CryptographySigner

from phonebench.core.errors import (AuthRefused, BenchError, CommandFailed, CommandTimeout, ConfigError, DeviceDisconnected,
                          DeviceError, DeviceUnreachable, TooMuchData)
from phonebench.core.file_stat import FileStat
from .adb_transport import HardenedAdbDevice, HardenedTcpTransport
from .device import ShellCommands, ShellResult, TimedShellResult
from .limits import byte_limits

log = logging.getLogger(__name__)

DEFAULT_KEY_PATH = Path("~/.android/adbkey")
BACKOFF_FIRST_S = 0.1
UNREACHABLE_HINT = "is the phone on the network? on the phone: `adb tcpip 5555`; check host:port"
USB_HINT = ("plug the phone in and enable USB debugging; check `lsusb` and udev permissions; "
            "stop any `adb` server holding the device (`adb kill-server`)")
_EXIT = re.compile(rb"(\d+)\r?\n?")
# What means the link is no longer usable: adb-shell's own errors, and the parse errors
# (unknown sync id, short struct) it lets through on a garbled stream.
_LINK_ERRORS = (adb_exc.InvalidChecksumError, adb_exc.InvalidCommandError, adb_exc.InvalidResponseError,
                adb_exc.AdbConnectionError, adb_exc.UsbReadFailedError, adb_exc.UsbWriteFailedError,
                KeyError, ValueError, struct.error)
_TIMEOUTS = (adb_exc.TcpTimeoutException, adb_exc.AdbTimeoutError)
_KEY_LOCK = threading.Lock()  # one key generation at a time (forks may connect together)
TOO_MUCH_HINT = ("the phone (or whatever answers on its address) sent more than the bench takes: if the "
                 "file or output is legitimately that big, raise PHONEBENCH_MAX_PULL_MB / PHONEBENCH_MAX_SHELL_MB "
                 "(docs/adb.md); otherwise treat the phone as compromised")



def quote_command(command: str | Sequence[str]) -> str:
    """A string is sent as is; a sequence is quoted argument by argument."""
    if isinstance(command, str):
        return command
    return " ".join(shlex.quote(str(arg)) for arg in command)


class AdbPhone(ShellCommands):
    """One DUT over ADB. address: "host:port" (TCP), "usb" or "usb:SERIAL"."""

    def __init__(self, address: str, *, key_path: str | Path | None = None, connect_timeout_s: float = 10.0,
                 command_timeout_s: float = 120.0, retries: int = 3, name: str | None = None,
                 max_pull_bytes: int | None = None, max_shell_bytes: int | None = None) -> None:
        self.address = address
        self.limits = byte_limits(max_pull_bytes, max_shell_bytes)
        self.name = name or address
        self.key_path = Path(key_path).expanduser() if key_path is not None else None
        self.connect_timeout_s = connect_timeout_s
        self.command_timeout_s = command_timeout_s
        self.retries = retries
        self._usb_serial: str | None = None
        self._host, self._port = "", 0
        if address == "usb" or address.startswith("usb:"):
            self._usb_serial = address[4:] or None
        else:
            host, _, port = address.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ConfigError(f"{self.name}: ADB address {address!r} is not host:port, usb or usb:SERIAL",
                                  hint='e.g. "192.168.1.20:5555" or "usb:R5CT1234"')
            self._host, self._port = host, int(port)
        self._lock = threading.RLock()
        self._device: HardenedAdbDevice | None = None
        self._signer: CryptographySigner | None = None
        self._key_offered = False
        self._serial: str | None = None

    def __repr__(self) -> str:
        return f"AdbPhone({self.name!r}, {self.address!r})"

    # --- connection --------------------------------------------------------------------------
    @property
    def connected(self) -> bool:
        return self._device is not None

    def connect(self) -> "AdbPhone":
        """Connect (no-op when connected): up to `retries` retries with exponential backoff,
        all within connect_timeout_s. Raises DeviceUnreachable or AuthRefused."""
        with self._lock:
            if self._device is None:
                self._device = self._connect_with_retries()
        return self

    def close(self) -> None:
        with self._lock:
            device, self._device = self._device, None
            if device is not None:
                with contextlib.suppress(Exception):
                    device.close()

    def fork(self) -> "AdbPhone":
        """A new, independent connection to the same phone (connects on first use)."""
        twin = AdbPhone(self.address, key_path=self.key_path, connect_timeout_s=self.connect_timeout_s,
                        command_timeout_s=self.command_timeout_s, retries=self.retries, name=self.name,
                        max_pull_bytes=self.limits.pull_bytes, max_shell_bytes=self.limits.shell_bytes)
        twin._signer = self._signer
        return twin

    def online(self) -> bool:
        """One bounded look (no retries): can the phone be reached on ADB right now? A fresh
        connection is made, and kept when it works."""
        with self._lock:
            self.close()
            try:
                self._device = self._connect_once(self._load_signer(), min(self.connect_timeout_s, 2.0))
            except DeviceError:
                return False
            return True

    def reboot(self) -> None:
        """`adb reboot`: returns once the phone has taken the request (it drops the link as it goes)."""
        timeout = self.command_timeout_s
        with self._lock:
            if self._device is None:
                self.connect()
            try:
                self._device.reboot(transport_timeout_s=timeout, read_timeout_s=timeout, timeout_s=timeout)
            except (DeviceError, adb_exc.AdbCommandFailureException, *_TIMEOUTS, *_LINK_ERRORS, OSError) as exc:
                log.debug("%s: link dropped by the reboot: %s", self._where, _reason(exc))
            finally:
                self.close()

    def __enter__(self) -> "AdbPhone":
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- commands -------------------------------------------------------------------------------
    def shell(self, command: str | Sequence[str], timeout_s: float | None = None) -> ShellResult:
        """Run a shell command; exit status through a marker echoed after it."""
        text = quote_command(command)
        marker = f"__pb_exit_{secrets.token_hex(6)}__"
        timeout = timeout_s if timeout_s is not None else self.command_timeout_s
        # A newline, not "; ": still correct after a trailing `&`, `;` or `# comment`.
        with self._operation(f"`{text}`", timeout) as device:
            raw = device.shell(f"{text}\necho {marker}$?", transport_timeout_s=timeout, read_timeout_s=timeout,
                               timeout_s=timeout, decode=False, max_bytes=self.limits.shell_bytes)
        output, exit_code = _split_marker(raw, marker.encode())
        if exit_code is None:
            log.warning("%s: `%s` printed no exit status (did it `exit`?)", self.name, text)
            exit_code = -1
        return ShellResult(self.name, text, output.decode("utf-8", errors="replace"), exit_code)

    def shell_timed(self, command: str | Sequence[str], clock: Callable[[], float],
                    timeout_s: float | None = None) -> TimedShellResult:
        """shell(), with every output packet stamped by `clock` as it arrives, before ADB's OKAY
        tells the device it did (so a device paced by flow control cannot run ahead of the stamp)."""
        text = quote_command(command)
        marker = f"__pb_exit_{secrets.token_hex(6)}__"
        timeout = timeout_s if timeout_s is not None else self.command_timeout_s
        chunks: list[tuple[float, bytes]] = []
        with self._operation(f"`{text}`", timeout) as device:
            device.on_write = lambda data: chunks.append((clock(), bytes(data)))
            try:
                sent_t = clock()
                device.shell(f"{text}\necho {marker}$?", transport_timeout_s=timeout, read_timeout_s=timeout,
                             timeout_s=timeout, decode=False, max_bytes=self.limits.shell_bytes)
            finally:
                device.on_write = None
        output, exit_code = _split_marker(b"".join(c for _, c in chunks), marker.encode())
        if exit_code is None:
            log.warning("%s: `%s` printed no exit status (did it `exit`?)", self.name, text)
            exit_code = -1
        return TimedShellResult(self.name, text, output.decode("utf-8", errors="replace"), exit_code,
                                sent_t=sent_t, lines=timed_lines(chunks, marker.encode()))

    # --- files ------------------------------------------------------------------------------------
    def push_bytes(self, data: bytes, remote: str, mode: int = 0o644) -> None:
        timeout = self.command_timeout_s
        with self._operation(f"push to {remote}", timeout) as device:
            device.push(io.BytesIO(data), remote, st_mode=stat_mod.S_IFREG | (mode & 0o7777),
                        transport_timeout_s=timeout, read_timeout_s=timeout)

    def push(self, local: str | Path, remote: str) -> None:
        local = Path(local)
        if not local.is_file():
            raise ConfigError(f"{self.name}: cannot push {local}: not a file", hint="check the local path")
        timeout = self.command_timeout_s
        mode = stat_mod.S_IFREG | (local.stat().st_mode & 0o7777)
        with self._operation(f"push {local} to {remote}", timeout) as device:
            device.push(str(local), remote, st_mode=mode, mtime=int(local.stat().st_mtime),
                        transport_timeout_s=timeout, read_timeout_s=timeout)

    def pull_bytes(self, remote: str) -> bytes:
        timeout = self.command_timeout_s
        sink = _ChunkSink(self.limits.pull_bytes)
        with self._operation(f"pull {remote}", timeout) as device:
            device.pull(remote, sink, transport_timeout_s=timeout, read_timeout_s=timeout)
        return sink.getvalue()

    def pull(self, remote: str, local: str | Path) -> None:
        """Pull into `local`; nothing is left behind on failure."""
        local = Path(local)
        partial = local.with_name(local.name + ".part")
        timeout = self.command_timeout_s
        try:
            with self._operation(f"pull {remote}", timeout) as device:
                device.pull(remote, str(partial), transport_timeout_s=timeout, read_timeout_s=timeout)
            os.replace(partial, local)
        finally:
            partial.unlink(missing_ok=True)

    def stat(self, remote: str) -> FileStat | None:
        """mode, size, mtime of a device path; None if it does not exist."""
        timeout = self.command_timeout_s
        with self._operation(f"stat {remote}", timeout) as device:
            mode, size, mtime = device.stat(remote, transport_timeout_s=timeout, read_timeout_s=timeout)
        return FileStat(mode, size, mtime) if mode else None

    def listdir(self, remote: str) -> list[str]:
        """Names in a device directory (empty if it does not exist)."""
        timeout = self.command_timeout_s
        with self._operation(f"list {remote}", timeout) as device:
            entries = device.list(remote, transport_timeout_s=timeout, read_timeout_s=timeout)
        names = (bytes(e.filename).decode("utf-8", errors="replace") for e in entries)
        return sorted(n for n in names if n not in (".", ".."))

    # --- internals ------------------------------------------------------------------------------
    @property
    def _where(self) -> str:
        return self.name if self.name == self.address else f"{self.name} ({self.address})"

    @contextlib.contextmanager
    def _operation(self, what: str, timeout_s: float) -> Iterator[HardenedAdbDevice]:
        """Connect if needed, run, map every failure; a dropped link is not retried (the
        command may have run), but the next call reconnects."""
        with self._lock:
            if self._device is None:
                self.connect()
            device = self._device
            try:
                yield device
            except TooMuchData as exc:  # refused before it was read: the stream is mid-way, start clean
                self.close()
                raise TooMuchData(f"{self._where}: {what}: {_reason(exc)}", hint=TOO_MUCH_HINT) from None
            except DeviceError as exc:  # raised by the hardened transport
                self.close()
                raise DeviceDisconnected(f"{self._where}: lost the connection during {what}: {_reason(exc)}",
                                         hint="the phone's adbd died or the link dropped; the next call "
                                              "reconnects (the command was not re-run)") from None
            except _TIMEOUTS:
                self.close()  # the stream's state is unknown: start clean on the next call
                raise CommandTimeout(f"{self._where}: {what} did not finish within {timeout_s:g} s",
                                     hint="pass a longer timeout_s (or command_timeout_s) if it is legitimately "
                                          "long; otherwise the phone may be hung") from None
            except (adb_exc.AdbCommandFailureException, adb_exc.PushFailedError) as exc:
                raise CommandFailed(f"{self._where}: {what} failed: {_device_says(exc)}",
                                    hint="check the device path and its permissions (`adb shell ls -l`)") from None
            except adb_exc.DevicePathInvalidError as exc:
                raise CommandFailed(f"{self._where}: {what}: {exc}", hint="give a device path") from None
            except (*_LINK_ERRORS, OSError) as exc:
                self.close()
                raise DeviceDisconnected(f"{self._where}: link error during {what}: {_reason(exc)}",
                                         hint="the next call reconnects; if it persists, restart adbd "
                                              "on the phone (`adb kill-server` on hosts sharing it)") from None

    def _connect_with_retries(self) -> HardenedAdbDevice:
        signer = self._load_signer()
        deadline = time.monotonic() + self.connect_timeout_s
        delay, attempts, last = BACKOFF_FIRST_S, 0, "no attempt made"
        for attempt in range(self.retries + 1):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            attempts += 1
            try:
                return self._connect_once(signer, remaining)
            except DeviceError as exc:
                last = _reason(exc)
                if isinstance(exc, AuthRefused):
                    raise
                if isinstance(exc, TooMuchData):  # a peer that floods is not retried
                    raise TooMuchData(f"{self._where}: ADB handshake refused: {last}", hint=TOO_MUCH_HINT) from None
                log.info("%s: connect attempt %d failed: %s", self._where, attempts, last)
            pause = min(delay, deadline - time.monotonic())
            if attempt < self.retries and pause > 0:
                time.sleep(pause)
                delay *= 2
        raise DeviceUnreachable(f"{self._where}: cannot connect ({attempts} attempts in "
                                f"{self.connect_timeout_s:g} s): {last}",
                                hint=USB_HINT if self._usb_serial is not None or self.address == "usb"
                                else UNREACHABLE_HINT)

    def _connect_once(self, signer: CryptographySigner, budget_s: float) -> HardenedAdbDevice:
        device = self._new_device(budget_s)
        self._key_offered = False

        def offering_key(_manager: object) -> None:
            self._key_offered = True
            log.info("%s: the phone does not know key %s; offering it (accept it on the phone)",
                     self._where, self._key_file)

        try:
            device.connect(rsa_keys=[signer], transport_timeout_s=budget_s, auth_timeout_s=budget_s,
                           read_timeout_s=budget_s, auth_callback=offering_key)
            log.info("%s: connected", self._where)
            return device
        except (DeviceError, *_TIMEOUTS, *_LINK_ERRORS, adb_exc.DeviceAuthError, OSError) as exc:
            with contextlib.suppress(Exception):
                device.close()
            if self._key_offered:
                raise AuthRefused(f"{self._where}: the phone did not accept ADB key {self._key_file}",
                                  hint=f"accept the 'Allow USB debugging?' prompt on the phone (tick 'Always "
                                       f"allow'), or add {self._key_file}.pub to the station's allowed keys") from None
            if isinstance(exc, DeviceError):
                raise
            raise DeviceUnreachable(f"{self._where}: ADB handshake failed: {_reason(exc)}") from None

    def _new_device(self, budget_s: float) -> HardenedAdbDevice:
        if self._usb_serial is None and self.address != "usb":
            transport = HardenedTcpTransport(self._host, self._port, connect_timeout_s=budget_s)
            return HardenedAdbDevice(transport)
        try:
            from adb_shell.transport.usb_transport import UsbTransport

            transport = UsbTransport.find_adb(self._usb_serial, None, budget_s)
        except Exception as exc:  # no libusb, no device, no permission: all "unreachable" here
            raise DeviceUnreachable(f"{self._where}: no USB ADB device"
                                    + (f" with serial {self._usb_serial}" if self._usb_serial else "")
                                    + f": {_reason(exc)}", hint=USB_HINT) from None
        return HardenedAdbDevice(transport)

    @property
    def _key_file(self) -> Path:
        return self.key_path or DEFAULT_KEY_PATH.expanduser()

    def _load_signer(self) -> CryptographySigner:
        if self._signer is not None:
            return self._signer
        path = self._key_file
        with _KEY_LOCK:
            if not path.exists():
                if self.key_path is not None:
                    raise ConfigError(f"{self.name}: ADB key file {path} does not exist",
                                      hint=f"create it with `adb keygen {path}`, or leave the DUT's key unset "
                                           "to use ~/.android/adbkey")
                path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                generate_key(path)
                log.warning("%s: no ADB key at %s: generated a new one (the phone must accept it once)",
                            self.name, path)
            public = path.with_name(path.name + ".pub")
            try:
                if not public.exists():
                    write_public_keyfile(str(path), str(public))
                self._signer = CryptographySigner(str(path))
            except (OSError, ValueError, TypeError) as exc:
                raise ConfigError(f"{self.name}: ADB key file {path} is unusable: {_reason(exc)}",
                                  hint="it must be a PEM RSA private key as `adb keygen` writes") from None
        return self._signer


def generate_key(path: Path) -> None:
    """A new ADB RSA key pair as `adb keygen` makes it; the private key is created 0600 (adb_shell's
    keygen leaves it to the umask, 0644: any user of the host could then drive every phone that
    accepted it), never over an existing file."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(pem)
    write_public_keyfile(str(path), str(path) + ".pub")


class _ChunkSink(io.BytesIO):
    """What a pull writes into: keeps the chunks and joins them once, instead of BytesIO's
    repeated regrowth copies."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self._parts: list[bytes | bytearray | memoryview] = []
        self._size, self._limit = 0, limit

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        self._size += len(data)
        if self._size > self._limit:
            raise TooMuchData(f"the file passed {self._limit} bytes (the pull cap)")
        self._parts.append(data)  # views into received packets, never reused: safe to keep
        return len(data)

    def getvalue(self) -> bytes:
        return b"".join(self._parts)


def _split_marker(raw: bytes, marker: bytes) -> tuple[bytes, int | None]:
    """Remove `<marker><status>\\n` from the output; anything after it (stderr a v1 shell
    appended late) is kept."""
    index = raw.rfind(marker)
    if index < 0:
        return raw, None
    rest = raw[index + len(marker):]
    match = _EXIT.match(rest)
    if match is None:
        return raw, None
    return raw[:index] + rest[match.end():], int(match.group(1))


def timed_lines(chunks: list[tuple[float, bytes]], marker: bytes | None = None) -> list[tuple[float, str]]:
    """Complete output lines, each with the arrival time of the chunk that ended it; the exit
    marker's line (shell v1) is dropped."""
    lines: list[tuple[float, str]] = []
    partial = b""
    for t, chunk in chunks:
        *complete, partial = (partial + chunk).split(b"\n")
        lines.extend((t, line.decode("utf-8", errors="replace").rstrip("\r")) for line in complete
                     if marker is None or marker not in line)
    if partial and (marker is None or marker not in partial):
        lines.append((chunks[-1][0], partial.decode("utf-8", errors="replace")))
    return lines


def _device_says(exc: Exception) -> str:
    """The device's FAIL message out of adb-shell's sync exceptions."""
    text = exc.args[0] if exc.args else ""
    if isinstance(text, (bytes, bytearray)):
        text = text.decode("utf-8", errors="replace")
    return str(text).removeprefix("Command failed: ") or type(exc).__name__


def _reason(exc: BaseException) -> str:
    if isinstance(exc, BenchError):
        return str(exc).split("\n  hint:", 1)[0]
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    text = str(exc.args[0]) if exc.args else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
