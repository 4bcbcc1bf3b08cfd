"""Exclusive instrument and phone access across bench processes.

Two bench processes talking to one instrument interleave their commands: one reads the other's
answers. While a driver has an instrument open it holds a lock keyed by the instrument's address:

- the bench's own inter-process lock, always: `flock` on a file in the lock folder
  ($PHONEBENCH_LOCK_DIR, else the host's one: /run/lock/phonebench, /var/lock/phonebench, or
  <system temp>/phonebench-locks, a sticky folder every user may create files in (mode 1777),
  with lock files every user can open (0666); one user's cache folder would keep another user's
  bench from ever seeing the lock). The kernel drops it when the holder exits, so a crashed run
  never leaves a stale lock; the file records who holds it (pid, host, user, since when) for the
  message a second user sees;
- in addition, VISA's exclusive lock (`lock_excl`) where the VISA library and resource support
  it (NI-VISA and Keysight IO Libraries do for USB/GPIB/VXI-11; pyvisa-py raw sockets do not),
  which also keeps out non-bench VISA programs.

A second user waits, logging the holder once, and fails after a bounded time
($PHONEBENCH_LOCK_WAIT_S, default 60 s) with an InstrumentBusy naming the holder. Within one
process the lock is re-entrant: the same bench opening an instrument twice does not deadlock.

Phones are locked the same way while a bench session has them open (`hold_phone`, keyed by the
phone's ADB address or serial): two benches on one station never drive one phone at once; the
second waits (bounded) and then stops with a PhoneBusy naming the holder.

flock on a network file system (NFS) may not be shared between hosts: keep the lock folder local
(the default is), which makes it a per-host lock — instruments on a LAN shared by several hosts
also need the VISA lock or a lab rule.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import getpass
import hashlib
import json
import logging
import os
import re
import socket
import stat
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from phonebench.core.errors import BenchError, DeviceError, InstrumentError

log = logging.getLogger(__name__)

ENV_DIR = "PHONEBENCH_LOCK_DIR"
ENV_WAIT = "PHONEBENCH_LOCK_WAIT_S"
DEFAULT_WAIT_S = 60.0
RETRY_S = 0.1


class InstrumentBusy(InstrumentError):
    """Another bench process holds the instrument."""


class PhoneBusy(DeviceError):
    """Another bench process drives the phone."""


HOST_LOCK_DIRS = (Path("/run/lock/phonebench"), Path("/var/lock/phonebench"))
_SHARED_MODE = 0o1777  # every user creates lock files; the sticky bit keeps them from deleting others'


def lock_dir() -> Path:
    """$PHONEBENCH_LOCK_DIR, else the first host-wide lock folder usable by every user of the host:
    the same for every user whatever their HOME, so two users exclude each other."""
    if os.environ.get(ENV_DIR):
        return Path(os.environ[ENV_DIR])
    for folder in (*HOST_LOCK_DIRS, Path(tempfile.gettempdir()) / "phonebench-locks"):
        if _shared_folder(folder):
            return folder
    # Still a lock within this user's runs; said, because other users' runs are not excluded.
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "phonebench" / "locks"
    log.warning("no host-wide lock folder (/run/lock, /var/lock or the temp folder): locks are kept in %s, "
                "which other users' benches do not see; set $%s to a folder every bench user can write",
                cache, ENV_DIR)
    return cache


def _shared_folder(folder: Path) -> bool:
    """Create `folder` 1777 if missing; True if it is a real folder every user can create files in."""
    if not folder.parent.is_dir():
        return False
    try:
        folder.mkdir(mode=0o777)
        os.chmod(folder, _SHARED_MODE)  # mkdir's mode is cut by the umask
    except FileExistsError:
        pass
    except OSError as exc:
        log.debug("lock folder %s: %s", folder, exc)
        return False
    try:
        info = os.lstat(folder)
    except OSError:
        return False
    mode = stat.S_IMODE(info.st_mode)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        log.warning("lock folder %s is not a folder (a symbolic link?): not used", folder)
        return False
    if mode & _SHARED_MODE != _SHARED_MODE:
        if info.st_uid == os.geteuid():
            with contextlib.suppress(OSError):
                os.chmod(folder, _SHARED_MODE)
                return True
        log.warning("lock folder %s has mode %o, not 1777: other users could not share it, not used", folder, mode)
        return False
    return True


def lock_path(address: str) -> Path:
    """One file per address: readable prefix, hash for uniqueness (addresses differ in case and
    punctuation only: TCPIP0::10.0.0.5::INSTR vs tcpip::10.0.0.5::inst0::INSTR stay distinct)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", address)[:60]
    digest = hashlib.sha256(address.encode()).hexdigest()[:12]
    return lock_dir() / f"{safe}-{digest}.lock"


def default_wait_s() -> float:
    try:
        return float(os.environ.get(ENV_WAIT, DEFAULT_WAIT_S))
    except ValueError:
        return DEFAULT_WAIT_S


