"""How long the bench waits for the phone and the instruments, to tell the bench's own overhead
from the time a unit really needs (`bench accept`, `bench line`).

While a WaitMeter is installed, every driver call that talks to a device or an instrument (ADB
shell and file transfer, SCPI writes, queries and block reads, serial probe lines) is timed, the
way tracing libraries instrument client libraries: the driver classes' methods are wrapped and
restored afterwards. Phones are timed whatever their transport: every phone driver class (the
subclasses of phonebench.drivers.device.ShellCommands: the adb server's, the serverless one, any other).
Overlapping waits (two threads, or a call inside another) count once: the meter adds up the wall
time during which at least one wait is in progress.
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from phonebench.drivers.device import ShellCommands

# The calls that block on a phone, on any phone driver class (transport-agnostic).
PHONE_DRIVERS = "phonebench.drivers.adb_server"  # imports every transport's phone class
PHONE_CALLS = ("connect", "close", "online", "reboot", "shell", "shell_timed", "push_bytes", "push", "pull_bytes",
               "pull", "stat", "listdir")
# (module, class, methods, category): the calls that block on an instrument.
TIMED: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    ("phonebench.drivers.visa", "ScpiInstrument", ("__init__", "close", "write", "query", "read_block"), "instrument"),
    ("phonebench.drivers.stimulus", "Keysight33500B", ("load_clip",), "instrument"),
    ("phonebench.drivers.thermal", "SerialLine", ("__init__", "close", "write", "read_line", "query"), "instrument"),
)


@dataclass
class WaitTotals:
    device_s: float
    instrument_s: float
    any_s: float  # union of both (what the bench did not spend itself)
    calls: int


class WaitMeter:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active = {"device": 0, "instrument": 0, "any": 0}
        self._since = {"device": 0.0, "instrument": 0.0, "any": 0.0}
        self._total = {"device": 0.0, "instrument": 0.0, "any": 0.0}
        self._calls = 0
        self._patched: list[tuple[type, str, Any]] = []

    # --- accounting -------------------------------------------------------------------------
    def _enter(self, category: str) -> None:
        now = time.perf_counter()
        with self._lock:
            self._calls += 1
            for key in (category, "any"):
                if self._active[key] == 0:
                    self._since[key] = now
                self._active[key] += 1

    def _exit(self, category: str) -> None:
        now = time.perf_counter()
        with self._lock:
            for key in (category, "any"):
                self._active[key] -= 1
                if self._active[key] == 0:
                    self._total[key] += now - self._since[key]

    @contextlib.contextmanager
    def waiting(self, category: str) -> Iterator[None]:
        """Time a wait by hand (e.g. a phone swap on the line)."""
        self._enter(category)
        try:
            yield
        finally:
            self._exit(category)

    def totals(self) -> WaitTotals:
        now = time.perf_counter()
        with self._lock:
            live = {k: self._total[k] + (now - self._since[k] if self._active[k] else 0.0) for k in self._total}
            return WaitTotals(live["device"], live["instrument"], live["any"], self._calls)

    # --- installing -------------------------------------------------------------------------
    def _wrap(self, method: Callable[..., Any], category: str) -> Callable[..., Any]:
        @functools.wraps(method)
        def timed(*args: Any, **kwargs: Any) -> Any:
            self._enter(category)
            try:
                return method(*args, **kwargs)
            finally:
                self._exit(category)

        timed.__wait_meter__ = self  # type: ignore[attr-defined]
        return timed

    def install(self) -> WaitMeter:
        if self._patched:
            return self
        importlib.import_module(PHONE_DRIVERS)
        for cls in _subclasses(ShellCommands):
            self._patch(cls, PHONE_CALLS, "device")
        for module_name, class_name, methods, category in TIMED:
            self._patch(getattr(importlib.import_module(module_name), class_name), methods, category)
        return self

    def _patch(self, cls: type, methods: tuple[str, ...], category: str) -> None:
        for name in methods:
            original = cls.__dict__.get(name)  # a class's own methods only: an inherited one is patched once
            if original is None:
                continue
            self._patched.append((cls, name, original))
            setattr(cls, name, self._wrap(original, category))

    def uninstall(self) -> None:
        for cls, name, original in reversed(self._patched):
            setattr(cls, name, original)
        self._patched.clear()

    def __enter__(self) -> WaitMeter:
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.uninstall()


def _subclasses(cls: type) -> list[type]:
    found: list[type] = []
    direct: list[type] = cls.__subclasses__()
    for sub in direct:
        found += [sub, *_subclasses(sub)]
    return list(dict.fromkeys(found))
