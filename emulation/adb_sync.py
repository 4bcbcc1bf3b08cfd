"""The device side of ADB's `sync:` service (file transfer) over the emulated phone's file store.

sync: is a byte stream inside the ADB stream: requests may span WRTE packets and one packet
may hold several requests. Every request is an 8-byte header (4-byte id, little-endian
uint32 length) and, for path requests, the path. Implemented: STAT, STA2/LST2 (stat_v2),
LIST, LIS2 (ls_v2), SEND, RECV, QUIT; sendrecv_v2 (SND2/RCV2) is not.
"""
from __future__ import annotations

import errno
import logging
import posixpath
import stat as stat_mod
import struct
import zlib
from typing import Callable, Iterable, Iterator, Protocol, Union

from phonebench.core.file_stat import FileStat
from .filesystem import DeviceFileSystem

log = logging.getLogger(__name__)

SYNC_DATA_MAX = 64 * 1024
PATH_MAX = 1024

_HEADER = struct.Struct("<4sI")
_STAT_V1 = struct.Struct("<4sIII")                # id, mode, size, mtime
_STAT_V2 = struct.Struct("<4sIQQIIIIQqqq")        # id, error, dev, ino, mode, nlink, uid, gid, size, atime, mtime, ctime
_DENT_V1 = struct.Struct("<4sIIII")               # id, mode, size, mtime, namelen
_DENT_V2 = struct.Struct("<4sIQQIIIIQqqqI")       # stat_v2 fields + namelen
_SHELL_UID = 2000

Buffer = Union[bytes, bytearray, memoryview]


class SyncStream(Protocol):
    def read(self) -> Buffer | None:
        """The next payload the host wrote, or None once the stream is closed."""

    def write(self, data: Buffer) -> None: ...

    def write_all(self, pieces: Iterable[Buffer]) -> None:
        """Write the concatenation of `pieces` (packet boundaries are the stream's business)."""


class _ByteReader:
    """Exact-size reads from a sequence of packets: views into the packets where a read fits
    in one (no copy), a copy only where it straddles two."""

    def __init__(self, next_packet: Callable[[], Buffer | None]) -> None:
        self._next = next_packet
        self._view = memoryview(b"")  # the unread rest of the current packet

    def read_exact(self, size: int) -> Buffer | None:
        if len(self._view) >= size:
            chunk, self._view = self._view[:size], self._view[size:]
            return chunk
        assembled = bytearray(self._view)
        while len(assembled) < size:
            packet = self._next()
            if packet is None:
                return None
            view = memoryview(packet)
            need = size - len(assembled)
            assembled += view[:need]
            self._view = view[need:]
        return assembled


class _SyncFailed(Exception):
    """A request failed: FAIL is sent and the session ends, as adbd does."""


