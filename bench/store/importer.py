"""`bench store-import`: results.json folders into the store (runs made while it was unreachable)."""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .db import StoreError

if TYPE_CHECKING:  # annotations only
    from .store import Store, SyncResult

log = logging.getLogger(__name__)


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


def import_folder(store: Store, folder: Path, amend: tuple[str, str] | None = None) -> list[SyncResult]:
    """Each run folder's results.json into the store. A run the store has is only completed (tests
    it lacks added); one that differs is refused (ChangedRun) unless `amend` is (by, reason)."""
    results = []
    folders = run_folders(folder)
    if amend is not None and len(folders) != 1:
        raise StoreError(f"{folder} holds {len(folders)} runs: an amendment is of one run",
                         hint="give the one run folder (reports/<run-id>) to amend")
    for run_dir in folders:
        data = read_results(run_dir / "results.json")
        other = store.other_run(data)
        if other is not None:  # the same id, another run: never mix them
            raise StoreError(f"{run_dir / 'results.json'}: the store already has {other}; nothing of this one "
                             f"was stored",
                             hint="run ids are never reused; keep this folder's results.json as it is")
        if data.get("status") == "running":  # no recorder feeds an imported run: it was killed (or still
            data = {**data, "status": "incomplete"}  # runs, and its own sink will set the status again)
        try:
            results.append(store.sync_run(data, run_dir=run_dir, amend=amend))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StoreError(f"{run_dir / 'results.json'}: malformed record ({type(exc).__name__}: {exc}); "
                             f"nothing of it was stored") from None
        log.info("imported %s: %d tests (%d new)", data["run_id"], results[-1].tests_stored, results[-1].tests_added)
    return results
