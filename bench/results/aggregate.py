"""One run from many bay workers: the bays' results folders (<run>/bays/<bay>/) merged into the
run's results.json, junit.xml and raw data, then one store row and one report.

Each worker records its own bay with the ordinary RunRecorder; nothing here rewrites what a
worker measured. A worker that crashed or was killed leaves a partial results.json (it is
rewritten after every test): its finished tests are kept, the run is marked incomplete and the
problem names the bay, so one bay's failure never touches the others' results.
"""
from __future__ import annotations

import json
import logging
import shutil
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from phonebench.core.files import WriteFailed, write_atomically
from phonebench.core.records import RunRecord, TestRecord
from .run_record import code_version, read_run_token, recorder_alive, rescue_record, rescued_record, sealed_by

log = logging.getLogger(__name__)

BAYS_FOLDER = "bays"
STATION_RECORD = "station.json"  # <run>/bays/station.json: the parent's station record, for a merge after a kill


@dataclass
class BayOutcome:
    bay: str
    exit_code: int | None  # None: never started
    wall_s: float = 0.0


def bay_folder(run_dir: Path, bay: str) -> Path:
    return run_dir / BAYS_FOLDER / bay


def orphaned_bays(run_dir: Path) -> tuple[dict[str, Any], list[BayOutcome]] | None:
    """A bays run whose parent died before merging: its station record and a (never-known exit)
    outcome per bay folder; None when it is not one, or a bay's worker is still recording."""
    folder = run_dir / BAYS_FOLDER
    station_file = folder / STATION_RECORD
    if (run_dir / "results.json").exists() or not station_file.is_file():
        return None
    bays = sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink())
    if any(recorder_alive(bay) for bay in bays):
        return None  # a worker still writing its last record: the next look merges it
    station = json.loads(station_file.read_text(encoding="utf-8"))
    return station, [BayOutcome(bay.name, None) for bay in bays]


def merge_bays(run_dir: Path, station: dict[str, Any], outcomes: list[BayOutcome],
               token: str | None = None) -> dict[str, Any]:
    """Write <run_dir>/results.json and junit.xml from the bays' folders; returns the run's data.

    `token` is the run's secret its workers sealed their rescued records with (None: the one the
    parent kept, for a merge after it was killed); a rescued record without its seal is not used."""
    record = RunRecord(run_id=run_dir.name, started="", station={**station, "bays": {}}, code_version=code_version())
    problems: list[str] = []
    suites: list[ET.Element] = []
    token = token or read_run_token(run_dir.name)
    used: list[Path] = []
    for outcome in outcomes:
        folder = bay_folder(run_dir, outcome.bay)
        data, source, refused = _bay_record(folder, f"{run_dir.name}-{outcome.bay}", token)
        problems.extend(f"bay {outcome.bay}: {p}" for p in refused)
        if source is not None and source.name != "results.json":
            used.append(source)
        if data is None:
            problems.append(f"bay {outcome.bay}: no results (worker exit code {outcome.exit_code}); "
                            f"see {folder / 'worker.log'}")
            continue
        bay = RunRecord.from_dict(data)
        record.started = min(filter(None, [record.started, bay.started]), default="")
        record.finished = max(filter(None, [record.finished or "", bay.finished or ""]), default=None)
        record.station["bays"][outcome.bay] = {**bay.station, "status": bay.status, "exit_code": outcome.exit_code,
                                               "wall_s": round(outcome.wall_s, 2), "record": str(source)}
        record.duts.update(bay.duts)
        record.instruments.update({f"{outcome.bay}/{role}": inst for role, inst in bay.instruments.items()})
        moved = _move_raw(folder, run_dir, outcome.bay)
        record.tests.extend(TestRecord.from_dict(_raw_paths({**t.to_dict(), "bay": t.bay or outcome.bay}, moved))
                            for t in bay.tests)
        problems.extend(f"bay {outcome.bay}: {p}" for p in bay.problems)
        if bay.status != "complete" or outcome.exit_code not in (0, 1):
            problems.append(f"bay {outcome.bay}: worker ended {bay.status} (exit code {outcome.exit_code}) "
                            f"after {len(bay.tests)} tests; see {folder / 'worker.log'}")
        suites.extend(_junit_suites(folder / "junit.xml", outcome.bay, run_dir.name))
    (run_dir / BAYS_FOLDER / "latest").unlink(missing_ok=True)  # each worker's recorder pointed it at its bay
    record.status = "complete" if not problems else "incomplete"
    record.problems = problems
    data = record.to_dict()
    try:
        write_atomically(run_dir / "results.json", json.dumps(data, indent=1))
    except WriteFailed as exc:  # a full or read-only disk: one whole record, named by the run, elsewhere
        data["problems"].append(str(exc).splitlines()[0])
        rescued_to = rescue_record(data, run_dir.name, run_dir)
        data["rescued_to"] = str(rescued_to or "")
        if rescued_to is not None:
            _drop_bay_rescues(used)
        return data
    _drop_bay_rescues(used)
    junit = ET.Element("testsuites")
    junit.extend(suites)
    try:
        write_atomically(run_dir / "junit.xml", ET.tostring(junit, encoding="unicode"))
    except WriteFailed as exc:
        log.error("%s", str(exc).splitlines()[0])
    return data


