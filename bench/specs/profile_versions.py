"""No going back: the highest version of each SoC profile a station has accepted, per station.

A profile's `version` is in its signed text, so it is as trustworthy as the signature; a library
holding an older version (a rollback to a profile since corrected, still validly signed) is
refused with both versions named. The state is one small JSON file per station in the bench's
data folder ($PHONEBENCH_STATE_DIR, else $XDG_DATA_HOME/phonebench, else ~/.local/share/phonebench)."""
from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
from pathlib import Path

from phonebench.core.errors import ConfigError
from phonebench.core.files import WriteFailed, write_atomically

log = logging.getLogger(__name__)

STATE_ENV = "PHONEBENCH_STATE_DIR"


class ProfileRollback(ConfigError):
    """A profile older than one this station accepted before."""


def state_dir() -> Path:
    if os.environ.get(STATE_ENV):
        return Path(os.environ[STATE_ENV])
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "phonebench"


def state_path(station: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", station)[:80] or "_"
    return state_dir() / "profile-versions" / f"{safe}.json"


def check_and_record(station: str, versions: dict[str, tuple[int, Path]]) -> None:
    """Refuse a profile older than this station's highest accepted one; then remember the new highs.
    `versions`: SoC model -> (version, profile file)."""
    path = state_path(station)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(path.with_suffix(".lock"), "a") as lock:  # two bay workers of one station: one at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            seen = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            seen = {}
        seen = {k: v for k, v in seen.items() if isinstance(v, int)} if isinstance(seen, dict) else {}
        for soc, (version, source) in sorted(versions.items()):
            if version < seen.get(soc, version):
                raise ProfileRollback(
                    f"{source}: {soc} profile version {version} is older than version {seen[soc]}, which station "
                    f"{station!r} accepted before: a rollback is refused",
                    hint=f"restore the newer profile (version {seen[soc]} or later); if the older one must come back, "
                         "re-issue it with a higher version and sign it")
        merged = {**seen, **{soc: max(v, seen.get(soc, v)) for soc, (v, _) in versions.items()}}
        if merged != seen:
            with contextlib.suppress(WriteFailed):  # the check stands; a full disk only forgets the new high
                write_atomically(path, json.dumps(merged, indent=1, sort_keys=True))
