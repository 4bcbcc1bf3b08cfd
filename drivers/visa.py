"""Shared VISA plumbing for SCPI instrument drivers: opening sessions, identity, I/O and errors.

Sessions open through pyvisa's pure-Python backend ("@py") by default; "@sim" or "file.yaml@sim"
select pyvisa-sim. Raw-socket resources end messages with "\\n" only, so read and write
termination are set to it. On a pyvisa-py raw socket the answers are read here, straight from
the socket: one buffer per binary block, and an end of file is a closed connection at once
(pyvisa-py would wait out its timeout and report silence). Bytes received past one answer wait
in the driver's own buffer; pyvisa's read is then never used on that session, so its buffer stays
empty, and `resync()` empties both (ours, then VISA's public `clear()`). Every failure becomes an
InstrumentError naming the instrument (address, model, serial), the command and what the
instrument said.
"""
from __future__ import annotations

import functools

import logging
import re
import select
import socket
import threading
import time
from dataclasses import asdict, dataclass, field
from collections.abc import Callable
from typing import Any

import numpy as np
import pyvisa
from pyvisa import constants
from pyvisa.errors import VisaIOError

from phonebench.core.decoding import DecodeError, parse_number
from phonebench.core.errors import InstrumentError
from . import locks

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 5.0
CHUNK_BYTES = 1 << 20  # reads through pyvisa (non-socket backends): its default 20 KiB chunks cost a turn each
_MAX_ERROR_DRAIN = 50
_ERROR_ENTRY = re.compile(r'^(?P<code>[+-]?\d+),".*"$', re.DOTALL)
SENTINEL = 9.9e37  # SCPI's "overload / not a number" reading (9.9E37, 9.91E37)

_managers: dict[str, pyvisa.ResourceManager] = {}
_managers_lock = threading.Lock()


@dataclass
class InstrumentIdentity:
    """Who answered: recorded with every result that used the instrument."""

    manufacturer: str
    model: str
    serial: str
    firmware: str
    address: str
    role: str = ""
    family: str = ""
    options: dict[str, str] = field(default_factory=dict)  # e.g. installed modules

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.manufacturer} {self.model} s/n {self.serial} fw {self.firmware} at {self.address}"


def parse_idn(text: str, address: str, role: str = "", family: str = "") -> InstrumentIdentity:
    """Parse an *IDN? answer: manufacturer,model,serial,firmware."""
    parts = [p.strip() for p in text.strip().split(",")]
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise InstrumentError(f"{role or 'instrument'} at {address}: *IDN? answered {text.strip()!r}, "
                              "not 'manufacturer,model,serial,firmware'",
                              hint="check that the address points at the intended instrument")
    parts += [""] * (4 - len(parts))
    return InstrumentIdentity(parts[0], parts[1], parts[2], ",".join(parts[3:]), address, role, family)


def resource_manager(backend: str = "@py") -> pyvisa.ResourceManager:
    """One ResourceManager per backend string (opening one costs milliseconds)."""
    with _managers_lock:
        if backend not in _managers:
            try:
                _managers[backend] = pyvisa.ResourceManager(backend)
            except (OSError, ValueError, pyvisa.errors.Error) as exc:
                raise InstrumentError(f"cannot load VISA backend {backend!r}: {exc}",
                                      hint="use '@py' (pyvisa-py), '@sim' or 'file.yaml@sim'") from exc
        return _managers[backend]


def _tune_socket(resource: pyvisa.resources.MessageBasedResource) -> None:
    """TCP_NODELAY on a pyvisa-py raw socket: a command followed by SYST:ERR? otherwise waits for
    the peer's delayed ACK (~40 ms per pair). pyvisa-py 0.8 wires VI_ATTR_TCPIP_NODELAY to a
    setter that refuses it, so it is set on the socket itself."""
    session = getattr(resource.visalib, "sessions", {}).get(resource.session)
    sock = getattr(session, "interface", None)
    if isinstance(sock, socket.socket):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _raw_socket_session(resource: Any) -> Any:
    """pyvisa-py's raw-socket session behind a resource, or None for any other backend/kind."""
    session = getattr(getattr(resource, "visalib", None), "sessions", {}).get(getattr(resource, "session", None))
    return session if isinstance(getattr(session, "interface", None), socket.socket) else None


