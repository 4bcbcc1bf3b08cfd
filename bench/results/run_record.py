"""A run's record on disk: reports/<run-id>/results.json, rewritten atomically after every test,
so a crash or a kill loses nothing already measured; raw data files beside it. A disk that
refuses the record stops the run and the whole record is rescued elsewhere (docs/faults.md)."""
from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import hmac
import io
import json
import logging
import os
import secrets
import stat
import tempfile

from pathlib import Path
from typing import Any, Protocol

import numpy as np

from phonebench.core import files
from phonebench.core.errors import BenchError
from phonebench.core.killpoints import kill_point
from phonebench.core.files import WriteFailed, check_name, confined, safe_name, write_atomically
from phonebench.core.version import code_version
from phonebench.core.records import RunRecord, TestRecord

log = logging.getLogger(__name__)

RESCUE_ENV = "PHONEBENCH_RESCUE_DIR"  # where a record that its run folder refused goes first
BAY_OF_RUN_ENV = "PHONEBENCH_BAY_OF_RUN"  # set for a bay worker: the run its bay belongs to
RUN_TOKEN_ENV = "PHONEBENCH_RUN_TOKEN"  # set for a bay worker: the run's secret, seals its rescued record
SEAL_KEY = "rescue_seal"  # a rescued bay record's HMAC under its run's token (docs/faults.md)
RECORDING_LOCK = ".recording.lock"  # locked (flock) by the process recording into the run folder

try:
    import fcntl
except ImportError:  # pragma: no cover - no flock (Windows): killed runs are told by their pid alone
    fcntl = None  # type: ignore[assignment]


def new_run_id() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


class RunIdTaken(BenchError):
    """A run folder with that id already holds a run: ids are never reused (records would mix)."""


def claim_run_dir(results_dir: Path, run_id: str | None, reuse_empty: bool = True) -> Path:
    """Create this run's folder, refusing a run id that is not a plain name or already has a folder
    with results in it; a generated id that collides is generated again.

    reuse_empty=True takes over a folder without results.json (made by `bench run` or the
    acceptance runner for this very run); `bench run` itself claims with False, so of two runs
    started with one id exactly one gets the folder. The folder is absolute and resolved: a relative
    results folder (a lab's `pytest --station station.toml`) must not make raw-data paths, the
    store's run_dir or messages depend on the working directory later."""
    results_dir = Path(results_dir).resolve()
    if run_id is not None:
        check_name(run_id, "run id")
        run_dir = confined(results_dir, run_id)
        try:
            return files.make_folder(run_dir, exclusive=True)
        except FileExistsError:
            if not reuse_empty or (run_dir / "results.json").exists() or not run_dir.is_dir():
                raise RunIdTaken(f"run id {run_id!r} is already used: {run_dir} holds a run",
                                 hint="choose another --run-id, or omit it for a new one") from None
            return run_dir  # claimed, still empty: made by `bench run` for this very run
    for _ in range(100):
        try:
            return files.make_folder(results_dir / new_run_id(), exclusive=True)
        except FileExistsError:
            continue
    raise RunIdTaken(f"{results_dir}: no free run id after 100 tries")  # pragma: no cover


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


class ResultSink(Protocol):
    """Somewhere else a run's record goes as it grows (e.g. the results database)."""

    def run_updated(self, data: dict[str, Any], event: str, payload: object) -> None:
        """Called after each change; event is start, dut, instrument, test or finish; `payload` what
        changed (None, the DUT's name, the instrument's role, the test's record, the final status)."""


