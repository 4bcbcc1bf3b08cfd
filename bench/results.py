"""A run's record on disk: reports/<run-id>/results.json, rewritten atomically after every test,
so a crash or a kill loses nothing already measured; raw data files beside it."""
from __future__ import annotations

import datetime as dt
import json
import logging
import re
import secrets

from pathlib import Path
from typing import Any, Protocol

import numpy as np

from bench.core.version import code_version
from bench.core.files import write_atomically
from bench.core.records import RunRecord, TestRecord

log = logging.getLogger(__name__)


def new_run_id() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


class ResultSink(Protocol):
    """Somewhere else a run's record goes as it grows (e.g. the results database)."""

    def run_updated(self, data: dict[str, Any], event: str, payload: Any) -> None:
        """Called after each change; event is start, dut, instrument, test or finish."""


class RunRecorder:
    """Owns one run folder. Everything recorded is on disk before the next test starts."""

    def __init__(self, results_dir: Path, station: dict[str, Any], run_id: str | None = None,
                 sinks: list[ResultSink] | None = None) -> None:
        self.sinks = list(sinks or [])
        self.sink_errors: list[str] = []
        self.write_errors: list[str] = []
        self._tests_on_disk = 0
        self.run_id = run_id or new_run_id()
        self.results_dir = Path(results_dir)
        self.run_dir = self.results_dir / self.run_id
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.record = RunRecord(run_id=self.run_id, started=_now(), station=station, code_version=code_version())
        self.data: dict[str, Any] = self.record.to_dict()  # the record as written, for sinks and readers
        self._write("start", None)
        self._point_latest()

    @property
    def results_path(self) -> Path:
        return self.run_dir / "results.json"

    def add_dut(self, name: str, identity: dict[str, Any]) -> None:
        self.record.duts[name] = identity
        self._write("dut", name)

    def add_instrument(self, role: str, record: dict[str, Any]) -> None:
        self.record.instruments[role] = record
        self._write("instrument", role)

    def add_test(self, record: TestRecord) -> None:
        self.record.tests.append(record)
        self._write("test", record.to_dict())

    def save_raw(self, test_slug: str, name: str, data: Any) -> str:
        """Save raw data (numpy arrays -> .npz, anything else -> .json); returns the relative path."""
        folder = self.run_dir / "raw" / _slug(test_slug)
        folder.mkdir(parents=True, exist_ok=True)
        if isinstance(data, dict) and data and all(isinstance(v, np.ndarray) for v in data.values()):
            path = folder / f"{_slug(name)}.npz"
            np.savez_compressed(path, **data)
        elif isinstance(data, np.ndarray):
            path = folder / f"{_slug(name)}.npz"
            np.savez_compressed(path, data=data)
        else:
            path = folder / f"{_slug(name)}.json"
            path.write_text(json.dumps(data, indent=1, default=_json_default))
        return str(path.relative_to(self.run_dir))

    def finish(self, status: str = "complete") -> None:
        self.record.status = status
        self.record.finished = _now()
        self.record.problems = list(dict.fromkeys(self.write_errors + self.sink_errors))
        self._write("finish", status)

    def _write(self, event: str, payload: Any) -> None:
        self.data = self.record.to_dict()
        try:
            self._write_file()
        except OSError as exc:  # e.g. disk full: keep measuring, keep the record in memory and the sinks
            message = f"{self.results_path}: {exc.strerror or exc}"
            if message not in self.write_errors:
                log.error("cannot write %s; the last complete copy on disk has %d tests", message,
                          self._tests_on_disk)
            self.write_errors.append(message)
        else:
            self._tests_on_disk = len(self.data["tests"])
        for sink in self.sinks:
            try:
                sink.run_updated(self.data, event, payload)
            except Exception as exc:  # a sink failing must not lose the local record
                message = f"{type(sink).__name__}: {exc}"
                log.error("results sink failed on %s: %s (results.json is complete)", event, message)
                self.sink_errors.append(message)

    def _write_file(self) -> None:
        write_atomically(self.results_path, json.dumps(self.data, indent=1, default=_json_default))

    def _point_latest(self) -> None:
        latest = self.results_dir / "latest"
        try:
            if latest.is_symlink() or latest.exists():
                latest.unlink()
            latest.symlink_to(self.run_id, target_is_directory=True)
        except OSError as exc:  # e.g. a filesystem without symlinks: the run folder is still complete
            log.warning("could not update %s: %s", latest, exc)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:120] or "item"


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    raise TypeError(f"cannot store {type(obj).__name__} in results.json")
