"""dm-verity-layout Merkle tree over a weight file (format 1, SHA-256, no superblock).

Layout (as `veritysetup format --format=1 --no-superblock` writes it):

- data split into 4 KiB blocks; a short last block is zero-padded (veritysetup itself only
  covers whole blocks: pad the file to a multiple of 4 KiB to compare);
- digest of a block = SHA-256(salt || block);
- digests packed 128 per 4 KiB hash block, zero-padded; each level hashes the level below
  until one block remains; root = SHA-256(salt || that block) (one data block: its digest);
- the hash device holds the levels top first, leaf level (digests of data blocks) last.

A spot check of page i hashes the data block and one hash block per level, up to the root. The
leaf level is the cost of a build or a full verify: one SHA-256 per 4 KiB block. A file is read
with os.preadv into a staging buffer laid out salt||block, salt||block, ... (one system call per
256 blocks), and each salt||block window is hashed by one hashlib constructor call over views
made once, mapped in C: no copy of the salted state, no update() call, no bytecode per block.
What is left on top of SHA-256 itself is the copy preadv makes and hashlib's own per-call cost
(context set-up, digest()'s context copy, the GIL released and taken back): ~0.15 + ~0.3 us per
page against ~2 us of SHA-256 (SHA-NI), so one core reaches ~82 % of hashlib streaming the same
file; benchmarks/bench_merkle.py measures each part. A copy of the salted state plus update()
per block straight from an mmap (no copy of the data) costs ~0.45 us in all. A file is
hashed over all cores in worker processes. An in-memory buffer is hashed in this process, from a
copy of the salted state per block (executor="thread" to measure threads anyway).
"""
from __future__ import annotations

import hashlib
import io
import logging
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal, Protocol

from .errors import BenchError

log = logging.getLogger(__name__)

BLOCK_SIZE = 4096
DIGEST_SIZE = 32
FANOUT = BLOCK_SIZE // DIGEST_SIZE  # 128 digests per hash block
_FANOUT_BITS = 7
_PARALLEL_MIN_BLOCKS = 16384  # below 64 MiB the pool start-up costs more than it saves
_STAGE_BLOCKS = 256  # blocks per os.preadv call (IOV_MAX is 1024); ~1 MiB of staging stays in cache
_HASH_DIGEST = type(hashlib.sha256()).digest

Data = bytes | bytearray | memoryview | str | os.PathLike
Executor = Literal["process", "thread"]


class IntegrityError(BenchError):
    """A Merkle tree cannot be built or checked (bad sizes, unreadable data)."""


# --------------------------------------------------------------------------- geometry

