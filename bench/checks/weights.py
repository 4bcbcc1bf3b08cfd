"""Weight store integrity (claims 11, 12): page read errors, the Merkle root, spot checks, repair.

The update ships a manifest (root, salt, sizes) signed with the vendor's OTA key; the bench trusts
the manifest only after checking that signature (bench.core.signing's trusted keys), and the on-device
hash device only after rebuilding its root.

- Read errors: the runtime's own CRC check of every page (`llmrt weights verify`) and the bench's
  full Merkle verify of the pulled weight file; a page bad in either counts once.
- Spot check time (claim 12, "< 100 ms"): what a spot check costs is the device reading one data
  page and one hash block per level, plus the bench hashing them. The verdict uses the device's
  own report of its read time (`read_ms`, device clock: the transport to the bench is not part
  of the claim and the host's wall clock never enters) plus the counted SHA-256 operations times
  this host's hash time per 4 KiB block, calibrated when the check starts. A failing spot check
  is still timed (it took that long to find the problem).
- Corrupt and repair: with `inject`, one page of a copy of the weight file is corrupted and the
  copy pushed back (what a bad OTA transfer leaves; needs a writable /data/vendor, i.e. an
  engineering build). The corruption must be found (a spot check of that page, and the full
  verify), then each bad page is repaired by re-sending that page alone (`llmrt weights repair`),
  and verified after (spot check of each repaired page and the device's CRC verify).
"""
from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.core import signing
from bench.checks import CheckResult, Tick, named, no_tick
from bench.core.errors import BenchError, InvalidMeasurement
from bench.core.merkle import BLOCK_SIZE, MerkleTree, SpotCheck, check_hash_device, spot_check, verify
from bench.sla import SlaEntry
from drivers.device import Device
from drivers.runtime import RuntimeClient, RuntimeCommandFailed

log = logging.getLogger(__name__)

PageSource = Callable[[int], bytes]  # page index -> the update's bytes for that page
HASH_CALIBRATION_BLOCKS = 4096
SPOT_SEED = 20261


