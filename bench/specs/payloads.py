"""OTA weight payloads the bench holds: the update a phone should have installed, by Merkle root.

A lab keeps each released update's weight file in the station's `payloads` folder; the repair
check (claim 12) re-sends single pages from it. A payload is identified by the dm-verity root of
its data (salt from the phone's signed manifest), never by a file name the phone reports.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from phonebench.core.merkle import BLOCK_SIZE, build_tree

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Payload:
    path: Path
    data: bytes

    def page(self, index: int) -> bytes:
        return self.data[index * BLOCK_SIZE:(index + 1) * BLOCK_SIZE]


def find_payload(folder: Path | None, root: bytes, salt: bytes, size: int) -> Payload | None:
    """The payload in `folder` of `size` bytes whose salted Merkle root is `root`, if any."""
    if folder is None or not folder.is_dir():
        return None
    for path in sorted(folder.iterdir()):
        try:
            if not path.is_file() or path.stat().st_size != size:
                continue
            data = path.read_bytes()
        except OSError as exc:
            log.warning("payload %s unreadable: %s", path, exc)
            continue
        if build_tree(data, salt, workers=1).root == root:
            return Payload(path, data)
    return None