def _drop_bay_rescues(used: list[Path]) -> None:
    """The bays' own rescued records are in the run's one record now: one record per run."""
    for rescued in used:
        rescued.unlink(missing_ok=True)


def _bay_record(folder: Path, name: str, token: str | None) -> tuple[dict[str, Any] | None, Path | None, list[str]]:
    """A bay's record, where it came from, and the rescued records refused.

    The bay's own results.json when its worker finished writing it (it has `finished`); the record
    the worker rescued only when its own could not be written, and only with this run's seal: a
    file under the rescue name proves nothing about who wrote it, and more tests is no reason to
    believe a record. A partial results.json is kept when nothing better is."""
    own_path = folder / "results.json"
    own = _read(own_path)
    if own is not None and own.get("finished"):
        return own, own_path, []
    path = rescued_record(name)
    rescued = _read(path) if path is not None else None
    if path is not None and (rescued is None or not sealed_by(rescued, name, token)):
        log.warning("%s: not sealed by this run's token: not used", path)
        refused = [f"the rescued record {path} is not sealed by this run: not used"]
        return (own, own_path if own is not None else None, refused)
    if rescued is not None and path is not None:
        return rescued, path, []
    return own, own_path if own is not None else None, []


def _read(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _move_raw(folder: Path, run_dir: Path, bay: str) -> dict[str, str]:
    """Raw data paths in verdicts are relative to the run folder (raw/<test>/<name>): keep them so.
    A test that takes no DUT (a bay's instrument check) has the same id in every bay: the later
    bays' folders get the bay in their name. Returns old -> new folder prefixes for those."""
    raw = folder / "raw"
    if not raw.is_dir():
        return {}
    (run_dir / "raw").mkdir(exist_ok=True)
    moved = {}
    for item in raw.iterdir():
        target = run_dir / "raw" / item.name
        if target.exists():
            target = run_dir / "raw" / f"{item.name}@{bay}"
            moved[f"raw/{item.name}/"] = f"raw/{target.name}/"
        shutil.move(str(item), str(target))
    return moved


def _raw_paths(test: dict[str, Any], moved: dict[str, str]) -> dict[str, Any]:
    """A test record's raw data paths after its bay's folders were renamed (see _move_raw)."""
    if not moved:
        return test

    def fix(path: object) -> object:
        if not isinstance(path, str):
            return path
        old = next((o for o in moved if path.startswith(o)), None)
        return moved[old] + path[len(old):] if old else path

    verdicts = [{**v, "raw": [fix(r) for r in v.get("raw") or []]} for v in test.get("verdicts", [])]
    return {**test, "verdicts": verdicts}


def _junit_suites(path: Path, bay: str, run_id: str) -> list[ET.Element]:
    """A bay worker's test suites, named for the bay; their run id (the plugin's suite property) is the run's."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return []
    suites = [root] if root.tag == "testsuite" else list(root)
    for suite in suites:
        suite.set("name", f"{suite.get('name', 'pytest')}.{bay}")
        for prop in suite.findall("properties/property"):
            if prop.get("name") == "phonebench.run_id":
                prop.set("value", run_id)
    return suites