class RunRecorder:
    """Owns one run folder. Everything recorded is on disk before the next test starts.

    When results.json cannot be written (disk full, read-only folder) the record stays whole in
    memory and in the sinks, `write_failed` says why (the plugin then stops the run after the
    current test), and finish() rescues the whole record to another folder (`rescued_to`).
    """

    def __init__(self, results_dir: Path, station: dict[str, Any], run_id: str | None = None,
                 sinks: list[ResultSink] | None = None) -> None:
        self.sinks = list(sinks or [])
        self.sink_errors: list[str] = []
        self.write_errors: list[str] = []
        self.write_failed: WriteFailed | None = None
        self.rescued_to: Path | None = None
        self._tests_on_disk = 0
        self.results_dir = Path(results_dir).resolve()
        self.run_dir = claim_run_dir(self.results_dir, run_id)
        self.run_id = self.run_dir.name
        self._lock = hold_recording_lock(self.run_dir)  # before results.json exists: a kill frees it
        self.record = RunRecord(run_id=self.run_id, started=_now(), station=station, code_version=code_version())
        self.data: dict[str, Any] = self.record.to_dict()  # the record as written, for sinks and readers
        self._write("start", None)
        self._point_latest()

    @property
    def results_path(self) -> Path:
        return self.run_dir / "results.json"

    @property
    def tests_on_disk(self) -> int:
        """Tests in the last complete results.json written."""
        return self._tests_on_disk

    def add_dut(self, name: str, identity: dict[str, Any]) -> None:
        self.record.duts[name] = identity
        self._write("dut", name)

    def add_instrument(self, role: str, record: dict[str, Any]) -> None:
        self.record.instruments[role] = record
        self._write("instrument", role)

    def add_test(self, record: TestRecord) -> None:
        self.record.tests.append(record)
        self._write("test", record.to_dict())

    def save_raw(self, test_slug: str, name: str, data: object) -> str:
        """Save raw data (numpy arrays -> .npz, anything else -> .json); returns the relative path.

        Raises WriteFailed (and stops the run after this test) when the disk refuses it."""
        folder = confined(self.run_dir, "raw", safe_name(test_slug))
        arrays = data if isinstance(data, dict) and data and all(isinstance(v, np.ndarray) for v in data.values()) \
            else {"data": data} if isinstance(data, np.ndarray) else None
        if arrays is not None:
            path, buffer = folder / f"{safe_name(name)}.npz", io.BytesIO()
            np.savez_compressed(buffer, **arrays)
            payload: str | bytes = buffer.getvalue()
        else:
            path, payload = folder / f"{safe_name(name)}.json", json.dumps(data, indent=1, default=_json_default)
        try:
            write_atomically(path, payload)
        except WriteFailed as exc:
            self._failed(exc)
            raise
        kill_point("raw")
        return str(path.relative_to(self.run_dir))

    def note_problem(self, message: str) -> None:
        """A file of the run folder (junit.xml, a report) that could not be written."""
        if message not in self.write_errors:
            self.write_errors.append(message)

    def finish(self, status: str = "complete", reason: str | None = None) -> None:
        """Close the record; `reason` says why a run is incomplete (its session failed) and is kept
        with the run's problems."""
        self.record.status = "incomplete" if self.write_failed is not None and status == "complete" else status
        self.record.finished = _now()
        self.record.problems = list(dict.fromkeys(self.write_errors + self.sink_errors + ([reason] if reason else [])))
        if not self._write("finish", status):
            self.rescued_to = self._rescue()
        self._release_lock()

    def _release_lock(self) -> None:
        release_recording_lock(self.run_dir, self._lock)
        self._lock = None

    def _write(self, event: str, payload: object) -> bool:
        """Write results.json, then update the sinks; False if results.json could not be written."""
        self.data = self.record.to_dict()
        written = True
        kill_point(f"write:{event}")
        try:
            self._write_file()
        except WriteFailed as exc:  # e.g. disk full: keep the record in memory and the sinks; the run stops
            self._failed(exc)
            written = False
        else:
            self._tests_on_disk = len(self.data["tests"])
        on_disk = "results.json is complete" if self._tests_on_disk == len(self.data["tests"]) else \
            f"results.json has {self._tests_on_disk} of {len(self.data['tests'])} tests"
        kill_point(f"written:{event}")
        for sink in self.sinks:
            try:
                sink.run_updated(self.data, event, payload)
            except Exception as exc:  # a sink failing must not lose the local record
                message = f"{type(sink).__name__}: {exc}"
                log.error("results sink failed on %s: %s (%s)", event, message, on_disk)
                self.sink_errors.append(message)
        kill_point(f"stored:{event}")
        return written

    def _failed(self, exc: WriteFailed) -> None:
        first = str(exc).splitlines()[0]
        if first not in self.write_errors:
            log.error("%s; the last complete results.json has %d of %d tests; the run stops after this test",
                      first, self._tests_on_disk, len(self.record.tests))
            self.write_errors.append(first)
        if self.write_failed is None:
            self.write_failed = exc

    def _write_file(self) -> None:
        write_atomically(self.results_path, json.dumps(self.data, indent=1, default=_json_default))

    def _rescue(self) -> Path | None:
        """The whole record to the first folder that takes it; logged as the last resort."""
        # A bay worker's record is named by its run and bay, so no later run overwrites it.
        parent = os.environ.get(BAY_OF_RUN_ENV)
        return rescue_record(self.data, f"{parent}-{self.run_id}" if parent else self.run_id, self.run_dir,
                             token=os.environ.get(RUN_TOKEN_ENV) if parent else None)

    def _point_latest(self) -> None:
        latest = self.results_dir / "latest"
        try:
            if latest.is_symlink() or latest.exists():
                latest.unlink()
            latest.symlink_to(self.run_id, target_is_directory=True)
        except OSError as exc:  # e.g. a filesystem without symlinks: the run folder is still complete
            log.warning("could not update %s: %s", latest, exc)