@dataclass(frozen=True)
class VerityGeometry:
    """Where each level lives on the hash device, for a given number of data blocks."""

    data_blocks: int

    def __post_init__(self) -> None:
        if self.data_blocks < 1:
            raise IntegrityError("a Merkle tree needs at least one data block", hint="the weight file is empty")

    @cached_property
    def level_sizes(self) -> tuple[int, ...]:
        """Hash blocks per level, leaf level (digests of data blocks) first; () for one data block."""
        sizes, n = [], self.data_blocks
        while n > 1:
            n = -(-n // FANOUT)
            sizes.append(n)
        return tuple(sizes)

    @property
    def levels(self) -> int:
        return len(self.level_sizes)

    @cached_property
    def level_offsets(self) -> tuple[int, ...]:
        """First hash-device block of each level (leaf level first); the top level is stored first."""
        offsets, pos = [0] * self.levels, 0
        for i in reversed(range(self.levels)):
            offsets[i] = pos
            pos += self.level_sizes[i]
        return tuple(offsets)

    @property
    def hash_blocks(self) -> int:
        return sum(self.level_sizes)

    @property
    def hash_device_size(self) -> int:
        return self.hash_blocks * BLOCK_SIZE

    def digest_location(self, page: int, level: int) -> tuple[int, int]:
        """(hash-device block, byte offset in it) of the digest covering `page` at `level`."""
        self._check_page(page)
        node = page >> (_FANOUT_BITS * level)  # the data page (level 0) or the hash block below
        return self.level_offsets[level] + node // FANOUT, (node % FANOUT) * DIGEST_SIZE

    def path(self, page: int) -> list[int]:
        """Hash-device blocks a spot check of `page` reads, leaf level first (one per level)."""
        return [self.digest_location(page, level)[0] for level in range(self.levels)]

    def _check_page(self, page: int) -> None:
        if not 0 <= page < self.data_blocks:
            raise IndexError(f"page {page} outside 0..{self.data_blocks - 1}")


# --------------------------------------------------------------------------- results

@dataclass(frozen=True)
class SpotCheck:
    page: int
    ok: bool
    hashes: int  # SHA-256 computations done (data block + one per level)
    failed_level: int | None = None  # what is corrupt: -1 the data page, L the path's hash block at level L
    detail: str = ""


@dataclass(frozen=True)
class VerifyReport:
    ok: bool
    root_ok: bool
    bad_pages: list[int] = field(default_factory=list)  # data pages whose digest does not match
    bad_hash_blocks: list[int] = field(default_factory=list)  # hash-device blocks that do not match
    pages: int = 0


@dataclass
class MerkleTree:
    salt: bytes
    data_size: int  # bytes covered (the last block zero-padded)
    levels: list[bytes]  # packed, zero-padded hash blocks per level, leaf level first
    root: bytes

    @property
    def geometry(self) -> VerityGeometry:
        return VerityGeometry(_blocks(self.data_size))

    @property
    def root_hex(self) -> str:
        return self.root.hex()

    def hash_device(self) -> bytes:
        """The hash device image, as veritysetup writes it with --no-superblock (top level first)."""
        return b"".join(reversed(self.levels))

    def hash_block(self, index: int) -> bytes:
        """One 4 KiB block of the hash device."""
        geo = self.geometry
        for level in range(geo.levels):
            first = geo.level_offsets[level]
            if first <= index < first + geo.level_sizes[level]:
                start = (index - first) * BLOCK_SIZE
                return self.levels[level][start:start + BLOCK_SIZE]
        raise IndexError(f"hash block {index} outside 0..{geo.hash_blocks - 1}")

    def leaf_digest(self, page: int) -> bytes:
        return self.levels[0][page * DIGEST_SIZE:(page + 1) * DIGEST_SIZE] if self.levels else self.root

    @classmethod
    def from_hash_device(cls, image: bytes, data_size: int, salt: bytes, root: bytes) -> MerkleTree:
        """A tree as stored on a device (untrusted until `check_hash_device` or a spot check)."""
        geo = VerityGeometry(_blocks(data_size))
        if len(image) < geo.hash_device_size:
            raise IntegrityError(f"hash device is {len(image)} bytes, {geo.hash_device_size} expected for "
                                 f"{geo.data_blocks} data blocks", hint="was it truncated in transfer?")
        levels = [bytes(image[geo.level_offsets[i] * BLOCK_SIZE:(geo.level_offsets[i] + geo.level_sizes[i])
                              * BLOCK_SIZE]) for i in range(geo.levels)]
        return cls(salt=salt, data_size=data_size, levels=levels, root=root)


# --------------------------------------------------------------------------- build and verify

def build_tree(data: Data, salt: bytes, *, workers: int | None = None, executor: Executor = "process") -> MerkleTree:
    """Build the tree over `data` (bytes-like or a file path). workers=None: all cores."""
    with _Source(data) as src:
        leaves = _leaf_digests(src, salt, workers, executor)
        return _tree_from_leaves(leaves, salt, src.size)


def verify(data: Data, tree: MerkleTree, *, workers: int | None = None, executor: Executor = "process") -> VerifyReport:
    """Full verify: every data page against the tree's leaf level, and the tree against its root."""
    bad_blocks, root_ok = check_hash_device(tree)
    with _Source(data) as src:
        if src.size != tree.data_size:
            raise IntegrityError(f"data is {src.size} bytes, the tree covers {tree.data_size}",
                                 hint="verify the file the tree was built for")
        leaves = _leaf_digests(src, tree.salt, workers, executor)
    expected = tree.levels[0] if tree.levels else tree.root
    pages = len(leaves) // DIGEST_SIZE
    bad_pages = [] if leaves == expected[:len(leaves)] else [
        i for i in range(pages)
        if leaves[i * DIGEST_SIZE:(i + 1) * DIGEST_SIZE] != expected[i * DIGEST_SIZE:(i + 1) * DIGEST_SIZE]]
    return VerifyReport(ok=not bad_pages and not bad_blocks and root_ok, root_ok=root_ok, bad_pages=bad_pages,
                        bad_hash_blocks=bad_blocks, pages=pages)


def locate_corrupted(data: Data, tree: MerkleTree, **kwargs) -> list[int]:
    """Data pages that do not match the tree."""
    return verify(data, tree, **kwargs).bad_pages


def check_hash_device(tree: MerkleTree) -> tuple[list[int], bool]:
    """(hash-device blocks whose digest in the level above is wrong, top block hashes to the root)."""
    geo = tree.geometry
    if not geo.levels:
        return [], True
    base = hashlib.sha256(tree.salt)
    bad = []
    for level in range(geo.levels - 1):
        above = tree.levels[level + 1]
        blocks = tree.levels[level]
        for b in range(geo.level_sizes[level]):
            h = base.copy()
            h.update(blocks[b * BLOCK_SIZE:(b + 1) * BLOCK_SIZE])
            if h.digest() != above[b * DIGEST_SIZE:(b + 1) * DIGEST_SIZE]:
                bad.append(geo.level_offsets[level] + b)
    top = base.copy()
    top.update(tree.levels[-1])
    return bad, top.digest() == tree.root


def spot_check(page: int, read_page: Callable[[int], bytes | memoryview], read_hash_block: Callable[[int], bytes], *,
               root: bytes, salt: bytes, data_size: int) -> SpotCheck:
    """Check one page against the trusted root, reading the page and one hash block per level.

    `read_page(i)` returns data block i (a short last block is zero-padded here);
    `read_hash_block(j)` returns block j of the hash device. Both may come from a phone.
    Every link up to the root is checked, so a failure names what is corrupt: the item hashed
    by the highest failing link (-1 the data page, L a hash block of level L).
    """
    geo = VerityGeometry(_blocks(data_size))
    base = hashlib.sha256(salt)
    h = base.copy()
    h.update(_pad(read_page(page)))
    below, failing = h.digest(), []
    for level in range(geo.levels):
        index, offset = geo.digest_location(page, level)
        block = bytes(read_hash_block(index))
        if len(block) != BLOCK_SIZE:
            return SpotCheck(page, False, level + 1, level,
                             f"hash block {index} is {len(block)} bytes, not {BLOCK_SIZE}")
        if block[offset:offset + DIGEST_SIZE] != below:
            failing.append(level)
        h = base.copy()
        h.update(block)
        below = h.digest()
    if below != root:
        failing.append(geo.levels)
    hashes = geo.levels + 1
    if not failing:
        return SpotCheck(page, True, hashes)
    culprit = failing[-1] - 1
    what = "data page" if culprit < 0 else f"hash block {geo.digest_location(page, culprit)[0]} (level {culprit})"
    return SpotCheck(page, False, hashes, culprit, f"{what} does not match the digest above it")


def spot_check_local(data: Data, tree: MerkleTree, page: int) -> SpotCheck:
    """Spot check against a local file or buffer and a tree in memory."""
    with _Source(data) as src:
        return spot_check(page, lambda i: src.read(i * BLOCK_SIZE, BLOCK_SIZE), tree.hash_block,
                          root=tree.root, salt=tree.salt, data_size=tree.data_size)


def resend_range(page: int, data_size: int) -> tuple[int, int]:
    """(byte offset, length) of the weight file to re-send to repair one page; the tree is unchanged."""
    VerityGeometry(_blocks(data_size))._check_page(page)
    start = page * BLOCK_SIZE
    return start, min(BLOCK_SIZE, data_size - start)


# --------------------------------------------------------------------------- internals

def _blocks(size: int) -> int:
    return max(1, -(-size // BLOCK_SIZE)) if size > 0 else 0


def _pad(block: bytes | memoryview) -> bytes | memoryview:
    return block if len(block) == BLOCK_SIZE else bytes(block) + bytes(BLOCK_SIZE - len(block))


def _tree_from_leaves(leaves: bytes, salt: bytes, data_size: int) -> MerkleTree:
    geo = VerityGeometry(_blocks(data_size))
    if not geo.levels:
        return MerkleTree(salt=salt, data_size=data_size, levels=[], root=leaves)
    base = hashlib.sha256(salt)
    levels, digests = [], leaves
    for _ in range(geo.levels):
        packed = digests + bytes(-len(digests) % BLOCK_SIZE)
        levels.append(packed)
        digests = _hash_blocks(memoryview(packed), base, 0, len(packed) // BLOCK_SIZE)
    return MerkleTree(salt=salt, data_size=data_size, levels=levels, root=digests)


class _Hasher(Protocol):
    """What is used of a hashlib object (hashlib names no public type for it)."""

    def copy(self) -> "_Hasher": ...

    def update(self, data: bytes | memoryview, /) -> None: ...

    def digest(self) -> bytes: ...


def _hash_blocks(view: memoryview, base: _Hasher, first: int, last: int) -> bytes:
    """Concatenated salted digests of whole blocks first..last-1 of an in-memory `view`."""
    copy, out = base.copy, list[bytes]()
    append = out.append
    for off in range(first * BLOCK_SIZE, last * BLOCK_SIZE, BLOCK_SIZE):
        h = copy()
        h.update(view[off:off + BLOCK_SIZE])
        append(h.digest())
    return b"".join(out)


def _hash_file_blocks(fd: int, salt: bytes, first: int, last: int) -> bytes:
    """Concatenated salted digests of whole blocks first..last-1 of the open file `fd` (the hot loop)."""
    stride, count = len(salt) + BLOCK_SIZE, min(_STAGE_BLOCKS, last - first)
    if count <= 0:
        return b""
    stage = memoryview(bytearray(salt + bytes(BLOCK_SIZE)) * count)  # the salts stay put; preadv fills the rest
    slots = [stage[i * stride + len(salt):(i + 1) * stride] for i in range(count)]
    windows = [stage[i * stride:(i + 1) * stride] for i in range(count)]
    out, sha256 = [], hashlib.sha256
    for start in range(first, last, count):
        n = min(count, last - start)
        if n < count:
            slots, windows = slots[:n], windows[:n]
        got = os.preadv(fd, slots, start * BLOCK_SIZE)
        if got != n * BLOCK_SIZE:
            raise IntegrityError(f"the weight file ended at byte {start * BLOCK_SIZE + got} while being hashed",
                                 hint="something truncated it: hash it again once it is complete")
        out.append(b"".join(map(_HASH_DIGEST, map(sha256, windows))))
    return b"".join(out)


def _leaf_digests(src: _Source, salt: bytes, workers: int | None, executor: Executor) -> bytes:
    blocks = _blocks(src.size)
    whole = src.size // BLOCK_SIZE
    workers = (os.cpu_count() or 1) if workers is None else max(1, workers)
    in_process = executor == "process" and src.fd is None  # a buffer cannot be shared with workers
    if workers == 1 or whole < _PARALLEL_MIN_BLOCKS or in_process:
        digests = src.hash_blocks(salt, 0, whole)
    else:
        bounds = [whole * i // (workers * 4) for i in range(workers * 4 + 1)]  # a few parts each: even finish
        ranges = list(zip(bounds[:-1], bounds[1:], strict=True))
        if executor == "process":
            with ProcessPoolExecutor(workers) as pool:
                parts = pool.map(_hash_file_range, [src.path] * len(ranges), [salt] * len(ranges),
                                 [a for a, _ in ranges], [b for _, b in ranges])
                digests = b"".join(parts)
        else:
            with ThreadPoolExecutor(workers) as pool:
                digests = b"".join(pool.map(lambda r: src.hash_blocks(salt, *r), ranges))
    if blocks > whole:  # zero-padded last block
        h = hashlib.sha256(salt)
        h.update(_pad(src.read(whole * BLOCK_SIZE, src.size - whole * BLOCK_SIZE)))
        digests += h.digest()
    return digests


def _hash_file_range(path: str, salt: bytes, first: int, last: int) -> bytes:
    """Worker-process entry: digests of blocks first..last-1 of the file at `path`."""
    with open(path, "rb", buffering=0) as f:
        return _hash_file_blocks(f.fileno(), salt, first, last)


class _Source:
    """The data: a bytes-like view of a buffer, or an open file read with pread/preadv."""

    def __init__(self, data: Data) -> None:
        self._data = data
        self.path: str | None = None
        self._file: io.FileIO | None = None
        self.view: memoryview | None = None
        self.fd: int | None = None

    def __enter__(self) -> _Source:
        if isinstance(self._data, (str, os.PathLike)):
            self.path = path = os.fspath(self._data)
            try:
                self._file = file = open(path, "rb", buffering=0)
                self.size = os.fstat(file.fileno()).st_size
            except OSError as exc:
                raise IntegrityError(f"cannot read weight file {self.path}: {exc.strerror}",
                                     hint="check the path and permissions") from exc
            if self.size == 0:
                file.close()
                raise IntegrityError(f"weight file {self.path} is empty", hint="nothing to hash")
            self.fd = file.fileno()
        else:
            self.view = view = memoryview(self._data).cast("B")
            if view.nbytes == 0:
                raise IntegrityError("weight data is empty", hint="nothing to hash")
            self.size = view.nbytes
        return self

    def read(self, offset: int, length: int) -> bytes | memoryview:
        if self.view is not None:  # a buffer; else an open file
            return self.view[offset:offset + length]
        return os.pread(self._fd(), length, offset)

    def _fd(self) -> int:
        if self.fd is None:
            raise TypeError("weight data read outside its `with` block")  # a caller's mistake, not bad data
        return self.fd

    def hash_blocks(self, salt: bytes, first: int, last: int) -> bytes:
        if self.view is not None:
            return _hash_blocks(self.view, hashlib.sha256(salt), first, last)
        return _hash_file_blocks(self._fd(), salt, first, last)

    def __exit__(self, *exc: object) -> None:
        if self.view is not None:
            self.view.release()
        if self._file is not None:
            self._file.close()