@dataclass
class WeightsManifest:
    root: bytes
    salt: bytes
    data_size: int
    key_id: str | None  # key that signed it (None: signature did not verify)
    problem: str | None  # why the signature did not verify
    paths: dict[str, str]
    raw: dict[str, Any]

    @property
    def pages(self) -> int:
        return -(-self.data_size // BLOCK_SIZE)


def load_manifest(device: Device, runtime: RuntimeClient) -> WeightsManifest:
    """Pull the update's manifest and check its signature (a bad one is reported, not raised)."""
    status = runtime.weights_status()
    data = device.pull_bytes(status["manifest"])
    key_id, problem = None, None
    try:
        signature = device.pull_bytes(status.get("signature", status["manifest"] + ".sig")).decode()
        key_id = signing.verify_bytes(data, signature, signing.trusted_keys(), status["manifest"]).key_id
    except (BenchError, UnicodeDecodeError) as exc:
        problem = str(exc).splitlines()[0]
    try:
        manifest = json.loads(data)
        return WeightsManifest(bytes.fromhex(manifest["root"]), bytes.fromhex(manifest["salt"]),
                               int(manifest["data_size"]), key_id, problem, status, manifest)
    except (json.JSONDecodeError, KeyError, ValueError, TypeError) as exc:
        raise InvalidMeasurement(f"{device.name}: weights manifest {status['manifest']} is unreadable ({exc})",
                                 hint="the update's manifest needs root, salt and data_size") from None


def pull_tree(device: Device, manifest: WeightsManifest) -> MerkleTree:
    image = device.pull_bytes(manifest.paths["hash_device"])
    return MerkleTree.from_hash_device(image, manifest.data_size, manifest.salt, manifest.root)


def root_check(device: Device, runtime: RuntimeClient, entry: SlaEntry) -> CheckResult:
    """The manifest is signed by a trusted key and the on-device hash device rebuilds its root."""
    manifest = load_manifest(device, runtime)
    tree = pull_tree(device, manifest)
    bad_blocks, root_ok = check_hash_device(tree)
    problems = ([f"manifest signature: {manifest.problem}"] if manifest.problem else []) + \
        [f"hash block {b} does not match the level above" for b in bad_blocks] + \
        ([] if root_ok else ["the hash device's top block does not hash to the manifest's root"])
    verdict = named(entry.evaluate(len(problems)), "weights_root_mismatches", raw="weights_root",
                    root=manifest.root.hex(), signed_by=manifest.key_id)
    verdict.detail = "; ".join(problems) or f"root {manifest.root.hex()[:16]}... verified, signed by {manifest.key_id}"
    return CheckResult([verdict], {"weights_root": {"manifest": manifest.raw, "problems": problems,
                                                    "bad_hash_blocks": bad_blocks}})


def bad_pages(device: Device, runtime: RuntimeClient, manifest: WeightsManifest,
              tree: MerkleTree) -> tuple[set[int], set[int] | None, bytes | None]:
    """(pages failing the device's CRC check, pages failing the bench's Merkle verify, the pulled file).

    The Merkle part is None when the on-device hash device does not rebuild the signed root: its
    leaf digests cannot be trusted to judge pages (the root check reports that problem).
    """
    crc = set(runtime.weights_verify().bad_pages)
    bad_blocks, root_ok = check_hash_device(tree)
    if bad_blocks or not root_ok:
        return crc, None, None
    data = device.pull_bytes(manifest.paths["path"])
    return crc, set(verify(data, tree, workers=1).bad_pages), data


def read_errors_check(device: Device, runtime: RuntimeClient, entry: SlaEntry) -> CheckResult:
    """Claim 11: every weight page reads back without error (device CRC and bench Merkle verify)."""
    manifest = load_manifest(device, runtime)
    tree = pull_tree(device, manifest)
    crc_bad, merkle_bad, _ = bad_pages(device, runtime, manifest, tree)
    bad = sorted(crc_bad | (merkle_bad or set()))
    verdict = named(entry.evaluate(len(bad)), "weights_page_read_errors", raw="weights_read_errors",
                    crc_bad=sorted(crc_bad)[:100], merkle_bad=None if merkle_bad is None else sorted(merkle_bad)[:100])
    verdict.n = manifest.pages
    merkle = "not possible (the hash device does not match the signed root)" if merkle_bad is None else len(merkle_bad)
    verdict.detail = f"{len(bad)} of {manifest.pages} pages bad (CRC: {len(crc_bad)}, Merkle: {merkle})"
    raw = {"pages": manifest.pages, "crc_bad": sorted(crc_bad),
           "merkle_bad": None if merkle_bad is None else sorted(merkle_bad)}
    return CheckResult([verdict], {"weights_read_errors": raw})


def hash_time_s(blocks: int = HASH_CALIBRATION_BLOCKS) -> float:
    """This host's time for one salted SHA-256 of a 4 KiB block (best of three passes)."""
    data, salt = bytes(BLOCK_SIZE), hashlib.sha256(b"calibration").digest()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        base = hashlib.sha256(salt)
        for _ in range(blocks):
            h = base.copy()
            h.update(data)
            h.digest()
        best = min(best, (time.perf_counter() - start) / blocks)
    return best


def device_spot_check(runtime: RuntimeClient, manifest: WeightsManifest, page: int) -> tuple[SpotCheck, float]:
    """(result, device read time in ms) of one spot check with the page and its path read from the phone."""
    read = runtime.weights_read(page, with_path=True)
    result = spot_check(page, lambda i: read.data, lambda j: read.path.get(j, b""), root=manifest.root,
                        salt=manifest.salt, data_size=manifest.data_size)
    return result, float(read.read_ms or 0.0)


def spot_check_time_check(device: Device, runtime: RuntimeClient, entry: SlaEntry, *, n: int | None = None,
                          tick: Tick = no_tick) -> CheckResult:
    """Claim 12: any page spot-checked in < 100 ms (device read time + bench hash work)."""
    manifest = load_manifest(device, runtime)
    per_hash_s = hash_time_s()
    n = max(n or 0, entry.n_required)
    pages = np.random.default_rng(SPOT_SEED).choice(manifest.pages, size=min(n, manifest.pages), replace=False)
    times, device_ms, failed = [], [], []
    for page in pages:
        result, read_ms = device_spot_check(runtime, manifest, int(page))
        device_ms.append(read_ms)
        times.append(read_ms + 1000.0 * result.hashes * per_hash_s)
        if not result.ok:
            failed.append(int(page))
        tick(1)
    samples = np.asarray(times)
    verdict = named(entry.evaluate(samples), "weights_merkle_spot_check_time", raw="weights_spot_checks",
                    plot="samples", hash_us=1e6 * per_hash_s, failed_pages=failed,
                    timing="device-reported read time + SHA-256 count x calibrated host hash time")
    return CheckResult([verdict], {"weights_spot_checks": {"samples": samples, "device_read_ms": np.asarray(device_ms),
                                                           "page": pages.astype(float)}})


def corrupt_and_repair_check(device: Device, runtime: RuntimeClient, payload: PageSource,
                             entries: dict[str, SlaEntry], *, inject: bool = True, seed: int = 7,
                             workdir: str = "/data/local/tmp/phonebench") -> CheckResult:
    """One corrupted page detected and repaired by re-sending that page alone, verified after.

    entries: weights_undetected_corruptions, weights_repair_bytes_per_page, weights_bad_pages_after_repair.
    """
    manifest = load_manifest(device, runtime)
    tree = pull_tree(device, manifest)
    crc_bad, merkle_bad, data = bad_pages(device, runtime, manifest, tree)
    at_rest = crc_bad | (merkle_bad or set())
    injected: set[int] = set()
    if inject:
        if data is None:
            data = device.pull_bytes(manifest.paths["path"])
        rng = np.random.default_rng(seed)
        page = int(rng.integers(manifest.pages))
        while page in at_rest:
            page = int(rng.integers(manifest.pages))
        corrupted = bytearray(data)
        corrupted[page * BLOCK_SIZE + int(rng.integers(BLOCK_SIZE))] ^= 0xA5
        device.push_bytes(bytes(corrupted), manifest.paths["path"], mode=0o640)
        injected.add(page)
    # Detection: a spot check of each page known or made bad (a failure in the page itself, not in
    # the hash blocks above it), and the full verify again.
    spot_failed = {p for p in at_rest | injected if _page_corrupt(runtime, manifest, p)}
    crc_now, merkle_now, _ = bad_pages(device, runtime, manifest, tree)
    found = spot_failed | crc_now | (merkle_now or set())
    undetected = sorted((at_rest | injected) - found)
    # Repair: each bad page alone, from the update.
    pushed: dict[int, int] = {}
    refused: dict[int, str] = {}
    for page in sorted(found):
        good = payload(page)
        remote = f"{workdir}/weights-page-{page}.bin"
        device.push_bytes(good, remote)
        pushed[page] = len(good)
        try:
            runtime.weights_repair(page, remote)
        except RuntimeCommandFailed as exc:  # judged below: the page stays bad
            refused[page] = str(exc).splitlines()[0]
        device.shell(["rm", "-f", remote])
    still_bad = {p for p in found if _page_corrupt(runtime, manifest, p)}
    after = sorted(still_bad | set(runtime.weights_verify().bad_pages))
    raw = {"injected": sorted(injected), "at_rest": sorted(at_rest), "found": sorted(found),
           "spot_failed": sorted(spot_failed), "bytes_pushed": pushed, "refused": refused, "bad_after": after}
    verdicts = [
        named(entries["weights_undetected_corruptions"].evaluate(len(undetected)), "weights_undetected_corruptions",
              raw="weights_repair", pages=undetected),
        named(entries["weights_repair_bytes_per_page"].evaluate(np.asarray(list(pushed.values()), dtype=float)),
              "weights_repair_bytes_per_page", raw="weights_repair"),
        named(entries["weights_bad_pages_after_repair"].evaluate(len(after)), "weights_bad_pages_after_repair",
              raw="weights_repair", pages=after, refused=refused),
    ]
    verdicts[0].detail = (f"corrupted {sorted(at_rest | injected)}, found {sorted(found)}"
                          + (f", missed {undetected}" if undetected else ""))
    return CheckResult(verdicts, {"weights_repair": raw})


def _page_corrupt(runtime: RuntimeClient, manifest: WeightsManifest, page: int) -> bool:
    result, _ = device_spot_check(runtime, manifest, page)
    return not result.ok and result.failed_level == -1
