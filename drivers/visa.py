"""Shared VISA plumbing for SCPI instrument drivers: opening sessions, identity, I/O and errors.

Sessions open through pyvisa's pure-Python backend ("@py") by default; "@sim" or "file.yaml@sim"
select pyvisa-sim. Raw-socket resources end messages with "\\n" only, so read and write
termination are set to it. Every failure becomes an InstrumentError naming the instrument, the
command and what the instrument said.
"""
from __future__ import annotations

import logging
import re
import select
import socket
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pyvisa
from pyvisa import constants
from pyvisa.errors import VisaIOError

from bench.core.decoding import DecodeError, parse_number
from bench.core.errors import InstrumentError

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 5.0
CHUNK_BYTES = 1 << 20  # large reads: pyvisa's default 20 KiB chunks cost a loop turn each
_MAX_ERROR_DRAIN = 50
# "<answer>;<code>,"<message>"" - the answer is absent when the instrument refused the query.
_ANSWER_AND_ERROR = re.compile(r'^(?:(?P<answer>.*?);)?(?P<entry>(?P<code>[+-]?\d+),".*")$', re.DOTALL)

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
    """Make pyvisa-py raw sockets fit for instrument traffic.

    - TCP_NODELAY: a command followed by SYST:ERR? otherwise waits for the peer's delayed ACK
      (~40 ms per pair). pyvisa-py 0.8 wires VI_ATTR_TCPIP_NODELAY to a setter that refuses it,
      so it is set on the socket itself.
    - pyvisa-py reads 4 KiB per recv(); waveform transfers need bigger reads.
    """
    session = getattr(resource.visalib, "sessions", {}).get(resource.session)
    sock = getattr(session, "interface", None)
    if isinstance(sock, socket.socket):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if getattr(session, "max_recv_size", 0) == 4096:
        session.max_recv_size = CHUNK_BYTES


def _raw_socket_session(resource: Any) -> Any:
    """pyvisa-py's raw-socket session behind a resource, or None for any other backend/kind."""
    session = getattr(getattr(resource, "visalib", None), "sessions", {}).get(getattr(resource, "session", None))
    if isinstance(getattr(session, "interface", None), socket.socket) and isinstance(
            getattr(session, "_pending_buffer", None), bytearray):
        return session
    return None