@dataclass
class _Held:
    fd: int
    count: int


_held: dict[str, _Held] = {}  # address -> this process's lock on it
_held_lock = threading.Lock()


def holder(address: str) -> dict[str, Any] | None:
    """Who holds the lock on `address` as its file records (None: nobody recorded)."""
    try:
        text = lock_path(address).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def describe(info: dict[str, Any] | None, subject: str = "") -> str:
    """The holder in words; its own name for the resource is left out when it is `subject`."""
    if not info:
        return "another process (no holder recorded)"
    name = info.get("name") or ""
    also = f", {name}" if name and name != subject else ""
    return f"pid {info.get('pid')} on {info.get('host')} (user {info.get('user')}{also}) since {info.get('since')}"


def _user() -> str:
    try:
        return os.environ.get("USER") or getpass.getuser()
    except (KeyError, OSError):  # a uid without a passwd entry (containers)
        return str(os.getuid())


class ResourceLock:
    """This process's hold on one address; release() once per acquire()."""

    def __init__(self, address: str) -> None:
        self.address = address
        self._released = False

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        with _held_lock:
            held = _held.get(self.address)
            if held is None:
                return
            held.count -= 1
            if held.count:
                return
            del _held[self.address]
            try:
                os.ftruncate(held.fd, 0)
                fcntl.flock(held.fd, fcntl.LOCK_UN)
            finally:
                os.close(held.fd)

    def __enter__(self) -> "ResourceLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def acquire(address: str, name: str = "", wait_s: float | None = None) -> ResourceLock:
    """Hold the bench's lock on `address`; wait up to wait_s for another holder, then InstrumentBusy."""
    return _acquire(address, name, wait_s, InstrumentError, InstrumentBusy, lambda text: log.warning("%s", text))


def phone_key(address: str) -> str:
    """The lock key of a phone: its ADB address or serial (never equal to an instrument's address)."""
    return f"phone {address}"


def hold_phone(address: str, name: str, wait_s: float | None = None,
               on_wait: Callable[[str], None] | None = None) -> ResourceLock:
    """Hold the phone at `address` for a bench session. Another holder makes this wait up to
    wait_s (default $PHONEBENCH_LOCK_WAIT_S, else 60 s), telling `on_wait` whom it waits for, then
    PhoneBusy names the holder (pid, host, user, since)."""
    say = on_wait or (lambda text: log.warning("%s", text))
    return _acquire(phone_key(address), f"phone {name} ({address})", wait_s, DeviceError, PhoneBusy, say)


def _acquire(address: str, name: str, wait_s: float | None, error: type[BenchError], busy: type[BenchError],
             on_wait: Callable[[str], None]) -> ResourceLock:
    wait_s = default_wait_s() if wait_s is None else wait_s
    with _held_lock:
        if address in _held:
            _held[address].count += 1
            return ResourceLock(address)
    path = lock_path(address)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = _open_lock_file(path)
    except OSError as exc:
        raise error(f"cannot create the lock {path} for {name or address}: {exc}",
                    hint=f"make the lock folder writable, or point ${ENV_DIR} at one that is") from exc
    deadline = time.monotonic() + wait_s
    told = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            info = holder(address)
            if time.monotonic() >= deadline:
                os.close(fd)
                raise busy(f"{name or address} is in use by {describe(info, name)}; waited {wait_s:g} s for it",
                           hint=f"wait for that run to finish (or stop it), or set ${ENV_WAIT} to wait "
                                f"longer; the lock file is {path}") from None
            if not told:
                on_wait(f"{name or address} is in use by {describe(info, name)}; waiting up to {wait_s:g} s")
                told = True
            time.sleep(RETRY_S)
    record = {"pid": os.getpid(), "host": socket.gethostname(), "user": _user(),
              "name": name, "address": address,
              "since": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(record).encode(), 0)
    with _held_lock:
        _held[address] = _Held(fd, 1)
    return ResourceLock(address)


def _open_lock_file(path: Path) -> int:
    """Open (or create, 0666, so every user of the host can open and flock it) a lock file. An
    existing one is opened without O_CREAT: with fs.protected_regular, O_CREAT on another user's
    file in a sticky folder is refused even where the file itself is writable."""
    flags = os.O_RDWR | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(10):
        try:
            return os.open(path, flags)
        except FileNotFoundError:
            pass
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue  # another process created it just now: open theirs
        os.fchmod(fd, 0o666)  # the umask cut the mode above
        return fd
    return os.open(path, flags)


def visa_exclusive(resource: Any, name: str, timeout_s: float) -> bool:
    """Take VISA's exclusive lock on an open resource where supported; True if taken."""
    try:
        resource.lock_excl(timeout=int(timeout_s * 1000))
    except Exception as exc:  # backends refuse in their own ways (NotImplementedError, VisaIOError, ...)
        log.debug("%s: no VISA exclusive lock (%s); the bench's file lock alone guards it", name, exc)
        return False
    return True