def private_folder_problem(folder: Path) -> str | None:
    """Why `folder` is not one only this user can write (None: it is): a symlink, not a folder,
    owned by another user, or writable by group or others."""
    try:
        info = os.lstat(folder)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if stat.S_ISLNK(info.st_mode):
        return "is a symbolic link"
    if not stat.S_ISDIR(info.st_mode):
        return "is not a folder"
    if info.st_uid != os.geteuid():
        return f"is owned by uid {info.st_uid}, not this user (uid {os.geteuid()})"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"is writable by group or others (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def private_temp_folder() -> Path:
    """This user's own folder in the system temp folder (created 0700): the shared temp folder
    itself is writable by every user of the host, who could plant a record there."""
    folder = Path(tempfile.gettempdir()) / f"phonebench-{os.geteuid()}"
    with contextlib.suppress(FileExistsError, OSError):
        folder.mkdir(mode=0o700)
    return folder


def rescue_folders() -> list[Path]:
    """Where a record goes that its run folder refused, and where rescued records are looked for:
    $PHONEBENCH_RESCUE_DIR, this user's own temp folder, home; each only if no other user can
    write it (a folder that fails the check is logged and skipped)."""
    candidates = [Path(os.environ[RESCUE_ENV])] if os.environ.get(RESCUE_ENV) else []
    candidates += [private_temp_folder(), Path.home()]
    folders = []
    for folder in candidates:
        problem = private_folder_problem(folder)
        if problem is None:
            folders.append(folder)
        elif folder.exists() or folder.is_symlink():
            log.warning("rescue folder %s %s: not used (only a folder no other user can write holds a "
                        "rescued record)", folder, problem)
    return folders


def rescue_name(name: str) -> str:
    return f"phonebench-{name}-results.json"


def rescued_record(name: str) -> Path | None:
    """A record rescued under `name` earlier, if one of the rescue folders has it."""
    return next((f / rescue_name(name) for f in rescue_folders() if (f / rescue_name(name)).is_file()), None)


def new_run_token() -> str:
    """A bays run's secret: its workers seal their rescued records with it (never on a command line)."""
    return secrets.token_hex(32)


def _seal(data: dict[str, Any], name: str, token: str) -> str:
    """HMAC-SHA256 of a record (as JSON reads it back, keys sorted) and the name it is rescued under."""
    plain = {k: v for k, v in json.loads(json.dumps(data, default=_json_default)).items() if k != SEAL_KEY}
    message = name.encode() + b"\n" + json.dumps(plain, sort_keys=True).encode()
    return hmac.new(token.encode(), message, hashlib.sha256).hexdigest()


