"""The run folders `bench store-import` brings into the store (Store.import_folder), and each
one's results.json read and checked. Nothing here knows the store: it imports this, not the other way."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .db import StoreError


def run_folders(folder: Path) -> list[Path]:
    """The folder itself if it holds results.json, else its sub-folders that do (not `latest`)."""
    if (folder / "results.json").is_file():
        return [folder]
    if not folder.is_dir():
        raise StoreError(f"{folder} is not a folder", hint="give a run folder (reports/<run-id>) or reports/")
    found = sorted(p.parent for p in folder.glob("*/results.json") if not p.parent.is_symlink())
    if not found:
        raise StoreError(f"{folder} has no results.json, nor any run folder with one",
                         hint="give a run folder (reports/<run-id>) or the folder holding run folders")
    return found


def read_results(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StoreError(f"{path}: cannot read results: {exc}") from None
    if not isinstance(data, dict) or not str(data.get("schema", "")).startswith("phonebench.results/") \
            or "run_id" not in data:
        raise StoreError(f"{path}: not a phonebench results.json (no schema/run_id)")
    return data
