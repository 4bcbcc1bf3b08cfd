"""How a run's progress (phonebench.bench.results.run_progress) is shown: lines in a log, or one
tqdm bar per phone in a terminal, with the lines printed above the bars."""
from __future__ import annotations

import io
import json
import logging
import os
import sys
from pathlib import Path
from typing import IO, Any, Protocol

from tqdm import tqdm

from .run_progress import CURRENT_TEST, RunProgress, eta_text, short_test

log = logging.getLogger(__name__)


class ProgressView(Protocol):
    def show(self, lines: list[str]) -> None: ...

    def refresh(self) -> None: ...

    def close(self) -> None: ...


class LineView:
    """For logs (CI, a pipe): each line printed whole and flushed, the heartbeats included."""

    def __init__(self, progress: RunProgress, out: IO[str] | None = None) -> None:
        self.progress, self.out = progress, out

    def show(self, lines: list[str]) -> None:
        out = self.out or sys.stdout
        for line in lines:
            out.write(line + "\n")
        out.flush()

    def refresh(self) -> None:
        self.show(self.progress.heartbeat())

    def close(self) -> None:
        pass


class BarView:
    """For a terminal: a bar per phone at a fixed position (lab minutes against the plan, or tests
    done without one), its test and the run's ETA beside it; lines go above the bars."""

    def __init__(self, progress: RunProgress, phones: list[str], out: IO[str] | None = None) -> None:
        self.progress, self.out = progress, out or sys.stderr
        self.bars: dict[str, tqdm] = {}
        # A terminal that reports no size (a pty without one: `script`, some CI runners) would get
        # no bars from tqdm (it hides bars past the screen's 0 rows): a fixed size then.
        sized = _width(self.out) > 0
        for position, dut in enumerate(phones):
            plan = progress.phone(dut).plan
            self.bars[dut] = tqdm(total=round(plan.lab_time_s / 60, 1) if plan else None, desc=f"{dut:8}",
                                  unit="lab min", position=position, leave=True, file=self.out,
                                  dynamic_ncols=sized, ncols=None if sized else FALLBACK_COLUMNS,
                                  nrows=None if sized else FALLBACK_ROWS, mininterval=0.5,
                                  bar_format="{desc} {percentage:3.0f}%|{bar}| {n:.1f}/{total:.1f} lab min{postfix}"
                                  if plan else "{desc} {n:.1f} lab min{postfix}")

    def show(self, lines: list[str]) -> None:
        for line in lines:
            tqdm.write(line, file=self.out)
        self.refresh()

    def refresh(self) -> None:
        eta = eta_text(self.progress.eta_s())
        for dut, bar in self.bars.items():
            phone = self.progress.phone(dut)
            bar.n = round(phone.done_s / 60, 1)
            doing = "finished" if phone.finished else short_test(phone.current) if phone.current else "waiting"
            bar.set_postfix_str(f"{phone.tests_done} tests, {phone.failed} failed | {doing} | {eta}", refresh=False)
            bar.refresh()

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()


FALLBACK_COLUMNS, FALLBACK_ROWS = 120, 40


def _width(out: IO[str]) -> int:
    try:
        return os.get_terminal_size(out.fileno()).columns
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return 0


def wants_bars(out: IO[str] | None = None) -> bool:
    """Bars only in a real terminal: a pipe, a log file or TERM=dumb gets lines."""
    stream = out or sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)()) and os.environ.get("TERM", "") not in ("", "dumb")


def make_view(progress: RunProgress, phones: list[str]) -> ProgressView:
    if wants_bars() and sys.stdout.isatty():
        return BarView(progress, phones)
    return LineView(progress)


def read_json(path: Path) -> dict[str, Any] | None:
    """A record a worker rewrites atomically; None when absent or (never whole) unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        if not isinstance(exc, FileNotFoundError):
            log.debug("progress: %s not read: %s", path, exc)
        return None
    return data if isinstance(data, dict) else None


class BayWatch:
    """Reads one bay worker's folder for what changed: its test in progress and its record."""

    def __init__(self, bay: str, folder: Path) -> None:
        self.bay, self.folder = bay, folder
        self._stamps: dict[str, tuple[int, int, int]] = {}

    def _changed(self, name: str) -> dict[str, Any] | None:
        path = self.folder / name
        try:
            info = path.stat()
        except OSError:
            return None
        stamp = (info.st_mtime_ns, info.st_ino, info.st_size)  # each atomic rewrite is a new inode
        if self._stamps.get(name) == stamp:
            return None
        data = read_json(path)
        if data is not None:
            self._stamps[name] = stamp
        return data

    def poll(self, progress: RunProgress) -> list[str]:
        lines: list[str] = []
        current = self._changed(CURRENT_TEST)  # first: the phone's first line then counts its tests
        if current is not None:
            lines += progress.current(self.bay, current)
        record = self._changed("results.json")
        if record is not None:
            lines += progress.record(self.bay, record)
        return lines