class _Reader:
    """Byte-exact reads of one answer: straight from a pyvisa-py raw socket, else through pyvisa.

    pyvisa-py copies a large read five times (recv, pending buffer, slices, result) and takes an
    end of file for silence; on a raw socket the payload is read here once, into one buffer, and a
    closed connection is reported at once. `pending` is the instrument's own buffer of bytes
    received past the previous answer.
    """

    def __init__(self, resource: Any, timeout_s: float, pending: bytearray) -> None:
        self.res = resource
        self.session = _raw_socket_session(resource)
        self.deadline = time.monotonic() + timeout_s
        self.pending = pending

    def _recv_more(self) -> None:
        session = self.session
        sock = session.interface
        remaining = self.deadline - time.monotonic()
        if remaining <= 0 or not select.select([sock], [], [], remaining)[0]:
            raise VisaIOError(constants.StatusCode.error_timeout)
        data = sock.recv(1 << 16)
        if not data:
            raise VisaIOError(constants.StatusCode.error_connection_lost)
        self.pending += data

    def exact(self, count: int) -> bytes | np.ndarray:
        if self.session is None:
            return bytes(self.res.read_bytes(count)) if count else b""
        out = np.empty(count, dtype=np.uint8)  # not zero-filled: every byte is received into it
        view = memoryview(out)
        pending = self.pending
        got = min(len(pending), count)
        view[:got] = pending[:got]
        del pending[:got]
        sock = self.session.interface
        while got < count:
            try:  # data is usually there already: wait (select) only when the socket has none
                received = sock.recv_into(view[got:], 0, socket.MSG_DONTWAIT)
            except BlockingIOError:
                remaining = self.deadline - time.monotonic()
                if remaining <= 0 or not select.select([sock], [], [], remaining)[0]:
                    raise VisaIOError(constants.StatusCode.error_timeout) from None
                continue
            if not received:
                raise VisaIOError(constants.StatusCode.error_connection_lost)
            got += received
        return out

    def until(self, stops: bytes, limit: int = 1 << 16) -> bytes:
        """Bytes up to and including the first byte that is in `stops`."""
        if self.session is None:
            out = bytearray()
            while not out or out[-1] not in stops:
                out += self.res.read_bytes(1)
                if len(out) > limit:
                    break
            return bytes(out)
        pending = self.pending
        scanned = 0
        while True:
            hits = [i for i in (pending.find(bytes([b]), scanned) for b in stops) if i >= 0]
            if hits:
                end = min(hits) + 1
                out = bytes(pending[:end])
                del pending[:end]
                return out
            if len(pending) > limit:
                out = bytes(pending)
                pending.clear()
                return out
            scanned = len(pending)
            self._recv_more()


def _decode_text(raw: bytes) -> str | None:
    """ASCII text of an answer, or None when it holds other bytes (SCPI answers are 7-bit)."""
    try:
        return raw.decode("ascii")
    except UnicodeDecodeError:
        return None


def open_resource(address: str, backend: str = "@py",
                  timeout_s: float = DEFAULT_TIMEOUT_S) -> pyvisa.resources.MessageBasedResource:
    rm = resource_manager(backend)
    try:
        resource = rm.open_resource(address)
    except Exception as exc:  # pyvisa-py raises bare Exception("could not connect: ...")
        raise InstrumentError(f"cannot open instrument at {address} ({backend}): {exc}",
                              hint="check power, network and the address in the station file "
                                   "(raw SCPI sockets look like TCPIP::host::5025::SOCKET)") from exc
    resource.timeout = timeout_s * 1000.0
    resource.read_termination = "\n"
    resource.write_termination = "\n"
    resource.chunk_size = CHUNK_BYTES
    if address.upper().endswith("::SOCKET"):
        _tune_socket(resource)
    return resource