def sealed_by(data: dict[str, Any], name: str, token: str | None) -> bool:
    """Whether a rescued record carries the seal of the run whose token is `token`, under `name`."""
    seal = data.get(SEAL_KEY)
    return bool(token) and isinstance(seal, str) and hmac.compare_digest(seal, _seal(data, name, str(token)))


def token_path(run_id: str) -> Path:
    return private_temp_folder() / f"phonebench-{run_id}.token"


def keep_run_token(run_id: str, token: str) -> None:
    """The token where this user alone reads it (0600 in the private temp folder): a merge after the
    parent was killed (phonebench.bench.store.heal) still tells the run's rescued records."""
    path = token_path(run_id)
    if private_folder_problem(path.parent) is not None:
        return
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(token)


def read_run_token(run_id: str) -> str | None:
    path = token_path(run_id)
    if private_folder_problem(path.parent) is not None:
        return None
    try:
        return path.read_text(encoding="ascii").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def drop_run_token(run_id: str) -> None:
    with contextlib.suppress(OSError):
        token_path(run_id).unlink()


def rescue_record(data: dict[str, Any], name: str, run_dir: Path, token: str | None = None) -> Path | None:
    """Write a whole record to the first rescue folder that takes it (named by its run id, never
    overwritten by another run); logged whole as the last resort. A bay worker's record is sealed
    with its run's token, so the merge takes it for this run's and no other's."""
    if token:
        data = {**data, SEAL_KEY: _seal(data, name, token)}
    text = json.dumps(data, indent=1, default=_json_default)
    for folder in rescue_folders():
        path = folder / rescue_name(name)
        try:
            write_atomically(path, text)
        except (WriteFailed, OSError):
            continue
        log.error("the whole record of run %s (%d tests) was written to %s: copy it to %s once there is room, "
                  "then `bench store-import %s`", data.get("run_id"), len(data.get("tests") or []), path,
                  Path(run_dir) / "results.json", run_dir)
        return path
    log.critical("no folder takes the record of run %s; here it is whole:\n%s", data.get("run_id"), text)
    return None


def hold_recording_lock(run_dir: Path) -> int | None:
    """Lock the run folder's RECORDING_LOCK for as long as this process records into it; the
    system frees it when the process dies, however it dies."""
    if fcntl is None:
        return None
    # Locked under a name of its own, then renamed into place: the lock file never exists unlocked
    # while its recorder lives, so a healer looking at it (another bench starting) can never
    # mistake a run that is just starting for a killed one.
    staging = run_dir / f"{RECORDING_LOCK}.{os.getpid()}.{secrets.token_hex(4)}"
    try:
        fd = os.open(staging, os.O_CREAT | os.O_EXCL | os.O_RDWR | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as exc:
        log.warning("%s: no recording lock (%s): a kill of this run is then told by its process id", run_dir, exc)
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a name nobody else knows yet: never contended
        os.replace(staging, run_dir / RECORDING_LOCK)
    except OSError as exc:
        os.close(fd)
        with contextlib.suppress(OSError):
            staging.unlink()
        log.warning("%s: recording lock not taken (%s)", run_dir, exc)
        return None
    return fd


def release_recording_lock(run_dir: Path, fd: int | None) -> None:
    """The recording is over: the lock file goes, then the lock."""
    if fd is None:
        return
    with contextlib.suppress(OSError):
        (Path(run_dir) / RECORDING_LOCK).unlink()
    os.close(fd)


def recorder_alive(run_dir: Path) -> bool | None:
    """Whether a process records into run_dir now (its recording lock is held); None when the
    folder has no lock to tell (a finished run, a bench before the lock, no flock)."""
    path = Path(run_dir) / RECORDING_LOCK
    if fcntl is None or not path.is_file():
        return None
    try:
        fd = os.open(path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return None
    finally:
        os.close(fd)  # closing drops the test lock, if it was taken
    return False


def _json_default(obj: object) -> object:
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    raise TypeError(f"cannot store {type(obj).__name__} in results.json")
