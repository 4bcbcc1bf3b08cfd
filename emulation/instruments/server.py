"""Emulated instruments as real TCP servers on 127.0.0.1, reached through the same drivers as hardware.

`LineServer` is the transport: a listening socket on an ephemeral port, one daemon thread per
connection, bounded waits so `stop()` always ends them. `InstrumentServer` adds SCPI: message
parsing, the command tree, IEEE 488.2 common commands, a real error queue, binary blocks in and
out, and fault injection for tests.
"""
from __future__ import annotations

import copy
import logging
import socket
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from .scpi import (
    ILLEGAL_VALUE,
    PARAMETER_NOT_ALLOWED,
    QUEUE_OVERFLOW,
    UNDEFINED_HEADER,
    QueryBlocked,
    Call,
    CommandTree,
    Response,
    ScpiError,
    find_message_end,
    resolve_header,
    short_form,
    split_units,
)

log = logging.getLogger(__name__)

POLL_S = 0.05  # how often blocked threads look at the stop flag
SEND_TIMEOUT_S = 30.0  # a client that stops reading for this long is dropped
MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # a client sending more without "\n" is dropped
ERROR_QUEUE_DEPTH = 30

# A stored setting's value kind: how a command reads it from its arguments, how a query shows it.
Parse = Callable[[Call, int], Any]
Show = Callable[[Any], str]
Kind = tuple[Parse, Show]
ChannelList = Callable[[Call, int], list[int]]


def on_off() -> Kind:
    return (lambda call, index: call.boolean(index)), (lambda value: str(int(value)))


def numeric(minimum: float, maximum: float, fmt: str = "{:+.8E}") -> Kind:
    return (lambda call, index: call.number(index, minimum, maximum)), fmt.format


def fixed(answer: str | None, check: Callable[[Call], object] = lambda call: None) -> Callable[[Call], str | None]:
    """A handler whose answer never changes in the emulator (a status that stays clear, a command
    with nothing to act on), after `check` has validated the call (its suffix, its channel list)."""
    def handler(call: Call) -> str | None:
        check(call)
        return answer
    return handler


def enumerated(*options: str) -> Kind:
    """One of `options` (written with their short forms in capitals); queries answer the short form."""
    return (lambda call, index: call.option(index, *options)), short_form


class Connection:
    """One client. Handlers may push unsolicited lines (a streaming probe) with `send_line`."""

    def __init__(self, sock: socket.socket, peer: str) -> None:
        self.sock = sock
        self.peer = peer
        self.outbox: deque[bytes] = deque(maxlen=100_000)
        self.dropped = 0  # unsolicited lines lost because the client did not read

    def send(self, data: bytes) -> None:
        # The socket polls with a short timeout for reads; a big block needs longer to drain.
        self.sock.settimeout(SEND_TIMEOUT_S)
        try:
            self.sock.sendall(data)
        finally:
            self.sock.settimeout(POLL_S)

    def send_line(self, line: bytes) -> None:
        """Queue an unsolicited line (any thread); the connection's thread sends it."""
        if len(self.outbox) == self.outbox.maxlen:
            self.dropped += 1
        self.outbox.append(line)

    def flush_outbox(self) -> None:
        if self.outbox:
            lines = []
            while self.outbox:
                lines.append(self.outbox.popleft())
            self.send(b"".join(lines))


