"""The one place the bench writes files: safe names from any text, paths confined to their
folder, atomic replacement, and free space checked before a run and handled during it.

Text that reaches a file name may come from a phone (`ro.soc.model`), an instrument or the
command line; none of it may choose where the bench writes. A full or read-only disk is a
`WriteFailed` naming the file and what to do, never a bare OSError.
"""
from __future__ import annotations

import errno
import os
import re
import shutil
import tempfile
from pathlib import Path

from .errors import BenchError

NAME_MAX = 120
MIN_FREE_ENV = "PHONEBENCH_MIN_FREE_MB"
DEFAULT_MIN_FREE_MB = 64.0  # a run writes results.json after every test, raw data and a report
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
READONLY_ERRNOS = (errno.EROFS, errno.EACCES, errno.EPERM)


class UnsafePath(BenchError):
    """A name or path would write outside its folder."""


class WriteFailed(BenchError, OSError):
    """A file could not be written (disk full, read-only, no permission); `errno` says which.

    Also an OSError, so callers that handle a failed write keep doing so."""

    def __init__(self, message: str, hint: str | None = None, errno_: int | None = None) -> None:
        super().__init__(message, hint)
        self.errno = errno_
        self.strerror = os.strerror(errno_) if errno_ else None

    def __str__(self) -> str:  # OSError's would print "[Errno N] ..." and drop the file and the hint
        return str(self.args[0])

    @property
    def disk_full(self) -> bool:
        return self.errno in FULL_ERRNOS


def safe_name(text: str, default: str = "item") -> str:
    """A file name made from any text: letters, digits, '.', '_' and '-' only, no leading dot,
    at most NAME_MAX characters; "/tmp/x" -> "tmp_x", "../../.." -> "item"."""
    name = _UNSAFE.sub("_", str(text)).strip("._-")[:NAME_MAX].rstrip("._-")
    return name or default


def check_name(name: str, what: str) -> str:
    """`name` unchanged if it is already a safe single file name, else UnsafePath saying why."""
    if not _NAME.fullmatch(name) or len(name) > NAME_MAX:
        raise UnsafePath(f"{what} {name!r} is not a plain name",
                         hint=f"use letters, digits, '.', '_' and '-' only (at most {NAME_MAX}, not starting "
                              "with '.' or '-'), no '/' or '..'")
    return name


def confined(folder: str | Path, *parts: str) -> Path:
    """folder/parts..., refused if it resolves outside `folder` (through '..', an absolute part or
    a symlink)."""
    base = Path(folder).resolve()
    path = base.joinpath(*parts).resolve()
    if path != base and base not in path.parents:
        raise UnsafePath(f"{'/'.join(parts)!r} would be written outside {base}",
                         hint="names from devices and options are turned into plain names; report this")
    return path


def describe_os_error(path: Path, exc: OSError) -> WriteFailed:
    if exc.errno in FULL_ERRNOS:
        hint = "free space on that disk (or point --results-dir elsewhere) and run again"
        return WriteFailed(f"{path}: disk full ({exc.strerror})", hint=hint, errno_=exc.errno)
    if exc.errno in READONLY_ERRNOS:
        hint = "make the folder writable or choose another with --results-dir (or the station's results_dir)"
        return WriteFailed(f"{path}: cannot write ({exc.strerror})", hint=hint, errno_=exc.errno)
    return WriteFailed(f"{path}: cannot write ({exc.strerror or exc})", hint="check the disk and the folder",
                       errno_=exc.errno)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomically(path: Path, data: str | bytes, mode: int | None = None) -> None:
    """Replace `path` with `data` in one rename: a crash or a full disk leaves the previous file.

    Raises WriteFailed (naming the file, disk full or read-only, and what to do). The file gets the
    usual permissions (0666 less the umask), not mkstemp's private 0600, so a lab's web server or
    a colleague can read the run folder; `mode` (e.g. 0o600 for secrets) instead, private from
    its first byte (mkstemp creates it 0600).
    """
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=path.suffix)
    except OSError as exc:
        raise describe_os_error(path, exc) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, (0o666 & ~_umask()) if mode is None else mode)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise describe_os_error(path, exc) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def make_folder(path: Path, exclusive: bool = False) -> Path:
    """Create a folder (and its parents); exclusive=True refuses one that exists (FileExistsError)."""
    try:
        path.mkdir(parents=True, exist_ok=not exclusive)
    except FileExistsError:
        raise
    except OSError as exc:
        raise describe_os_error(path, exc) from None
    return path


def min_free_bytes() -> int:
    """Free space a run needs before it starts: $PHONEBENCH_MIN_FREE_MB, else 64 MiB."""
    text = os.environ.get(MIN_FREE_ENV)
    try:
        megabytes = float(text) if text else DEFAULT_MIN_FREE_MB
    except ValueError:
        raise BenchError(f"${MIN_FREE_ENV}={text!r} is not a number of megabytes") from None
    return int(max(megabytes, 0.0) * 1024 * 1024)


def check_free_space(folder: Path, need: int | None = None) -> None:
    """Refuse to start writing into `folder` (or its nearest existing parent) when it is not
    writable or has less than `need` bytes free."""
    need = min_free_bytes() if need is None else need
    probe = Path(folder).resolve()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not os.access(probe, os.W_OK):
        raise WriteFailed(f"results folder {folder}: {probe} is not writable",
                          hint="make it writable or choose another with --results-dir (or the station's results_dir)",
                          errno_=errno.EACCES)
    free = shutil.disk_usage(probe).free
    if free < need:
        raise WriteFailed(f"results folder {folder}: {free / 2**20:.1f} MiB free, a run needs at least "
                          f"{need / 2**20:.0f} MiB", errno_=errno.ENOSPC,
                          hint=f"free space, point --results-dir at another disk, or lower ${MIN_FREE_ENV}")
