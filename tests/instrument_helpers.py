"""Test doubles and small tools shared by the instrument tests.

ScriptedResource stands in for a pyvisa resource and ScriptedSerial for a pyserial port: both
record every command and answer from a script, so tests can assert exact command sequences.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable

import numpy as np
from pyvisa import constants
from pyvisa.errors import VisaIOError

Answer = str | bytes | Callable[[str], str | bytes] | list
NO_ERROR = '+0,"No error"'


class ScriptedResource:
    """A fake VISA resource: `answers` maps a query (exact text) to its answer(s)."""

    def __init__(self, answers: dict[str, Answer]) -> None:
        self.answers = {"SYST:ERR?": NO_ERROR, ":SYSTem:ERRor?": NO_ERROR, **answers}
        self.log: list[str] = []
        self.read_termination: str | None = "\n"
        self.write_termination = "\n"
        self.timeout = 5000.0
        self.chunk_size = 1 << 20
        self._pending = bytearray()

    def _answer(self, command: str) -> bytes:
        if command not in self.answers:
            raise AssertionError(f"unscripted query {command!r}")
        answer = self.answers[command]
        if isinstance(answer, list):
            answer = answer.pop(0) if len(answer) > 1 else answer[0]
        if callable(answer):
            answer = answer(command)
        return answer if isinstance(answer, bytes) else answer.encode()

    def write(self, command: str) -> None:
        """A query written (to read its answer as bytes) is answered unit by unit, joined by ";"."""
        self.log.append(command)
        units = [u for u in command.split(";") if u.endswith("?") or "? " in u]
        if len(units) > 1:
            self._pending += b";".join(self._answer(u) for u in units) + b"\n"
        elif units:
            self._pending += self._answer(command) + b"\n"

    def query(self, command: str) -> str:
        """Answers every query unit of a compound message, joined by ";" as an instrument does."""
        self.log.append(command)
        units = [u for u in command.split(";") if u.endswith("?") or "? " in u]
        return ";".join(self._answer(u).decode("ascii") for u in units)  # pyvisa decodes ASCII

    def write_binary_values(self, message: str, values, datatype: str = "f", is_big_endian: bool = False) -> None:
        data = np.asarray(values).astype((">" if is_big_endian else "<") + datatype).tobytes()
        self.log.append(f"{message}<block {len(data)} bytes>")

    def read_bytes(self, count: int, **_: object) -> bytes:
        if len(self._pending) < count:
            self._pending.clear()
            raise VisaIOError(constants.StatusCode.error_timeout)
        out = bytes(self._pending[:count])
        del self._pending[:count]
        return out

    def read_raw(self) -> bytes:
        end = self._pending.find(b"\n")
        end = len(self._pending) - 1 if end < 0 else end
        out = bytes(self._pending[:end + 1])
        del self._pending[:end + 1]
        return out

    def clear(self) -> None:
        self._pending.clear()

    def close(self) -> None:
        pass

    def commands(self) -> list[str]:
        """The log without the error-queue checks the drivers interleave."""
        return [c for c in self.log if c != "SYST:ERR?"]


class ScriptedSerial:
    """A fake pyserial port answering whole lines from a script; `lines` can queue unsolicited ones."""

    def __init__(self, answers: dict[str, Answer]) -> None:
        self.answers = answers
        self.log: list[str] = []
        self.lines: deque[bytes] = deque()

    def write(self, data: bytes) -> int:
        command = data.decode().strip()
        self.log.append(command)
        if command in self.answers:
            answer = self.answers[command]
            if isinstance(answer, list):
                answer = answer.pop(0) if len(answer) > 1 else answer[0]
            if callable(answer):
                answer = answer(command)
            for line in (answer if isinstance(answer, tuple) else (answer,)):
                self.lines.append((line if isinstance(line, bytes) else line.encode()) + b"\n")
        return len(data)

    def readline(self) -> bytes:
        return self.lines.popleft() if self.lines else b""

    def reset_input_buffer(self) -> None:
        self.lines.clear()

    def close(self) -> None:
        pass


def block(payload: bytes) -> bytes:
    length = str(len(payload)).encode()
    return b"#" + str(len(length)).encode() + length + payload


def onset_s(t: np.ndarray, volts: np.ndarray, quiet_s: float = 0.2, k: float = 8.0, window_s: float = 0.002) -> float:
    """Crude envelope onset for tests: rectify, moving average, k x the noise of a quiet lead-in."""
    dt = t[1] - t[0]
    n = max(int(window_s / dt), 1)
    envelope = np.convolve(np.abs(np.nan_to_num(volts)), np.ones(n) / n, mode="same")
    quiet = envelope[t < t[0] + quiet_s]
    threshold = quiet.mean() + k * quiet.std()
    above = np.flatnonzero(envelope > threshold)
    assert above.size, "no onset found"
    return float(t[above[0]])


class Hangup(bytes):
    """Bytes a RawPeer sends before closing the connection (a link dropped mid-answer)."""


class RawPeer:
    """A loopback TCP peer that answers each received line with `reply(line)`: bytes to send,
    Hangup(bytes) to send them and close, or None to close at once."""

    def __init__(self, reply: Callable[[bytes], bytes | None]) -> None:
        import socket
        import threading

        self.reply = reply
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"TCPIP::127.0.0.1::{self.listener.getsockname()[1]}::SOCKET"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        with conn:
            buf = b""
            while True:
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    answer = self.reply(line)
                    if answer:
                        conn.sendall(answer)
                    if answer is None or isinstance(answer, Hangup):
                        return

    def close(self) -> None:
        self.listener.close()
        self.thread.join(timeout=2)


NO_ERROR_STEP = ("SYST:ERR?", NO_ERROR)
Step = tuple[str, str | bytes | None]


def ok(*commands: str) -> list[Step]:
    """Setting commands the way the drivers send them: each followed by an error-queue read."""
    return [step for command in commands for step in ((command, None), NO_ERROR_STEP)]


class TranscriptResource:
    """A fake VISA resource that plays one dialogue in order: (what the host sends, the answer or
    None). Any other command, order or an unanswered read fails the test with the step number."""

    def __init__(self, steps: list[Step]) -> None:
        self.steps = list(steps)
        self.position = 0
        self.read_termination: str | None = "\n"
        self.write_termination = "\n"
        self.timeout = 5000.0
        self.chunk_size = 1 << 20
        self._pending = bytearray()

    def _expect(self, sent: str) -> str | bytes | None:
        if self.position >= len(self.steps):
            raise AssertionError(f"step {self.position}: the driver sent {sent!r} after the transcript ended")
        expected, answer = self.steps[self.position]
        if sent != expected:
            raise AssertionError(f"step {self.position}: expected {expected!r}, the driver sent {sent!r}")
        self.position += 1
        return answer

    def write(self, command: str) -> None:
        answer = self._expect(command)
        if answer is not None:
            self._pending += (answer if isinstance(answer, bytes) else answer.encode("ascii")) + b"\n"

    def query(self, command: str) -> str:
        answer = self._expect(command)
        if answer is None:
            raise VisaIOError(constants.StatusCode.error_timeout)
        return (answer if isinstance(answer, str) else answer.decode("ascii"))

    def write_binary_values(self, message: str, values, datatype: str = "f", is_big_endian: bool = False) -> None:
        data = np.asarray(values).astype((">" if is_big_endian else "<") + datatype).tobytes()
        self._expect(f"{message}<block {len(data)} bytes: {data.hex()}>")

    def read_bytes(self, count: int, **_: object) -> bytes:
        if len(self._pending) < count:
            raise AssertionError(f"step {self.position}: the driver reads {count} bytes, "
                                 f"{len(self._pending)} are pending")
        out = bytes(self._pending[:count])
        del self._pending[:count]
        return out

    def read(self) -> str:
        end = self._pending.index(b"\n")
        out = bytes(self._pending[:end])
        del self._pending[:end + 1]
        return out.decode("ascii")

    def clear(self) -> None:
        self._pending.clear()

    def close(self) -> None:
        pass

    def assert_done(self) -> None:
        assert self.position == len(self.steps), (
            f"the driver stopped at step {self.position} of {len(self.steps)}: next {self.steps[self.position]!r}")
        assert not self._pending, f"unread answer bytes: {bytes(self._pending[:60])!r}"
