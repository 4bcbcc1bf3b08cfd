"""What an import may and may not change in a stored run (issue 48): a stored run is evidence. A
results.json that only adds tests to it (the store was behind: a sink that lost its database, a
killed run) completes it; one that says anything else about what is stored is refused, unless it
is an amendment (a new version naming who and why, the original kept: store.Store.sync_run)."""
from __future__ import annotations

import datetime as dt
from typing import Any

from phonebench.core.verdict import VERDICT_FIELDS
from .db import StoreError
from .models import MEASUREMENT_FIELDS, TEST_FIELDS

IDENTITY = ("started", "code_version", "station", "duts", "instruments")  # what the run was run on
LIFECYCLE = ("status", "finished", "summary", "lab_time_s")  # what grows until the run is final
_SHOWN = 60  # characters of a value shown in a message (values come from files: bounded)


class ChangedRun(StoreError):
    """An import whose results.json differs from what the store holds of that run."""

    def __init__(self, run_id: str, difference: str) -> None:
        super().__init__(
            f"run {run_id}: results.json differs from the stored run ({difference}); nothing was changed",
            hint="a stored run is evidence and an import never changes it. If this is a correction, store it as "
                 "an amendment: `bench store-import FOLDER --amend --by NAME --reason TEXT` (the original stays "
                 "readable); otherwise restore the folder's results.json")


def _stamp(text: Any) -> dt.datetime | None:
    if not text:
        return None
    try:
        stamp = dt.datetime.fromisoformat(str(text))
    except ValueError:
        return None
    stamp = stamp.astimezone(dt.timezone.utc).replace(tzinfo=None) if stamp.tzinfo else stamp
    return stamp.replace(microsecond=0)  # the store's record of a run's times is to the second (store.iso)


def _verdict(v: dict[str, Any]) -> dict[str, Any]:
    # what the store keeps of a verdict (store._add_test): its columns, detail, raw files and extra
    return {**{name: v.get(name) for name in MEASUREMENT_FIELDS}, "detail": v.get("detail") or "",
            "raw": list(v.get("raw") or []), "extra": v.get("extra") or {}}


def _test(t: dict[str, Any]) -> dict[str, Any]:
    return {**{name: t.get(name) for name in TEST_FIELDS}, "message": t.get("message") or "",
            "markers": list(t.get("markers") or []), "verdicts": [_verdict(v) for v in t.get("verdicts") or []]}


def _instrument(r: dict[str, Any]) -> dict[str, Any]:
    return {"family": r.get("family"), "address": r.get("address"), "attached_to": r.get("attached_to"),
            "identity": r.get("identity") or {}, "calibration": r.get("calibration")}


def _header(data: dict[str, Any]) -> dict[str, Any]:
    return {"started": _stamp(data.get("started")), "finished": _stamp(data.get("finished")),
            "code_version": data.get("code_version"), "station": data.get("station") or {},
            "duts": data.get("duts") or {},
            "instruments": {k: _instrument(v) for k, v in (data.get("instruments") or {}).items()},
            "status": data.get("status") or "running", "summary": data.get("summary") or {},
            "lab_time_s": data.get("lab_time_s") or {}}


def first_difference(stored: Any, given: Any, path: str,
                     names: tuple[str, str] = ("stored", "results.json says")) -> str | None:
    """Where two JSON-like values first differ, and how (numbers compare by value: 5 == 5.0)."""
    if isinstance(stored, dict) and isinstance(given, dict):
        for key in sorted(set(stored) | set(given), key=str):
            found = first_difference(stored.get(key), given.get(key), f"{path}.{key}".lstrip("."), names)
            if found:
                return found
        return None
    if isinstance(stored, list) and isinstance(given, list):
        if len(stored) != len(given):
            return f"{path}: {names[0]} {len(stored)} items, {names[1]} {len(given)}"
        for index, (a, b) in enumerate(zip(stored, given)):
            found = first_difference(a, b, f"{path}[{index}]", names)
            if found:
                return found
        return None
    same = stored is given if isinstance(stored, bool) or isinstance(given, bool) else stored == given
    if same:
        return None
    return f"{path}: {names[0]} {_show(stored)}, {names[1]} {_show(given)}"


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


def run_difference(stored: dict[str, Any], data: dict[str, Any], strict: bool = False) -> str | None:
    """How `data` (a results.json record) changes the stored run (`stored`: store._run_record with
    its stored status), or None when it only repeats it or adds what the store lacked.

    strict: any difference counts, added tests included (is there anything to amend?)."""
    stored_tests = stored.get("tests") or []
    given_tests = data.get("tests") or []
    if len(given_tests) < len(stored_tests):
        return f"tests: the store has {len(stored_tests)}, results.json {len(given_tests)}"
    for index, (mine, theirs) in enumerate(zip(stored_tests, given_tests)):
        found = first_difference(_test(mine), _test(theirs), f"tests[{index}] {mine.get('nodeid')}")
        if found:
            return found
    adds = len(given_tests) > len(stored_tests)
    if strict and adds:
        return f"tests: results.json adds {len(given_tests) - len(stored_tests)}"
    if stored.get("status") == "running" and not strict:
        return None  # a run still recording (or killed while it did) grows: its recorder's record says how
    mine, theirs = _header(stored), _header(data)
    free = set(LIFECYCLE) if adds and stored.get("status") != "complete" and not strict else set()
    for key in (*IDENTITY, *LIFECYCLE):
        if key in free:
            continue
        found = first_difference(mine[key], theirs[key], key)
        if found:
            return found
    return None