class ScpiInstrument:
    """Base of every SCPI driver: I/O that fails clearly, identity, error-queue checks.

    Every error names the instrument by role, family, VISA address and (once known) the model and
    serial its *IDN? gave, so a failure on a bench with several instruments points at one.
    """

    role = "instrument"
    family = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A driver whose own opening fails after the base opened it (an empty slot, a refused
        setting) closes what the base opened: the instrument's lock must not outlive the attempt."""
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None:
            return

        @functools.wraps(init)
        def opening(self: ScpiInstrument, *args: Any, **options: Any) -> None:
            try:
                init(self, *args, **options)
            except BaseException:
                if getattr(self, "_lock", None) is not None or getattr(self, "_res", None) is not None:
                    self.close()
                raise
        cls.__init__ = opening  # type: ignore[method-assign]

    def __init__(self, address: str, backend: str = "@py", timeout_s: float = DEFAULT_TIMEOUT_S,
                 resource: Any = None) -> None:
        self.address = address
        self.name = f"{self.role} {self.family} at {address}"
        self._pending = bytearray()  # raw socket: bytes received past the last answer
        # Exclusive while open: no other bench process interleaves commands (phonebench.drivers.locks).
        self._lock = None if resource is not None else locks.acquire(address, self.name)
        try:
            self._res = resource if resource is not None else open_resource(address, backend, timeout_s)
        except BaseException:
            if self._lock is not None:
                self._lock.release()
                self._lock = None
            raise
        if resource is None:
            locks.visa_exclusive(self._res, self.name, timeout_s)
        self._timeout_s = timeout_s
        try:
            self.identity = parse_idn(self.query("*IDN?"), address, self.role, self.family)
        except BaseException:
            self.close()
            raise
        self.name = f"{self.role} {self.family} at {address} ({self.identity.model} s/n {self.identity.serial})"
        log.info("%s is %s", self.name, self.identity)

    @property
    def timeout_s(self) -> float:
        return self._timeout_s

    @timeout_s.setter
    def timeout_s(self, seconds: float) -> None:
        self._timeout_s = seconds
        self._res.timeout = seconds * 1000.0

    # --- I/O ------------------------------------------------------------------------------
    def _peer_closed(self) -> bool:
        """True when a raw-socket peer has closed its end (pyvisa-py reads that as silence)."""
        session = _raw_socket_session(self._res)
        if session is None:
            return False
        sock = session.interface
        try:
            if not select.select([sock], [], [], 0)[0]:
                return False
            return sock.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _io_error(self, command: str, exc: Exception) -> InstrumentError:
        timed_out = isinstance(exc, VisaIOError) and exc.error_code == constants.StatusCode.error_timeout
        lost = (isinstance(exc, VisaIOError) and exc.error_code == constants.StatusCode.error_connection_lost) or \
            isinstance(exc, (ConnectionResetError, ConnectionAbortedError, BrokenPipeError, EOFError))
        if lost or (timed_out and self._peer_closed()):
            return InstrumentError(f"{self.name}: closed the connection during `{command}`",
                                   hint="the instrument dropped the link (rebooted, another client took it, or "
                                        "a network fault); reopen the instrument and repeat the sequence")
        if timed_out:
            return InstrumentError(f"{self.name}: no answer to `{command}` within {self.timeout_s:g} s",
                                   hint="the instrument is silent: check it is on and idle, the address, "
                                        "and that the command exists on this model")
        return InstrumentError(f"{self.name}: I/O failed on `{command}`: {exc}",
                               hint="check the connection; reopen the instrument")

    def _not_ascii(self, command: str, raw: bytes) -> InstrumentError:
        self.resync()
        return InstrumentError(f"{self.name}: `{command}` answered bytes that are not ASCII text: {raw[:60]!r}",
                               hint="the address may point at another device, or the link corrupts data; "
                                    "check the address and the cabling")

    def write(self, command: str) -> None:
        log.debug("%s <- %s", self.name, command)
        session = _raw_socket_session(self._res)
        try:
            if session is not None:  # one send; pyvisa-py's write adds a select and attribute look-ups
                session.interface.sendall(command.encode("ascii") + b"\n")
            else:
                self._res.write(command)
        except (VisaIOError, OSError) as exc:
            raise self._io_error(command, exc) from exc

    def _read_answer(self, command: str) -> str:
        """One answer line; on a raw socket read here (EOF is reported at once), else by pyvisa."""
        if _raw_socket_session(self._res) is not None:
            raw = _Reader(self._res, self.timeout_s, self._pending).until(b"\n")
            text = _decode_text(raw)
            if text is None:
                raise self._not_ascii(command, raw)
            return text
        try:
            return self._res.read()
        except UnicodeDecodeError as exc:
            raise self._not_ascii(command, exc.object if isinstance(exc.object, bytes) else b"") from None

    def query(self, command: str) -> str:
        log.debug("%s <- %s", self.name, command)
        try:
            if _raw_socket_session(self._res) is not None:
                _raw_socket_session(self._res).interface.sendall(command.encode("ascii") + b"\n")
                answer = self._read_answer(command)
            else:
                answer = self._res.query(command)
        except UnicodeDecodeError as exc:
            raise self._not_ascii(command, exc.object if isinstance(exc.object, bytes) else b"") from None
        except (VisaIOError, OSError) as exc:
            error = self._io_error(command, exc)
            timed_out = isinstance(exc, VisaIOError) and exc.error_code == constants.StatusCode.error_timeout
            if command != "SYST:ERR?" and timed_out and "closed the connection" not in str(error):
                # A query the instrument rejected gets no answer, only an entry in its error queue.
                try:
                    entries = self.drain_errors()
                except InstrumentError:
                    entries = []
                if entries:
                    error = InstrumentError(f"{self.name}: `{command}` failed: {'; '.join(entries)}",
                                            hint="see the instrument's message; fix the command or setting")
            raise error from exc
        log.debug("%s -> %s", self.name, answer.strip()[:200])
        return answer.strip()

    def query_float(self, command: str) -> float:
        answer = self.query(command)
        try:
            return parse_number(answer, self.name)  # IEEE 488.2 only: float() would take "1_0E-4"
        except DecodeError:
            self.resync()
            raise InstrumentError(f"{self.name}: `{command}` answered {answer[:80]!r}, not a number",
                                  hint="the instrument may be another model or in a different mode") from None

    def query_finite(self, command: str, what: str, positive: bool = False) -> float:
        """A number that must be a real reading: not NaN, inf or the 9.9E37 overload / invalid sentinel."""
        value = self.query_float(command)
        if not np.isfinite(value) or abs(value) >= SENTINEL or (positive and value <= 0):
            raise InstrumentError(f"{self.name}: `{command}` gave {what} = {value!r}, not a usable "
                                  f"{'positive ' if positive else ''}value",
                                  hint="the instrument is in an unexpected state or is another model; "
                                       "reset it (*RST) and repeat the setup")
        return value

    def read_block(self, command: str, timeout_s: float | None = None,
                   then_error: bool = False) -> bytes | np.ndarray:
        """Read the IEEE 488.2 definite-length block answering `command` (already written).

        then_error: the message also asked `:SYSTem:ERRor?` after the block, so the block ends at
        ";" and the error-queue entry follows on the same line; a queued error is raised.
        """
        res = self._res
        wait_s = timeout_s if timeout_s is not None else self.timeout_s
        reader = _Reader(res, wait_s, self._pending)
        through_pyvisa = reader.session is None
        if through_pyvisa:
            previous_term, previous_timeout = res.read_termination, res.timeout
            res.read_termination = None  # binary payloads contain "\n"; read exact byte counts
            res.timeout = wait_s * 1000.0
        try:
            head = bytes(reader.exact(2))
            if head[:1] != b"#" or not head[1:2].isdigit() or head[1:2] == b"0":
                rest = head if head.endswith(b"\n") else head + reader.until(b"\n", limit=4096)
                if then_error and _ERROR_ENTRY.match((_decode_text(rest) or "").strip()):
                    self._raise_entry(command, _decode_text(rest) or "")  # the block query was refused
                raise InstrumentError(f"{self.name}: `{command}` answered {rest[:60]!r} instead of a "
                                      "definite-length binary block",
                                      hint="check the data format settings; the instrument may be another model")
            digits = int(head[1:2])
            length_text = bytes(reader.exact(digits))
            if not length_text.isdigit():
                raise InstrumentError(f"{self.name}: `{command}` sent a block header with length "
                                      f"{length_text!r}", hint="the transfer is corrupt; retry it")
            length = int(length_text)
            payload = reader.exact(length)
            end = bytes(reader.exact(1))
            if end != (b";" if then_error else b"\n"):
                raise InstrumentError(f"{self.name}: `{command}` block of {length} bytes is not followed by "
                                      f"{'; and the error entry' if then_error else 'the terminator'}",
                                      hint="the transfer is corrupt; retry it")
            if then_error:
                entry = _decode_text(reader.until(b"\n")) or ""
                self._raise_entry(command, entry)
            return payload
        except VisaIOError as exc:
            if exc.error_code == constants.StatusCode.error_timeout and not self._peer_closed():
                entries = self._entries_after_failure()
                raise InstrumentError(f"{self.name}: binary block answering `{command}` truncated or stalled "
                                      f"(no complete block within {wait_s:g} s)"
                                      + (f"; the instrument queued {'; '.join(entries)}" if entries else ""),
                                      hint="the transfer was cut short or refused; retry, and check the link "
                                           "and the acquisition state") from exc
            raise self._io_error(command, exc) from exc
        except InstrumentError:
            self.resync()
            raise
        finally:
            if through_pyvisa:
                res.read_termination, res.timeout = previous_term, previous_timeout

    def _entries_after_failure(self) -> list[str]:
        self.resync()
        try:
            return self.drain_errors()
        except InstrumentError:
            return []

    def _raise_entry(self, context: str, entry: str) -> None:
        """Raise for an error-queue entry read inline (`...;:SYSTem:ERRor?`) unless it is 'No error'."""
        m = _ERROR_ENTRY.match(entry.strip())
        if m is not None and int(m["code"]) == 0:
            return
        entries = ([entry.strip()] if m else []) + self.drain_errors()
        raise InstrumentError(f"{self.name}: `{context}` failed: {'; '.join(entries) or repr(entry[:80])}",
                              hint="see the instrument's message; fix the setting in the test or station file")

    def query_block(self, command: str, dtype: str | np.dtype, timeout_s: float | None = None,
                    check: bool = False) -> np.ndarray:
        """A binary block as numbers; check=True reads the error queue in the same message."""
        self.write(f"{command};:SYSTem:ERRor?" if check else command)
        payload = self.read_block(command, timeout_s, then_error=check)
        item = np.dtype(dtype).itemsize
        if len(payload) % item:
            raise InstrumentError(f"{self.name}: `{command}` block of {len(payload)} bytes is not a whole "
                                  f"number of {item}-byte values", hint="the transfer is corrupt; retry it")
        return np.frombuffer(payload, dtype=dtype)

    def query_with_block(self, setup: list[str], block_query: str, dtype: str | np.dtype,
                         timeout_s: float | None = None) -> tuple[str, np.ndarray]:
        """Settings, one text query (the last of `setup`), a block query and the error check in one
        message; the answer is `<text>;#<block>;<code>,"<message>"`. Returns (text, values)."""
        message = ";".join([*setup, block_query, ":SYSTem:ERRor?"])
        self.write(message)
        reader = _Reader(self._res, timeout_s if timeout_s is not None else self.timeout_s, self._pending)
        try:
            raw = reader.until(b";\n")
            while raw.count(b'"') % 2 and not raw.endswith(b"\n"):  # a ";" inside an error message
                raw += reader.until(b";\n")
        except VisaIOError as exc:
            raise self._io_error(message, exc) from exc
        text = _decode_text(raw)
        if text is None:
            raise self._not_ascii(message, raw)
        if not text.endswith(";"):  # the block query was refused: only "<text or entry>\n" came back
            self.resync()
            self._raise_entry(message, text.rsplit(";", 1)[-1])
            raise InstrumentError(f"{self.name}: `{message}` answered {text[:80]!r} without a data block",
                                  hint="the instrument refused the data query; check the acquisition state")
        payload = self.read_block(message, timeout_s, then_error=True)
        item = np.dtype(dtype).itemsize
        if len(payload) % item:
            raise InstrumentError(f"{self.name}: `{block_query}` block of {len(payload)} bytes is not a whole "
                                  f"number of {item}-byte values", hint="the transfer is corrupt; retry it")
        return text[:-1], np.frombuffer(payload, dtype=dtype)

    def poll_until(self, command: str, accept: Callable[[str], bool], timeout_s: float, poll_s: float,
                   waiting_for: str, hint: str) -> str:
        """Query `command` until `accept(answer)`; a bounded wait with an error saying what to do."""
        deadline = time.monotonic() + timeout_s
        while True:
            answer = self.query(command)
            if accept(answer):
                return answer
            if time.monotonic() >= deadline:
                raise InstrumentError(f"{self.name}: no {waiting_for} within {timeout_s:g} s "
                                      f"(`{command}` last answered {answer[:40]!r})", hint=hint)
            if poll_s:
                time.sleep(poll_s)

    def resync(self) -> None:
        """Discard whatever the instrument still has to say after a protocol error."""
        self._pending.clear()
        try:
            self._res.clear()  # VISA's viClear: pyvisa-py also drains the socket
        except (VisaIOError, OSError, NotImplementedError, AttributeError) as exc:
            log.debug("%s: clear failed: %s", self.name, exc)

    # --- errors ---------------------------------------------------------------------------
    def drain_errors(self) -> list[str]:
        """Read SYST:ERR? until "No error"; returns the queued entries."""
        entries = []
        for _ in range(_MAX_ERROR_DRAIN):
            answer = self.query("SYST:ERR?")
            code_text = answer.split(",", 1)[0].strip()
            try:
                code = int(code_text)
            except ValueError:
                raise InstrumentError(f"{self.name}: SYST:ERR? answered {answer[:80]!r}",
                                      hint="the error queue answer is not 'code,\"message\"'") from None
            if code == 0:
                return entries
            entries.append(answer)
        raise InstrumentError(f"{self.name}: error queue did not empty after {_MAX_ERROR_DRAIN} reads",
                              hint="the instrument keeps reporting errors; power-cycle it")

    def check_errors(self, context: str) -> None:
        entries = self.drain_errors()
        if entries:
            raise InstrumentError(f"{self.name}: `{context}` failed: {'; '.join(entries)}",
                                  hint="see the instrument's message; fix the setting in the test or station file")

    def configure(self, *commands: str) -> None:
        """Send configuration commands, each checked against the error queue."""
        for command in commands:
            self.write(command)
            self.check_errors(command)

    def close(self) -> None:
        """Close the resource and release the lock; a second call does nothing."""
        lock, self._lock = self._lock, None
        res, self._res = getattr(self, "_res", None), None
        try:
            if res is not None:
                res.close()
        except (VisaIOError, OSError) as exc:
            log.debug("%s: close failed: %s", self.name, exc)
        finally:
            if lock is not None:
                lock.release()
