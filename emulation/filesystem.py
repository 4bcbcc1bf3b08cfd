"""The emulated phone's file store: real bytes for pushed files, live providers for sysfs nodes.

It holds as much as its capacity (`set_free`): a write past it fails with ENOSPC, as a full /data
partition fails a push or an install."""
from __future__ import annotations

import errno
import os
import posixpath
import stat as stat_mod
import threading
from dataclasses import dataclass
from typing import Callable

from phonebench.core.file_stat import FileStat

Provider = Callable[[], bytes]


@dataclass
class _File:
    data: bytes
    mode: int
    mtime: int


def normalize(path: str) -> str:
    return posixpath.normpath("/" + path.lstrip("/"))


class DeviceFileSystem:
    """Thread-safe in-memory tree. Directories are explicit; parents are created on write."""

    def __init__(self, clock_now: Callable[[], float]) -> None:
        self._now = clock_now
        self._lock = threading.RLock()
        self._files: dict[str, _File] = {}
        self._providers: dict[str, Provider] = {}
        self._dirs: dict[str, int] = {"/": 0}
        self._used = 0  # bytes of regular files
        self._capacity: int | None = None  # None: unbounded (until set_free)

    # --- writing ------------------------------------------------------------------------
    def mkdir(self, path: str) -> None:
        path = normalize(path)
        with self._lock:
            while path not in self._dirs:
                self._dirs[path] = int(self._now())
                path = posixpath.dirname(path)

    def write(self, path: str, data: bytes, mode: int = 0o100644, mtime: int | None = None) -> None:
        path = normalize(path)
        if path in self._dirs:
            raise IsADirectoryError(path)
        with self._lock:
            old = self._files.get(path)
            grows = len(data) - (len(old.data) if old is not None else 0)
            if self._capacity is not None and grows > 0 and self._used + grows > self._capacity:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
            self.mkdir(posixpath.dirname(path))
            file_mode = mode if stat_mod.S_IFMT(mode) else (stat_mod.S_IFREG | mode)
            self._files[path] = _File(bytes(data), file_mode, int(self._now()) if mtime is None else mtime)
            self._used += grows

    def set_free(self, free_bytes: int) -> None:
        """From now on the store holds what it holds plus `free_bytes` more."""
        with self._lock:
            self._capacity = self._used + max(0, int(free_bytes))

    def free_bytes(self) -> int | None:
        """Bytes a write may still add (None: unbounded)."""
        with self._lock:
            return None if self._capacity is None else self._capacity - self._used

    def provide(self, path: str, provider: Provider) -> None:
        """Serve `path` from a callable (sysfs-style: content computed when read)."""
        path = normalize(path)
        with self._lock:
            self.mkdir(posixpath.dirname(path))
            self._providers[path] = provider

    def remove(self, path: str) -> None:
        path = normalize(path)
        with self._lock:
            if path in self._files:
                self._used -= len(self._files.pop(path).data)
            elif path in self._providers:
                raise PermissionError(path)
            elif path in self._dirs:
                if self.listdir(path):
                    raise OSError(f"{path}: Directory not empty")
                del self._dirs[path]
            else:
                raise FileNotFoundError(path)

    def rename(self, src: str, dst: str) -> None:
        """Atomic move of a regular file (what an atomic adapter activation relies on)."""
        src, dst = normalize(src), normalize(dst)
        with self._lock:
            if src not in self._files:
                raise FileNotFoundError(src)
            self.mkdir(posixpath.dirname(dst))
            replaced = self._files.get(dst) if dst != src else None
            self._used -= len(replaced.data) if replaced is not None else 0
            self._files[dst] = self._files.pop(src)

    # --- reading ------------------------------------------------------------------------
    def read(self, path: str) -> bytes:
        path = normalize(path)
        with self._lock:
            if path in self._files:
                return self._files[path].data
            provider = self._providers.get(path)
            if path in self._dirs:
                raise IsADirectoryError(path)
        if provider is None:
            raise FileNotFoundError(path)
        return provider()

    def stat(self, path: str) -> FileStat | None:
        path = normalize(path)
        with self._lock:
            if path in self._files:
                f = self._files[path]
                return FileStat(f.mode, len(f.data), f.mtime)
            if path in self._providers:
                return FileStat(stat_mod.S_IFREG | 0o444, 4096, int(self._now()))
            if path in self._dirs:
                return FileStat(stat_mod.S_IFDIR | 0o755, 4096, self._dirs[path])
        return None

    def exists(self, path: str) -> bool:
        return self.stat(path) is not None

    def listdir(self, path: str) -> list[str]:
        path = normalize(path)
        with self._lock:
            if path not in self._dirs:
                raise FileNotFoundError(path) if not self.exists(path) else NotADirectoryError(path)
            names = {p for p in (*self._files, *self._providers, *self._dirs) if p != path
                     and posixpath.dirname(p) == path}
            return sorted(posixpath.basename(p) for p in names)

    def glob(self, pattern: str) -> list[str]:
        import fnmatch
        pattern = normalize(pattern)
        with self._lock:
            every = [*self._files, *self._providers, *self._dirs]
        return sorted(p for p in every if fnmatch.fnmatchcase(p, pattern))
