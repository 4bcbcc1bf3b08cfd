"""A `bench bisect` result as the morning page reads it (docs/results.md, "The morning page"): one
JSON file per bisect in the results folder's `bisect/` folder, written by `bench bisect`.

The shape read; other keys are ignored, so the writer may add its own:

    {"metric": "first_token_p99 (p50)",    # the statistic, labelled as bench compare and bench trend label it
     "model": "PB-Emu Dimensity 9300",     # the phone model
     "good": "3.4.0", "bad": "3.4.2",      # the range searched: a build without the change, one with it
     "first_bad": "3.4.1",                 # the first build with the change; null while not settled
     "runs": ["bisect-0001", "bisect-0002"],  # the runs it measured, in order ([] when none)
     "finished": "2026-12-07T06:10:00Z"}   # when it ended (ISO 8601); null while it runs
"""
from __future__ import annotations

import datetime as dt
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

log = logging.getLogger(__name__)

FOLDER = "bisect"  # under the results folder
MAX_BYTES = 1 << 20  # a result is a few hundred bytes: a larger file is not one


@dataclass(frozen=True)
class BisectResult:
    metric: str
    model: str
    good: str
    bad: str
    first_bad: str | None
    runs: tuple[str, ...]
    finished: dt.datetime | None
    source: str  # the file's name

    @property
    def finished_utc(self) -> dt.datetime | None:
        """`finished` as naive UTC, as the store keeps a run's start."""
        if self.finished is None or self.finished.tzinfo is None:
            return self.finished
        return self.finished.astimezone(dt.timezone.utc).replace(tzinfo=None)

    @property
    def text(self) -> str:
        searched = f"{self.good} → {self.bad}, {len(self.runs)} run(s)"
        if self.first_bad is not None:
            return f"first build with the change: {self.first_bad} (searched {searched})"
        return f"not settled{'' if self.finished else ' yet'} (searching {searched})"


def parse_bisect(data: Mapping[str, Any], source: str) -> BisectResult:
    """The record, or ValueError naming what is wrong with it."""
    def text(key: str, required: bool = True) -> str | None:
        value = data.get(key)
        if value is None and not required:
            return None
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{key!r} must be a non-empty string{'' if required else ' or null'}")
        return value

    runs = data.get("runs") or []
    if not isinstance(runs, list) or not all(isinstance(r, str) for r in runs):
        raise ValueError("'runs' must be a list of run ids")
    finished = text("finished", required=False)
    try:
        stamp = dt.datetime.fromisoformat(finished.replace("Z", "+00:00")) if finished else None
    except ValueError:
        raise ValueError(f"'finished' is not an ISO 8601 time: {finished!r}") from None
    return BisectResult(str(text("metric")), str(text("model")), str(text("good")), str(text("bad")),
                        text("first_bad", required=False), tuple(runs), stamp, source)


def read_bisects(folder: Path) -> tuple[list[BisectResult], list[str]]:
    """Every result in `folder` (a results folder's bisect/), the finished newest first, and one line
    per file that is not one (a page shows them rather than fail on a half-written or foreign file)."""
    found, problems = [], []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            if path.stat().st_size > MAX_BYTES:
                raise ValueError(f"larger than {MAX_BYTES} bytes")
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            found.append(parse_bisect(data, path.name))
        except (OSError, UnicodeDecodeError, ValueError) as exc:  # json's errors are ValueErrors
            log.warning("bisect result %s not read: %s", path, exc)
            problems.append(f"{path.name}: {exc}")
    found.sort(key=lambda b: (b.finished_utc is not None, b.finished_utc or dt.datetime.min), reverse=True)
    return found, problems
