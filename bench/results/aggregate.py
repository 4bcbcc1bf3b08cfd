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

from phonebench.core.files import write_atomically
from phonebench.core.records import RunRecord, TestRecord
from .run_record import code_version

log = logging.getLogger(__name__)

BAYS_FOLDER = "bays"


@dataclass
class BayOutcome:
    bay: str
    exit_code: int | None  # None: never started
    wall_s: float = 0.0


def bay_folder(run_dir: Path, bay: str) -> Path:
    return run_dir / BAYS_FOLDER / bay


def merge_bays(run_dir: Path, station: dict[str, Any], outcomes: list[BayOutcome]) -> dict[str, Any]:
    """Write <run_dir>/results.json and junit.xml from the bays' folders; returns the run's data."""
    record = RunRecord(run_id=run_dir.name, started="", station={**station, "bays": {}}, code_version=code_version())
    problems: list[str] = []
    suites: list[ET.Element] = []
    for outcome in outcomes:
        folder = bay_folder(run_dir, outcome.bay)
        data = _read(folder / "results.json")
        if data is None:
            problems.append(f"bay {outcome.bay}: no results (worker exit code {outcome.exit_code}); "
                            f"see {folder / 'worker.log'}")
            continue
        bay = RunRecord.from_dict(data)
        record.started = min(filter(None, [record.started, bay.started]), default="")
        record.finished = max(filter(None, [record.finished or "", bay.finished or ""]), default=None)
        record.station["bays"][outcome.bay] = {**bay.station, "status": bay.status, "exit_code": outcome.exit_code,
                                               "wall_s": round(outcome.wall_s, 2)}
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
    write_atomically(run_dir / "results.json", json.dumps(data, indent=1))
    junit = ET.Element("testsuites")
    junit.extend(suites)
    write_atomically(run_dir / "junit.xml", ET.tostring(junit, encoding="unicode"))
    return data


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

    def fix(path: Any) -> Any:
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
