"""phonebench.core.merkle: dm-verity layout, checked against veritysetup where it is installed."""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from phonebench.core import merkle
from tests.system_packages import needs
from phonebench.core.merkle import (BLOCK_SIZE, IntegrityError, MerkleTree, VerityGeometry, build_tree,
                          check_hash_device, locate_corrupted, resend_range, spot_check, spot_check_local, verify)

SALT = bytes.fromhex("5a" * 16 + "c3" * 16)
SIZES = [BLOCK_SIZE, 128 * BLOCK_SIZE, 129 * BLOCK_SIZE, 300 * BLOCK_SIZE + 1234, 5000, 128 * 128 * BLOCK_SIZE + 1]


def data_of(size: int, seed: int = 0) -> bytes:
    return hashlib.shake_256(f"weights-{seed}-{size}".encode()).digest(size)


def reference_tree(data: bytes, salt: bytes) -> tuple[bytes, bytes]:
    """(root, hash device) written the obvious way, straight from the format description."""
    data += bytes(-len(data) % BLOCK_SIZE)
    digests = [hashlib.sha256(salt + data[i:i + BLOCK_SIZE]).digest() for i in range(0, len(data), BLOCK_SIZE)]
    levels = []
    while len(digests) > 1:
        packed = b"".join(digests)
        packed += bytes(-len(packed) % BLOCK_SIZE)
        levels.append(packed)
        digests = [hashlib.sha256(salt + packed[i:i + BLOCK_SIZE]).digest() for i in range(0, len(packed), BLOCK_SIZE)]
    return digests[0], b"".join(reversed(levels))


# --------------------------------------------------------------------------- layout

def test_geometry():
    assert VerityGeometry(1).level_sizes == () and VerityGeometry(1).hash_blocks == 0
    assert VerityGeometry(128).level_sizes == (1,)
    g = VerityGeometry(129)
    assert g.level_sizes == (2, 1) and g.level_offsets == (1, 0) and g.hash_device_size == 3 * BLOCK_SIZE
    assert g.digest_location(128, 0) == (2, 0) and g.digest_location(128, 1) == (0, 32)
    assert g.path(5) == [1, 0]
    big = VerityGeometry(2**20)  # 4 GiB of weights: 3 levels, a spot check hashes 4 blocks
    assert big.levels == 3 and big.level_sizes == (8192, 64, 1)
    with pytest.raises(IndexError):
        g.digest_location(129, 0)