class SyncSession:
    def __init__(self, stream: SyncStream, fs: DeviceFileSystem) -> None:
        self.stream = stream
        self.fs = fs
        self.reader = _ByteReader(stream.read)

    def serve(self) -> None:
        handlers = {b"STAT": self._stat_v1, b"STA2": self._stat_v2, b"LST2": self._stat_v2,
                    b"LIST": self._list_v1, b"LIS2": self._list_v2, b"SEND": self._send, b"RECV": self._recv}
        while True:
            header = self.reader.read_exact(_HEADER.size)
            if header is None:
                return
            ident, length = _HEADER.unpack(header)
            if ident == b"QUIT":
                return
            handler = handlers.get(ident)
            try:
                if handler is None:
                    raise _SyncFailed(f"unknown sync command {ident!r}")
                if length > PATH_MAX:
                    raise _SyncFailed("path too long")
                raw_path = self.reader.read_exact(length)
                if raw_path is None:
                    return
                handler(ident, bytes(raw_path).decode("utf-8", errors="surrogateescape"))
            except _SyncFailed as exc:
                log.info("sync: %s", exc)
                message = str(exc).encode()
                self.stream.write(_HEADER.pack(b"FAIL", len(message)) + message)
                return

    # --- stat and list ---------------------------------------------------------------------
    def _stat_v1(self, ident: bytes, path: str) -> None:
        st = self.fs.stat(path)
        self.stream.write(_STAT_V1.pack(b"STAT", *((st.mode, st.size, st.mtime) if st else (0, 0, 0))))

    def _stat_v2(self, ident: bytes, path: str) -> None:
        st = self.fs.stat(path)
        self.stream.write(_stat_v2_record(_STAT_V2, ident, st, path))

    def _entries(self, path: str) -> list[tuple[str, FileStat]]:
        st = self.fs.stat(path)
        if st is None or not st.is_dir:
            return []  # adbd: opendir fails -> just DONE
        entries = [(".", st), ("..", self.fs.stat(posixpath.dirname(path.rstrip("/")) or "/") or st)]
        for name in self.fs.listdir(path):
            child = self.fs.stat(posixpath.join(path, name))
            if child is not None:
                entries.append((name, child))
        return entries

    def _list_v1(self, ident: bytes, path: str) -> None:
        out = bytearray()
        for name, st in self._entries(path):
            raw = name.encode("utf-8", errors="surrogateescape")
            out += _DENT_V1.pack(b"DENT", st.mode, st.size & 0xFFFFFFFF, st.mtime, len(raw)) + raw
        out += _DENT_V1.pack(b"DONE", 0, 0, 0, 0)
        self.stream.write(out)

    def _list_v2(self, ident: bytes, path: str) -> None:
        out = bytearray()
        for name, st in self._entries(path):
            raw = name.encode("utf-8", errors="surrogateescape")
            out += _stat_v2_record(_DENT_V2, b"DNT2", st, name, len(raw)) + raw
        out += _DENT_V2.pack(b"DONE", *([0] * 12))
        self.stream.write(out)

    # --- transfers ---------------------------------------------------------------------------
    def _send(self, ident: bytes, spec: str) -> None:
        path, _, mode_text = spec.rpartition(",")
        try:
            mode = int(mode_text)
        except ValueError:
            raise _SyncFailed(f"bad SEND spec {spec!r}") from None
        parts: list[Buffer] = []  # views into the received packets: joined once
        while True:
            header = self.reader.read_exact(_HEADER.size)
            if header is None:
                return
            kind, value = _HEADER.unpack(header)
            if kind == b"DONE":
                break
            if kind != b"DATA":
                raise _SyncFailed(f"invalid data message {kind!r}")
            if value > SYNC_DATA_MAX:
                raise _SyncFailed("oversize data message")
            chunk = self.reader.read_exact(value)
            if chunk is None:
                return
            parts.append(chunk)
        try:
            # No symlinks on this file store: whatever the host's file type, store a regular file.
            self.fs.write(path, b"".join(parts), mode=stat_mod.S_IFREG | (mode & 0o7777), mtime=value)
        except OSError as exc:
            if exc.errno == errno.ENOSPC:  # adbd's own words when /data fills during the write
                raise _SyncFailed(f"write failed: {exc.strerror}") from None
            raise _SyncFailed(f"couldn't create file: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise _SyncFailed(f"couldn't create file: {exc}") from None
        self.stream.write(_HEADER.pack(b"OKAY", 0))

    def _recv(self, ident: bytes, path: str) -> None:
        try:
            data = memoryview(self.fs.read(path))
        except FileNotFoundError:
            raise _SyncFailed("open failed: No such file or directory") from None
        except IsADirectoryError:
            raise _SyncFailed("read failed: Is a directory") from None
        except OSError as exc:
            raise _SyncFailed(f"read failed: {exc.strerror or exc}") from None
        self.stream.write_all(_data_frames(data))


def _data_frames(data: memoryview) -> Iterator[bytes | memoryview]:
    for start in range(0, len(data), SYNC_DATA_MAX):
        chunk = data[start:start + SYNC_DATA_MAX]
        yield _HEADER.pack(b"DATA", len(chunk))
        yield chunk
    yield _HEADER.pack(b"DONE", 0)


def _stat_v2_record(layout: struct.Struct, ident: bytes, st: FileStat | None, name: str, *extra: int) -> bytes:
    if st is None:  # error, then dev, ino, mode, nlink, uid, gid, size, atime, mtime, ctime
        return layout.pack(ident, errno.ENOENT, *([0] * 10), *extra)
    inode = zlib.crc32(name.encode("utf-8", errors="surrogateescape"))
    return layout.pack(ident, 0, 0, inode, st.mode, 1, _SHELL_UID, _SHELL_UID, st.size,
                       st.mtime, st.mtime, st.mtime, *extra)
