"""A file's stat as ADB's sync protocol carries it (STAT/LST2: mode, size, mtime): what a phone's
file system answers and what the bench's ADB drivers read back, one record for both sides."""
from __future__ import annotations

import stat as stat_mod
from dataclasses import dataclass


@dataclass(frozen=True)
class FileStat:
    mode: int
    size: int
    mtime: int

    @property
    def is_dir(self) -> bool:
        return stat_mod.S_ISDIR(self.mode)
