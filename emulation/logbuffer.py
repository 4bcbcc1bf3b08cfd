"""The emulated phone's in-memory log buffer (what `logcat` reads). Times are the phone's simulated
clock; a reboot clears it, as it clears a real phone's ring buffer."""
from __future__ import annotations

import threading
import time as _time
from collections import deque
from dataclasses import dataclass
from typing import Callable

CAPACITY = 20_000  # entries kept (the real ring buffer is sized in bytes; this is the same idea)
LEVELS = "VDIWEF"


@dataclass(frozen=True)
class LogEntry:
    time: float
    pid: int
    tid: int
    level: str
    tag: str
    message: str

    def threadtime(self) -> str:
        """`logcat -v threadtime`: MM-DD HH:MM:SS.mmm  PID  TID L TAG     : message"""
        stamp = _time.strftime("%m-%d %H:%M:%S", _time.gmtime(self.time))
        millis = int(round((self.time % 1) * 1000)) % 1000
        return f"{stamp}.{millis:03d} {self.pid:5d} {self.tid:5d} {self.level} {self.tag:8s}: {self.message}"


class LogBuffer:
    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now
        self._lock = threading.Lock()
        self._entries: deque[LogEntry] = deque(maxlen=CAPACITY)
        self._count = 0  # entries ever logged: a streaming reader's position

    def log(self, level: str, tag: str, message: str, pid: int = 1000) -> None:
        entry = LogEntry(self._now(), pid, pid, level, tag, message)
        with self._lock:
            self._entries.append(entry)
            self._count += 1

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def entries(self) -> list[LogEntry]:
        with self._lock:
            return list(self._entries)

    def after(self, position: int) -> tuple[int, list[LogEntry]]:
        """Entries logged since `position` (a count returned earlier; 0: everything kept) and the
        new position, for a reader that follows the log (`logcat` without -d)."""
        with self._lock:
            new = min(self._count - position, len(self._entries))
            return self._count, list(self._entries)[len(self._entries) - new:] if new > 0 else []