class LineServer:
    """Threaded TCP server on 127.0.0.1 (port 0 unless given); subclasses handle received bytes."""

    family = "line"

    def __init__(self, port: int = 0) -> None:
        self._requested_port = port
        self._listener: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self.connections: list[Connection] = []
        self.port = 0

    @property
    def address(self) -> str:
        if not self.port:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return self._format_address(self.port)

    def _format_address(self, port: int) -> str:
        return f"TCPIP::127.0.0.1::{port}::SOCKET"

    def start(self) -> str:
        """Listen on loopback; returns the address string for a station file."""
        if self._listener is not None:
            return self.address
        self._stop.clear()
        listener = socket.create_server(("127.0.0.1", self._requested_port))
        listener.settimeout(POLL_S)
        self._listener = listener
        self.port = listener.getsockname()[1]
        self._spawn(self._accept_loop, f"{self.family}-accept")
        log.info("%s listening at %s", self.family, self.address)
        return self.address

    def stop(self) -> None:
        self._stop.set()
        if self._listener is not None:
            self._listener.close()
        for conn in list(self.connections):
            _close_quietly(conn.sock)
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=2.0)
        self._threads.clear()
        self._listener = None
        self.port = 0

    def __enter__(self) -> LineServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _spawn(self, target: Callable[..., None], name: str, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._threads = [t for t in self._threads if t.is_alive()]
        self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stop.is_set():
            try:
                sock, peer = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(POLL_S)
            conn = Connection(sock, f"{peer[0]}:{peer[1]}")
            self.connections.append(conn)
            self._spawn(self._serve, f"{self.family}-conn", conn)

    def _serve(self, conn: Connection) -> None:
        buf = bytearray()
        scan_from = 0
        try:
            self.on_connect(conn)
            while not self._stop.is_set():
                conn.flush_outbox()
                try:
                    chunk = conn.sock.recv(1 << 20)
                except TimeoutError:
                    continue
                if not chunk:
                    return
                buf += chunk
                while True:
                    end = self.message_end(buf, scan_from)
                    if end is None:
                        scan_from = 0  # rescan once more bytes arrive (blocks may complete)
                        break
                    message = bytes(buf[:end]).rstrip(b"\r")
                    del buf[:end + 1]
                    self.handle_message(conn, message)
                    conn.flush_outbox()
                if len(buf) > MAX_MESSAGE_BYTES:
                    log.warning("%s: %s sent %d bytes without a terminator; dropping", self.family, conn.peer, len(buf))
                    return
        except OSError as exc:
            log.debug("%s: connection %s ended: %s", self.family, conn.peer, exc)
        finally:
            _close_quietly(conn.sock)
            if conn in self.connections:
                self.connections.remove(conn)
            self.on_disconnect(conn)

    def message_end(self, buf: bytearray, scan_from: int) -> int | None:
        """Index of the byte that ends the first whole message in `buf` (SCPI's rules by default)."""
        return find_message_end(buf, scan_from)

    def on_connect(self, conn: Connection) -> None:
        """Hook: a client connected (a server that greets first says so here)."""

    def handle_message(self, conn: Connection, message: bytes) -> None:
        raise NotImplementedError

    def on_disconnect(self, conn: Connection) -> None:
        """Hook: a client went away."""


def _close_quietly(sock: socket.socket) -> None:
    try:
        sock.close()
    except OSError:
        pass


class InstrumentServer(LineServer):
    """SCPI instrument: subclasses register commands in `self.tree` and set `idn`.

    IEEE 488.2 common commands: every mandatory one (*CLS *ESE *ESE? *ESR? *IDN? *OPC *OPC? *RST
    *SRE *SRE? *STB? *TST? *WAI), *TRG, and *OPT? where the model documents it (`options` is
    its answer; None leaves it undefined). Status byte: bit 2 (4) error queue not empty, bit 5
    (32) ESB = *ESR & *ESE, bit 6 (64) MSS = the other bits & *SRE. *OPC sets *ESR bit 0 once
    pending operations are complete. *RST leaves *ESE, *SRE and the error queue alone.

    Error queue (IEEE 488.2 / SCPI): every unit the model does not accept leaves an entry and
    nothing else happens - an unknown header gives -113 "Undefined header"; a handler raises
    `ScpiError(code_and_message, detail)` (e.g. `ScpiError(OUT_OF_RANGE, "...")` for -222) and
    the server queues it; `push_error(ScpiError)` queues one from anywhere (e.g. a trigger the
    model ignores, -211). `SYSTem:ERRor[:NEXT]?` pops the oldest entry as `<code>,"<message>"`
    (`+0,"No error"` when empty), `*CLS` empties the queue and clears `*ESR?`; the queue holds
    ERROR_QUEUE_DEPTH entries, the last being -350 "Queue overflow". A rejected query sends no
    answer, as on the real instruments: the client times out and reads the queue.

    Timing: each message costs `COMMAND_LATENCY_S` per unit, spent through `elapse(seconds)`
    before it executes; `elapse` does nothing here, servers living in a simulated world override
    it to advance the world's clock.

    Faults (`inject_fault`): "silence" drops query responses; "garbage" replaces a response with
    junk; subclasses add their own and consume them with `take_fault`.
    """

    COMMAND_LATENCY_S = 0.0

    family = "scpi"
    idn = "phonebench,EMU,0,0"
    options: str | None = None  # *OPT? answer where the model documents the query
    self_test = "+0"  # *TST? answer: 0 = passed
    no_error = '+0,"No error"'  # SYSTem:ERRor? with an empty queue
    SAVED_STATE: tuple[str, ...] = ()  # attributes *SAV stores and *RCL restores (none: no *SAV/*RCL)
    SAVE_SLOTS = range(0)
    FAULTS: frozenset[str] = frozenset({"silence", "garbage"})

    def __init__(self, port: int = 0) -> None:
        super().__init__(port)
        self.lock = threading.RLock()  # one command at a time, like the instrument's parser
        self.tree = CommandTree()
        self.errors: deque[str] = deque()
        self.esr = 0  # standard event status register
        self.ese = 0  # its enable register
        self.sre = 0  # service request enable register
        self.commands_seen: list[str] = []  # every header executed, for tests
        self.settings: dict[tuple, Any] = {}  # stored settings (add_setting), back to defaults at *RST
        self.kept_settings: dict[tuple, Any] = {}  # the ones *RST leaves alone (*PSC, ...)
        self._saved: dict[int, dict[str, Any]] = {}
        self._faults: dict[str, int | None] = {}
        # Faults have their own lock: world observers consult them while holding the world's lock.
        self._fault_lock = threading.Lock()
        self._fault_rng = np.random.default_rng(0xFA17)
        for pattern, handler in (("*IDN?", lambda c: self.idn), ("*RST", self._rst), ("*CLS", self._cls),
                                 ("*OPC?", self._opc_query), ("*OPC", self._opc), ("*WAI", self._wai),
                                 ("*TRG", self._trg), ("*ESR?", self._esr), ("*TST?", self._tst),
                                 ("*ESE", self._set_ese), ("*ESE?", lambda c: f"+{self.ese}"),
                                 ("*SRE", self._set_sre), ("*SRE?", lambda c: f"+{self.sre}"),
                                 ("*STB?", lambda c: f"+{self.status_byte()}"),
                                 (":SYSTem:ERRor[:NEXT]?", self._syst_err),
                                 (":SYSTem:VERSion?", lambda c: "1999.0")):
            self.tree.add(pattern, handler)
        self.tree.add("*OPT?", self._opt)
        if self.SAVED_STATE:
            self.tree.add("*SAV", self._sav)
            self.tree.add("*RCL", self._rcl)

    # --- stored settings -------------------------------------------------------------------
    def add_setting(self, pattern: str, default: Any, kind: Kind, channels: ChannelList | None = None,
                    reset: bool = True) -> None:
        """A command the model documents whose only effect the emulator shows is its own query:
        `pattern <value>[,<channels>]` stores the value (one per numeric suffix and channel),
        `pattern? [<channels>]` answers it; *RST restores `default` unless `reset` is False."""
        parse, show = kind
        store = self.settings if reset else self.kept_settings

        def keys(call: Call, index: int) -> list[tuple]:
            listed = channels(call, index) if channels is not None and call.has(index) else [None]
            return [(pattern, call.suffixes, channel) for channel in listed]

        def set_value(call: Call) -> None:
            value = parse(call, 0)
            for key in keys(call, 1):
                store[key] = value

        def get_value(call: Call) -> str:
            return ",".join(show(store.get(key, default)) for key in keys(call, 0))

        set_value.stored_only = get_value.stored_only = True  # type: ignore[attr-defined]  # for conformance
        self.tree.add(pattern, set_value)
        self.tree.add(pattern + "?", get_value)

    def _sav(self, call: Call) -> None:
        slot = int(call.number(0, self.SAVE_SLOTS.start, self.SAVE_SLOTS.stop - 1))
        state = {name: getattr(self, name) for name in self.SAVED_STATE}
        self._saved[slot] = copy.deepcopy({**state, "settings": self.settings})

    def _rcl(self, call: Call) -> None:
        slot = int(call.number(0, self.SAVE_SLOTS.start, self.SAVE_SLOTS.stop - 1))
        if slot not in self._saved:
            raise ScpiError(ILLEGAL_VALUE, f"no state stored in location {slot}")
        state = copy.deepcopy(self._saved[slot])
        self.settings = state.pop("settings")
        for name, value in state.items():
            setattr(self, name, value)
        self.recalled()

    # --- faults ---------------------------------------------------------------------------
    def inject_fault(self, name: str, count: int | None = 1) -> None:
        """Arm a fault for the next `count` occasions (None: until clear_faults())."""
        if name not in self.FAULTS:
            raise ValueError(f"{type(self).__name__} has no fault {name!r}; known: {sorted(self.FAULTS)}")
        with self._fault_lock:
            self._faults[name] = count

    def clear_faults(self) -> None:
        with self._fault_lock:
            self._faults.clear()

    def take_fault(self, name: str) -> bool:
        with self._fault_lock:
            if name not in self._faults:
                return False
            remaining = self._faults[name]
            if remaining is not None:
                if remaining <= 1:
                    del self._faults[name]
                else:
                    self._faults[name] = remaining - 1
            return True

    # --- error queue ----------------------------------------------------------------------
    def push_error(self, error: ScpiError) -> None:
        log.debug("%s error %s", self.family, error)
        self.esr |= 0x20 if error.code <= -100 and error.code > -200 else 0x10
        if len(self.errors) >= ERROR_QUEUE_DEPTH - 1:
            if len(self.errors) == ERROR_QUEUE_DEPTH - 1:
                self.errors.append(ScpiError(QUEUE_OVERFLOW).entry())
            return
        self.errors.append(error.entry())

    def _syst_err(self, call: Call) -> str:
        return self.errors.popleft() if self.errors else self.no_error

    def _cls(self, call: Call) -> None:
        self.errors.clear()
        self.esr = 0

    def _esr(self, call: Call) -> str:
        value, self.esr = self.esr, 0
        return str(value)

    def _rst(self, call: Call) -> None:
        self.reset()
        self.settings.clear()

    def _tst(self, call: Call) -> str:
        return self.self_test

    def _opt(self, call: Call) -> str:
        if self.options is None:  # a model without *OPT? in its manual
            raise ScpiError(UNDEFINED_HEADER, "*OPT?")
        return self.options

    def _opc(self, call: Call) -> None:
        if self.complete_pending():
            self.esr |= 0x01

    def _set_ese(self, call: Call) -> None:
        self.ese = int(call.number(0, 0, 255))

    def _set_sre(self, call: Call) -> None:
        self.sre = int(call.number(0, 0, 255)) & ~0x40  # bit 6 cannot be enabled

    def status_byte(self) -> int:
        """*STB?: bit 2 error queue not empty, bit 5 ESB, bit 6 MSS (not cleared by reading)."""
        stb = (0x04 if self.errors else 0) | (0x20 if self.esr & self.ese else 0)
        return stb | (0x40 if stb & self.sre else 0)

    def _opc_query(self, call: Call) -> str | None:
        return "1" if self.complete_pending() else None

    def _wai(self, call: Call) -> None:
        self.complete_pending()

    def _trg(self, call: Call) -> None:
        self.bus_trigger()

    # --- hooks for subclasses ----------------------------------------------------------------
    def reset(self) -> None:
        """*RST: back to power-on settings."""

    def recalled(self) -> None:
        """*RCL restored SAVED_STATE: subclasses push it where it acts (the world)."""

    def complete_pending(self) -> bool:
        """*OPC?/*WAI: wait (in simulated time) for overlapped operations; False = never completes."""
        return True

    def bus_trigger(self) -> None:
        """*TRG: a bus trigger."""

    def elapse(self, seconds: float) -> None:
        """Time a command takes on the instrument; servers with a simulated clock advance it."""

    # --- message execution -------------------------------------------------------------------
    def handle_message(self, conn: Connection, message: bytes) -> None:
        responses: list[bytes] = []
        with self.lock:
            try:
                units = split_units(message)
            except ScpiError as exc:
                self.push_error(exc)
                return
            if self.COMMAND_LATENCY_S:  # the message's parse and execution time, in one step
                self.elapse(self.COMMAND_LATENCY_S * len(units))
            base: list[str] = []
            for header, args in units:
                words, query, new_base = resolve_header(header, base)
                found = self.tree.lookup(words, query)
                if found is None:
                    # A relative header is looked up from the current path only (SCPI's path rule).
                    self.push_error(ScpiError(UNDEFINED_HEADER, header))
                    continue
                base = new_base
                handler, suffixes = found
                self.commands_seen.append(header)
                call = Call(header, args, suffixes)
                try:
                    result: Response = handler(call)
                    if call.used < len(args):
                        raise ScpiError(PARAMETER_NOT_ALLOWED, f"{header}: {len(args) - call.used} too many")
                except ScpiError as exc:
                    self.push_error(exc)
                    continue
                except QueryBlocked as exc:
                    log.info("%s: `%s` blocks (%s); the rest of the message is not executed", self.family, header, exc)
                    return
                if query and result is not None:
                    responses.append(result if isinstance(result, bytes) else str(result).encode())
            if not responses:
                return
            if self.take_fault("silence"):
                log.info("%s: fault 'silence' drops a response", self.family)
                return
            if self.take_fault("garbage"):
                junk = bytes(self._fault_rng.integers(33, 127, 24, dtype=np.uint8))
                conn.send(junk + b"\n")
                return
        conn.send(b";".join(responses) + b"\n")
