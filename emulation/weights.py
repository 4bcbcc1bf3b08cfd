"""The weight store on the emulated phone, as an over-the-air update installs it (claims 11, 12).

    /data/vendor/llm/weights/model.bin                 the weights (32 MiB, deterministic)
    /data/vendor/llm/weights/model.bin.verity          dm-verity hash device (4 KiB, SHA-256, salt)
    /data/vendor/llm/weights/model.bin.crc             per-page CRC-32 table (little-endian uint32)
    /data/vendor/llm/weights/model.bin.manifest.json   root, salt, sizes: shipped with the update
    /data/vendor/llm/weights/model.bin.manifest.json.sig   the update's Ed25519 signature

The update is signed with the repository's DEVELOPMENT key (firmware_profiles/keys/dev-only),
standing in for the vendor's OTA key; the bench verifies it with phonebench.core.signing's trusted keys.
Every phone of a process shares one copy of the update's bytes (the file store keeps the object).

The runtime reads pages through `WeightStore`: each read checks the page's CRC (a mismatch is a
read error, counted), takes device time (UFS random 4 KiB reads, rare garbage-collection stalls)
and can return the page's hash-tree path for a spot check. `repair` writes one page the bench
re-sent, after checking it against the on-device hash tree.

Faults: persona "corrupt-weights" (one page corrupted at rest); "verity-tree-corrupt" (one
leaf-level hash block corrupted); "slow-flash" (every read ~0.1 s: a failing UFS part);
"weights-repair-ignored" (repair answers ok but writes nothing). Persona "spot-time-omits-read":
the flash is as slow as "slow-flash", but the read time a page read reports leaves the data page
out and counts the hash blocks at a healthy part's speed (only a clock outside the runtime shows it).
"""
from __future__ import annotations

import hashlib
import json
import logging
import zlib
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from phonebench.core.merkle import BLOCK_SIZE, MerkleTree, VerityGeometry, build_tree
from phonebench.core.signing import DEV_PRIVATE_KEY, load_private_key, sign_bytes
from .tinymodel import MODEL_NAME
from .unit_variation import spec_night_seed, unit_seed

if TYPE_CHECKING:
    from .device import EmulatedPhone

log = logging.getLogger(__name__)

WEIGHTS_DIR = "/data/vendor/llm/weights"
WEIGHT_FILE = f"{WEIGHTS_DIR}/model.bin"
VERITY_FILE = WEIGHT_FILE + ".verity"
CRC_FILE = WEIGHT_FILE + ".crc"
MANIFEST_FILE = WEIGHT_FILE + ".manifest.json"
SIGNATURE_FILE = MANIFEST_FILE + ".sig"
MANIFEST_FORMAT = "phonebench-weights/1"
WEIGHTS_BYTES = 32 << 20
SALT = hashlib.sha256(b"phonebench weights salt 1").digest()
_SEED = 20260611

FAULT_TREE = "verity-tree-corrupt"
FAULT_SLOW_FLASH = "slow-flash"
FAULT_REPAIR_IGNORED = "weights-repair-ignored"

# Device time of one 4 KiB random read (UFS 3.1/4.0), seconds.
READ_S = 0.00012
READ_JITTER_S = 0.00004  # exponential
GC_STALL_PROBABILITY = 0.01
GC_STALL_S = 0.003
SLOW_READ_S = (0.09, 0.16)  # uniform, fault slow-flash


class WeightStoreError(Exception):
    """A request the weight store refuses (the runtime answers it as an error line)."""


@dataclass(frozen=True)
class UpdatePackage:
    """The over-the-air update: weights, their hash tree, CRC table and signed manifest."""

    data: bytes
    tree: MerkleTree
    crc: bytes
    manifest: bytes
    signature: str

    @property
    def pages(self) -> int:
        return len(self.data) // BLOCK_SIZE

    def page(self, index: int) -> bytes:
        return self.data[index * BLOCK_SIZE:(index + 1) * BLOCK_SIZE]


@lru_cache(maxsize=1)
def update_package() -> UpdatePackage:
    """The update every emulated phone has installed (built once per process, ~0.1 s)."""
    data = np.random.default_rng(_SEED).bytes(WEIGHTS_BYTES)
    tree = build_tree(data, SALT, workers=1)
    view = memoryview(data)
    crc = np.array([zlib.crc32(view[i:i + BLOCK_SIZE]) for i in range(0, len(data), BLOCK_SIZE)], dtype="<u4")
    manifest = json.dumps({
        "format": MANIFEST_FORMAT, "model": MODEL_NAME, "file": "model.bin", "data_size": len(data),
        "data_block_size": BLOCK_SIZE, "hash_block_size": BLOCK_SIZE, "hash": "sha256", "salt": SALT.hex(),
        "root": tree.root_hex, "hash_device": "model.bin.verity", "crc_table": "model.bin.crc",
    }, indent=1, sort_keys=True).encode() + b"\n"
    return UpdatePackage(data, tree, crc.tobytes(), manifest, sign_bytes(manifest, load_private_key(DEV_PRIVATE_KEY)))


def _flip(data: bytes, offset: int) -> bytes:
    out = bytearray(data)
    out[offset] ^= 0x5A
    return bytes(out)


