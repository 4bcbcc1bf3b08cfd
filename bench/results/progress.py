"""Progress bars for long bench work (trials, soaks, sweeps) that show through pytest's capture.

Off in quiet mode and when the terminal is not interactive, where a bar would only clutter logs.
"""
from __future__ import annotations

import contextlib
import sys
from typing import Any, Callable, ContextManager, Iterator

from tqdm import tqdm


class _TerminalFile:
    """A file-like object that writes to the real terminal, pausing pytest's capture around it."""

    def __init__(self, suspend: Callable[[], ContextManager[Any]]) -> None:
        self._suspend = suspend

    def write(self, text: str) -> int:
        with self._suspend():
            sys.stderr.write(text)
            sys.stderr.flush()
        return len(text)

    def flush(self) -> None:
        pass


class Progress:
    """Creates bars; `enabled=False` gives silent ones with the same interface."""

    def __init__(self, enabled: bool, suspend_capture: Callable[[], ContextManager[Any]] | None = None) -> None:
        self.enabled = enabled
        self._file = _TerminalFile(suspend_capture or contextlib.nullcontext)

    @contextlib.contextmanager
    def bar(self, total: int | None, description: str, unit: str = "it") -> Iterator[tqdm]:
        with tqdm(total=total, desc=description, unit=unit, file=self._file, disable=not self.enabled,
                  leave=False, mininterval=0.25, dynamic_ncols=True) as bar:
            yield bar
