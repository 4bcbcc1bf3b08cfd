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
        return ";".join(self._answer(u).decode() for u in units)

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