class WeightStore:
    def __init__(self, phone: "EmulatedPhone", corrupt_page: bool, read_time_omitted: bool = False) -> None:
        self.phone = phone
        faults = set(phone.spec.faults)
        self.read_time_omitted = read_time_omitted
        self.slow = FAULT_SLOW_FLASH in faults or read_time_omitted
        self.repair_ignored = FAULT_REPAIR_IGNORED in faults
        self._rng = np.random.default_rng([spec_night_seed(phone.spec), 0x3E16])  # read times: the night's
        self.crc_errors = 0
        self.pages_read = 0
        pkg = update_package()
        self.pages = pkg.pages
        data, image = pkg.data, pkg.tree.hash_device()
        if corrupt_page:
            page = int(np.random.default_rng([unit_seed(phone.spec.seed, phone.spec.serial), 0xBAD]).integers(self.pages))
            data = _flip(data, page * BLOCK_SIZE + 1234)
            log.info("%s: weight page %d corrupted at rest (persona)", phone.spec.serial, page)
        if FAULT_TREE in faults:
            page = int(np.random.default_rng([unit_seed(phone.spec.seed, phone.spec.serial), 0x7EE]).integers(self.pages))
            block, offset = pkg.tree.geometry.digest_location(page, 0)
            image = _flip(image, block * BLOCK_SIZE + offset + 3)
        fs = phone.fs
        fs.write(WEIGHT_FILE, data, mode=0o100640)
        fs.write(VERITY_FILE, image, mode=0o100640)
        fs.write(CRC_FILE, pkg.crc, mode=0o100640)
        fs.write(MANIFEST_FILE, pkg.manifest)
        fs.write(SIGNATURE_FILE, pkg.signature.encode())

    # --- reading ----------------------------------------------------------------------------
    def _read_times(self, n: int) -> np.ndarray:
        if self.slow:
            return self._rng.uniform(*SLOW_READ_S, size=n)
        times = (READ_S + self._rng.exponential(READ_JITTER_S, size=n)) * self.phone.world.variation.flash_read
        return times + np.where(self._rng.random(n) < GC_STALL_PROBABILITY, GC_STALL_S, 0.0)

    def _crc_table(self) -> np.ndarray:
        return np.frombuffer(self.phone.fs.read(CRC_FILE), dtype="<u4")

    def _check(self, index: int) -> None:
        if not 0 <= index < self.pages:
            raise WeightStoreError(f"page {index} outside 0..{self.pages - 1}")

    def read_page(self, index: int, with_path: bool = False) -> dict[str, Any]:
        """One page (and its hash-tree path), CRC-checked, with the device time it took."""
        self._check(index)
        data = self.phone.fs.read(WEIGHT_FILE)
        page = data[index * BLOCK_SIZE:(index + 1) * BLOCK_SIZE]
        crc_ok = zlib.crc32(page) == int(self._crc_table()[index])
        self.pages_read += 1
        self.crc_errors += 0 if crc_ok else 1
        path = []
        if with_path:
            image = self.phone.fs.read(VERITY_FILE)
            for block in VerityGeometry(self.pages).path(index):
                path.append({"block": block, "data": image[block * BLOCK_SIZE:(block + 1) * BLOCK_SIZE]})
        seconds = float(self._read_times(1 + len(path)).sum())
        self.phone.world.wait(seconds)
        return {"page": index, "data": page, "crc_ok": crc_ok, "path": path,
                "read_s": self._reported_read_s(len(path)) if self.read_time_omitted else seconds}

    def _reported_read_s(self, hash_blocks: int) -> float:
        """The lie of "spot-time-omits-read": the hash blocks at a healthy part's speed, no page read."""
        return hash_blocks * READ_S

    def verify(self) -> dict[str, Any]:
        """Read every page and check its CRC (what the runtime does on a full model load)."""
        data = memoryview(self.phone.fs.read(WEIGHT_FILE))
        table = self._crc_table()
        bad = [i for i in range(self.pages) if zlib.crc32(data[i * BLOCK_SIZE:(i + 1) * BLOCK_SIZE]) != int(table[i])]
        seconds = float(self._read_times(self.pages).sum())
        self.phone.world.wait(seconds)
        self.pages_read += self.pages
        self.crc_errors += len(bad)
        return {"pages": self.pages, "crc_errors": len(bad), "bad_pages": bad, "read_s": seconds}

    # --- repair -----------------------------------------------------------------------------
    def repair(self, index: int, page: bytes) -> dict[str, Any]:
        """Write one re-sent page, if it matches the on-device hash tree's digest for it."""
        self._check(index)
        if len(page) != BLOCK_SIZE:
            raise WeightStoreError(f"a page is {BLOCK_SIZE} bytes, got {len(page)}")
        manifest = json.loads(self.phone.fs.read(MANIFEST_FILE))
        salt = bytes.fromhex(manifest["salt"])
        tree = MerkleTree.from_hash_device(self.phone.fs.read(VERITY_FILE), int(manifest["data_size"]), salt,
                                           bytes.fromhex(manifest["root"]))
        if hashlib.sha256(salt + page).digest() != tree.leaf_digest(index):
            raise WeightStoreError(f"page {index} does not match its digest in {VERITY_FILE}; not written")
        if not self.repair_ignored:
            data = self.phone.fs.read(WEIGHT_FILE)
            start = index * BLOCK_SIZE
            self.phone.fs.write(WEIGHT_FILE, data[:start] + page + data[start + BLOCK_SIZE:], mode=0o100640)
        self.phone.world.wait(float(self._read_times(1)[0]) * 4)  # a page program takes longer than a read
        return {"repaired": index, "bytes": len(page)}

    def status(self) -> dict[str, Any]:
        return {"path": WEIGHT_FILE, "hash_device": VERITY_FILE, "crc_table": CRC_FILE, "manifest": MANIFEST_FILE,
                "signature": SIGNATURE_FILE, "pages": self.pages, "page_size": BLOCK_SIZE,
                "pages_read": self.pages_read, "crc_errors": self.crc_errors}