@pytest.mark.parametrize("size", SIZES)
def test_matches_reference_implementation(size):
    data = data_of(size)
    tree = build_tree(data, SALT)
    root, device = reference_tree(data, SALT)
    assert tree.root == root and tree.hash_device() == device
    assert tree.data_size == size and tree.geometry.data_blocks == -(-size // BLOCK_SIZE)


def test_short_last_block_is_zero_padded():
    data = data_of(5000)
    assert build_tree(data, SALT).root == build_tree(data + bytes(8192 - 5000), SALT).root


def test_salt_matters():
    data = data_of(3 * BLOCK_SIZE)
    assert build_tree(data, SALT).root != build_tree(data, b"").root


def test_file_and_buffer_and_workers_agree(tmp_path, monkeypatch):
    data = data_of(300 * BLOCK_SIZE + 77)
    path = tmp_path / "weights.bin"
    path.write_bytes(data)
    serial = build_tree(data, SALT, workers=1)
    monkeypatch.setattr(merkle, "_PARALLEL_MIN_BLOCKS", 1)  # force the pools on a small file
    assert build_tree(path, SALT, workers=2, executor="process").root == serial.root
    assert build_tree(bytearray(data), SALT, workers=3, executor="thread").hash_device() == serial.hash_device()
    assert verify(path, serial, workers=2).ok


@pytest.mark.parametrize("salt", [SALT, b""])
def test_a_file_is_hashed_in_staged_chunks_like_the_reference(tmp_path, monkeypatch, salt):
    monkeypatch.setattr(merkle, "_STAGE_BLOCKS", 7)  # many preadv chunks and a short last one
    data = data_of(3 * 7 * BLOCK_SIZE + 5 * BLOCK_SIZE + 99, seed=2)
    path = tmp_path / "weights.bin"
    path.write_bytes(data)
    root, device = reference_tree(data, salt)
    tree = build_tree(path, salt, workers=1)
    assert tree.root == root and tree.hash_device() == device
    assert build_tree(data, salt).hash_device() == device  # the in-memory path agrees
    assert verify(path, tree, workers=1).ok
    last = tree.geometry.data_blocks - 1
    assert spot_check_local(path, tree, last).ok and spot_check_local(path, tree, 8).ok  # pread, short last page


def test_a_file_that_shrinks_while_hashed_is_an_error_not_a_short_tree(tmp_path):
    path = tmp_path / "weights.bin"
    path.write_bytes(data_of(10 * BLOCK_SIZE))
    with open(path, "rb") as f, pytest.raises(IntegrityError, match="ended at byte 40960 while being hashed"):
        merkle._hash_file_blocks(f.fileno(), SALT, 0, 12)  # the size it had when the build started


def test_empty_or_missing_data(tmp_path):
    with pytest.raises(IntegrityError, match="empty"):
        build_tree(b"", SALT)
    (tmp_path / "empty.bin").write_bytes(b"")
    with pytest.raises(IntegrityError, match="empty"):
        build_tree(tmp_path / "empty.bin", SALT)
    with pytest.raises(IntegrityError, match="cannot read"):
        build_tree(tmp_path / "missing.bin", SALT)


# --------------------------------------------------------------------------- verify, spot check, repair

def test_verify_locates_a_corrupted_page_and_resending_it_repairs(tmp_path):
    data = bytearray(data_of(200 * BLOCK_SIZE + 100))
    tree = build_tree(bytes(data), SALT)
    assert verify(data, tree).ok
    original = bytes(data)
    data[137 * BLOCK_SIZE + 9] ^= 0x40  # one flipped bit in page 137
    data[-1] ^= 0x01  # and one in the short last page
    report = verify(data, tree)
    assert not report.ok and report.root_ok and report.bad_pages == [137, 200] and report.pages == 201
    assert locate_corrupted(data, tree) == [137, 200]
    for page in report.bad_pages:
        start, length = resend_range(page, tree.data_size)
        data[start:start + length] = original[start:start + length]  # re-push that page alone
    assert resend_range(200, tree.data_size) == (200 * BLOCK_SIZE, 100)
    assert verify(data, tree).ok


def test_spot_check_hashes_one_block_per_level():
    data = bytearray(data_of(129 * BLOCK_SIZE))
    tree = build_tree(bytes(data), SALT)
    result = spot_check_local(data, tree, 128)
    assert result.ok and result.hashes == 3  # the page + 2 levels
    data[128 * BLOCK_SIZE] ^= 1
    bad = spot_check_local(data, tree, 128)
    assert not bad.ok and bad.failed_level == -1 and "data page" in bad.detail
    assert spot_check_local(data, tree, 0).ok  # other pages unaffected


def test_spot_check_against_an_untrusted_hash_device():
    data = data_of(129 * BLOCK_SIZE)
    tree = build_tree(data, SALT)
    device = bytearray(tree.hash_device())
    device[1 * BLOCK_SIZE + 5] ^= 0xFF  # corrupt the first leaf-level hash block on the "phone"
    stored = MerkleTree.from_hash_device(bytes(device), len(data), SALT, tree.root)
    bad_blocks, root_ok = check_hash_device(stored)
    assert bad_blocks == [1] and root_ok

    def read_page(i: int) -> bytes:
        return data[i * BLOCK_SIZE:(i + 1) * BLOCK_SIZE]

    def read_hash_block(j: int) -> bytes:
        return bytes(device[j * BLOCK_SIZE:(j + 1) * BLOCK_SIZE])

    kwargs = dict(root=tree.root, salt=SALT, data_size=len(data))
    assert spot_check(128, read_page, read_hash_block, **kwargs).ok  # its path avoids block 1
    hit = spot_check(0, read_page, read_hash_block, **kwargs)
    assert not hit.ok and hit.failed_level == 0 and "hash block 1" in hit.detail
    wrong_root = spot_check(128, read_page, read_hash_block, root=bytes(32), salt=SALT, data_size=len(data))
    assert not wrong_root.ok and wrong_root.failed_level == 1  # the top block does not reach this root
    report = verify(data, stored)
    assert not report.ok and report.bad_hash_blocks == [1]


def test_single_block_file():
    data = data_of(BLOCK_SIZE)
    tree = build_tree(data, SALT)
    assert tree.root == hashlib.sha256(SALT + data).digest() and tree.hash_device() == b""
    assert spot_check_local(data, tree, 0).ok and spot_check_local(data, tree, 0).hashes == 1
    assert verify(data, tree).ok
    assert verify(bytes(BLOCK_SIZE), tree).bad_pages == [0]


def test_verify_rejects_a_different_size():
    tree = build_tree(data_of(3 * BLOCK_SIZE), SALT)
    with pytest.raises(IntegrityError, match="covers"):
        verify(data_of(4 * BLOCK_SIZE), tree)


# --------------------------------------------------------------------------- veritysetup

VERITYSETUP = shutil.which("veritysetup")


@needs("cryptsetup-bin", VERITYSETUP is not None)
@pytest.mark.parametrize("size", SIZES)
def test_matches_veritysetup_format(tmp_path, size):
    data = data_of(size, seed=1)
    padded = data + bytes(-size % BLOCK_SIZE)  # veritysetup covers whole blocks only
    data_path, hash_path = tmp_path / "data.img", tmp_path / "hash.img"
    data_path.write_bytes(padded)
    out = subprocess.run([VERITYSETUP, "format", str(data_path), str(hash_path), "--format=1", "--hash=sha256",
                          "--data-block-size=4096", "--hash-block-size=4096", "--no-superblock",
                          f"--salt={SALT.hex()}"], check=True, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "LC_ALL": "C"}).stdout
    root = re.search(r"Root hash:\s*([0-9a-f]{64})", out).group(1)
    tree = build_tree(data, SALT)
    assert tree.root_hex == root
    assert tree.hash_device() == Path(hash_path).read_bytes()
    from_file = build_tree(data_path, SALT, workers=1)  # the file path reads with preadv, not from memory
    assert from_file.root_hex == root and from_file.hash_device() == tree.hash_device()