def _recv_exact(session: Any, count: int, timeout_s: float) -> bytearray:
    """Read exactly `count` payload bytes from a pyvisa-py raw socket into one buffer.

    pyvisa-py copies a large read five times (recv, pending buffer, slices, result); a block
    payload is read here once, straight from the socket, after whatever pyvisa already buffered.
    """
    out = bytearray(count)
    view = memoryview(out)
    pending = session._pending_buffer
    got = min(len(pending), count)
    view[:got] = pending[:got]
    del pending[:got]
    sock = session.interface
    deadline = time.monotonic() + timeout_s
    while got < count:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([sock], [], [], remaining)[0]:
            raise VisaIOError(constants.StatusCode.error_timeout)
        received = sock.recv_into(view[got:])
        if not received:
            raise VisaIOError(constants.StatusCode.error_connection_lost)
        got += received
    return out


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
    """Base of every SCPI driver: I/O that fails clearly, identity, error-queue checks."""

    role = "instrument"
    family = ""

    def __init__(self, address: str, backend: str = "@py", timeout_s: float = DEFAULT_TIMEOUT_S,
                 resource: Any = None) -> None:
        self.address = address
        self._res = resource if resource is not None else open_resource(address, backend, timeout_s)
        self._timeout_s = timeout_s
        self.name = f"{self.role} {self.family} at {address}"
        self.identity = parse_idn(self.query("*IDN?"), address, self.role, self.family)
        log.info("%s is %s", self.name, self.identity)

    @property
    def timeout_s(self) -> float:
        return self._timeout_s

    @timeout_s.setter
    def timeout_s(self, seconds: float) -> None:
        self._timeout_s = seconds
        self._res.timeout = seconds * 1000.0

    # --- I/O ------------------------------------------------------------------------------
    def _io_error(self, command: str, exc: Exception) -> InstrumentError:
        if isinstance(exc, VisaIOError) and exc.error_code == constants.StatusCode.error_timeout:
            return InstrumentError(f"{self.name}: no answer to `{command}` within {self.timeout_s:g} s",
                                   hint="the instrument is silent: check it is on and idle, the address, "
                                        "and that the command exists on this model")
        return InstrumentError(f"{self.name}: I/O failed on `{command}`: {exc}",
                               hint="check the connection; reopen the instrument")

    def write(self, command: str) -> None:
        log.debug("%s <- %s", self.name, command)
        try:
            self._res.write(command)
        except (VisaIOError, OSError) as exc:
            raise self._io_error(command, exc) from exc

    def query(self, command: str) -> str:
        log.debug("%s <- %s", self.name, command)
        try:
            answer = self._res.query(command)
        except (VisaIOError, OSError) as exc:
            error = self._io_error(command, exc)
            if command != "SYST:ERR?" and isinstance(exc, VisaIOError):
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

    def read_block(self, command: str, timeout_s: float | None = None) -> bytes | bytearray:
        """Read the IEEE 488.2 definite-length block answering `command` (already written)."""
        res = self._res
        previous_term, previous_timeout = res.read_termination, res.timeout
        res.read_termination = None  # binary payloads contain "\n"; read exact byte counts
        if timeout_s is not None:
            res.timeout = timeout_s * 1000.0
        try:
            head = bytes(res.read_bytes(2))
            if head[:1] != b"#" or not head[1:2].isdigit() or head[1:2] == b"0":
                res.read_termination = previous_term
                rest = head + (b"" if head.endswith(b"\n") else res.read_raw())
                raise InstrumentError(f"{self.name}: `{command}` answered {rest[:60]!r} instead of a "
                                      "definite-length binary block",
                                      hint="check the data format settings; the instrument may be another model")
            digits = int(head[1:2])
            length_text = bytes(res.read_bytes(digits))
            if not length_text.isdigit():
                raise InstrumentError(f"{self.name}: `{command}` sent a block header with length "
                                      f"{length_text!r}", hint="the transfer is corrupt; retry it")
            length = int(length_text)
            session = _raw_socket_session(res)
            if session is not None and length:
                payload: bytes | bytearray = _recv_exact(session, length, res.timeout / 1000.0)
            else:
                payload = bytes(res.read_bytes(length)) if length else b""
            if bytes(res.read_bytes(1)) != b"\n":
                raise InstrumentError(f"{self.name}: `{command}` block of {length} bytes is not followed by "
                                      "the terminator", hint="the transfer is corrupt; retry it")
            return payload
        except VisaIOError as exc:
            if exc.error_code == constants.StatusCode.error_timeout:
                raise InstrumentError(f"{self.name}: binary block answering `{command}` truncated or stalled "
                                      f"(no complete block within {res.timeout / 1000:g} s)",
                                      hint="the transfer was cut short; retry, and check the link") from exc
            raise self._io_error(command, exc) from exc
        except InstrumentError:
            self.resync()
            raise
        finally:
            res.read_termination, res.timeout = previous_term, previous_timeout

    def query_block(self, command: str, dtype: str | np.dtype, timeout_s: float | None = None) -> np.ndarray:
        self.write(command)
        payload = self.read_block(command, timeout_s)
        item = np.dtype(dtype).itemsize
        if len(payload) % item:
            raise InstrumentError(f"{self.name}: `{command}` block of {len(payload)} bytes is not a whole "
                                  f"number of {item}-byte values", hint="check the data format settings")
        return np.frombuffer(payload, dtype=dtype)

    def setup_and_query(self, setup: list[str], query: str) -> str:
        """Settings, a query and the error check in one message: one round trip on a hot path.

        The answer and the error-queue entry come back as `<answer>;<code>,"<message>"`.
        """
        message = ";".join([*setup, query, ":SYSTem:ERRor?"])
        m = _ANSWER_AND_ERROR.match(self.query(message))
        if m is None or int(m["code"]) != 0 or m["answer"] is None:
            entries = ([m["entry"]] if m and int(m["code"]) else []) + self.drain_errors()
            raise InstrumentError(f"{self.name}: `{message}` failed: {'; '.join(entries) or 'no answer'}",
                                  hint="see the instrument's message; fix the setting in the test or station file")
        return m["answer"]

    def resync(self) -> None:
        """Discard whatever the instrument still has to say after a protocol error."""
        try:
            self._res.clear()
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
        try:
            self._res.close()
        except (VisaIOError, OSError) as exc:
            log.debug("%s: close failed: %s", self.name, exc)
