"""Install records on disk: one JSON file per install attempt, written once (never replaced), in
the results folder's `installs/` (docs/builds.md)."""
from __future__ import annotations

import datetime as dt
import json
import os
import tempfile
from pathlib import Path

from phonebench.core.files import describe_os_error, safe_name
from .install import InstallRecord

INSTALLS = "installs"


def write_install_record(results_dir: Path, record: InstallRecord, when: dt.datetime | None = None) -> Path:
    """results_dir/installs/<UTC time>-<device>-<build>.json, whole or not at all, never over another
    record (a name taken gets a suffix); WriteFailed names the file and what to do."""
    when = when or dt.datetime.now(dt.timezone.utc)
    folder = Path(results_dir) / INSTALLS
    stem = f"{when:%Y%m%d-%H%M%S}-{safe_name(record.device, 'phone')}-{safe_name(record.build_id, 'build')}"
    text = json.dumps({"recorded_at": when.isoformat(), **record.to_dict()}, indent=1) + "\n"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".install-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
    except OSError as exc:
        raise describe_os_error(folder / f"{stem}.json", exc) from None
    try:
        for n in range(1000):
            path = folder / (f"{stem}.json" if n == 0 else f"{stem}-{n}.json")
            try:
                os.link(tmp, path)  # fails if the name is taken: a record is never replaced
                return path
            except FileExistsError:
                continue
        raise FileExistsError(f"{folder}: 1000 records named {stem}")
    except OSError as exc:
        raise describe_os_error(folder / f"{stem}.json", exc) from None
    finally:
        Path(tmp).unlink(missing_ok=True)
