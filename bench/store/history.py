"""The store's memory for the nightly: accepted baselines per phone model, the runs of a build, and
one statistic's history across nights (docs/nightly.md)."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Iterable, Unpack

from sqlalchemy import Executable, Row, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from ..results.builds import phone_build, phone_model, run_builds, run_models
from ..results.trend import HistoryPoint
from . import chain, db
from .models import AcceptedBuild, Measurement, Run, RunDut
from .store import Store, current_runs, logical_run_id


@dataclass(frozen=True)
class Acceptance:
    model: str
    run_id: str
    build: str | None
    accepted: dt.datetime
    accepted_by: str | None
    note: str | None


def accept_build(store: Store, run_id: str, models: Iterable[str] = (), by: str | None = None,
                 note: str | None = None, now: dt.datetime | None = None) -> list[Acceptance]:
    """Accept `run_id` as the baseline of each of its phone models (or of `models` only).

    A run not complete, or without a phone of a named model, is refused (StoreError): a baseline
    must be a run whose every test finished."""
    stored = store.load_run(run_id)
    data = stored.data
    if data.get("status") != "complete":
        raise db.StoreError(f"run {run_id} is {data.get('status')}, not complete: it cannot be a baseline",
                            hint="accept a complete run (`bench runs` shows each run's status)")
    present = run_models(data)
    wanted = list(models) or sorted(present)
    missing = [m for m in wanted if m not in present]
    if missing:
        raise db.StoreError(f"run {run_id} has no phone of model {', '.join(missing)}",
                            hint=f"its models: {', '.join(sorted(present)) or 'none'}")
    stamp = (now or dt.datetime.now(dt.timezone.utc)).replace(tzinfo=None)
    made = [Acceptance(m, str(data["run_id"]), ", ".join(run_builds(data, m)) or None, stamp, by, note) for m in wanted]
    try:
        with Session(db.writer(store.engine)) as s, s.begin():
            rows = [AcceptedBuild(model=a.model, run_id=a.run_id, build=a.build, accepted=a.accepted,
                                  accepted_by=a.accepted_by, note=a.note) for a in made]
            s.add_all(rows)
            s.flush()
            chain.chain_records(s.connection(), "accepted_builds", [r.id for r in rows], run_id=str(data["run_id"]),
                                labels={r.id: r.model for r in rows}, by=by)
    except DBAPIError as exc:
        raise db.database_error(exc, store.url) from None
    return made


def accepted_baselines(store: Store) -> dict[str, Acceptance]:
    """Each phone model's newest acceptance."""
    a = AcceptedBuild
    rows = _rows(store, select(a.model, a.run_id, a.build, a.accepted, a.accepted_by, a.note).order_by(a.accepted, a.id))
    return {r[0]: Acceptance(*r) for r in rows}


def runs_of_build(store: Store, build: str, model: str | None = None) -> list[str]:
    """Complete runs in which some phone (of `model`, if given) ran `build`, newest first."""
    rows = _rows(store, select(Run.run_id, RunDut.name, RunDut.identity).join(RunDut, RunDut.run_pk == Run.id)
                 .where(RunDut.runtime_version == build, Run.status == "complete", current_runs())
                 .order_by(Run.started.desc(), Run.id.desc()))
    seen: list[str] = []
    for stored_id, dut, identity in rows:
        run_id = logical_run_id(stored_id)
        if run_id not in seen and (model is None or phone_model(identity, dut) == model):
            seen.append(run_id)
    return seen


def history(store: Store, names: Iterable[str] = (), models: Iterable[str] = (), since: dt.datetime | None = None,
            complete_only: bool = True) -> list[HistoryPoint]:
    """Every measured value of the named statistics (all, if none named) per phone and run, oldest first."""
    names, models = list(names), set(models)
    duts = {}
    dut_query = select(RunDut.run_pk, RunDut.name, RunDut.identity).join(Run, RunDut.run_pk == Run.id) \
        .where(current_runs())
    runs_query = select(Run.id, Run.run_id, Run.started, Run.status).where(current_runs())
    if since is not None:
        dut_query, runs_query = dut_query.where(Run.started >= since), runs_query.where(Run.started >= since)
    for run_pk, name, identity in _rows(store, dut_query):
        duts[(run_pk, name)] = (phone_model(identity, name), phone_build(identity))
    runs = {r[0]: r for r in _rows(store, runs_query) if not complete_only or r[3] == "complete"}
    query = select(Measurement.run_pk, Measurement.dut, Measurement.name, Measurement.statistic, Measurement.value,
                   Measurement.unit,
                   Measurement.comparator, Measurement.claim, Measurement.bound, Measurement.confidence,
                   Measurement.uncertainty, Measurement.extra).where(Measurement.value.is_not(None), Measurement.dut.is_not(None),
                                                  Measurement.evidence.in_(("measured", "corroborated")))
    if names:
        query = query.where(Measurement.name.in_(names))
    points = []
    for run_pk, dut, name, statistic, value, unit, comparator, claim, bound, confidence, uncertainty, extra \
            in _rows(store, query):
        run = runs.get(run_pk)
        model, build = duts.get((run_pk, dut), (dut, None))
        if run is None or (models and model not in models):
            continue
        room = ((extra or {}).get("ambient") or {}).get("mean_c")  # a thermal figure's room (bench/stats/ambient.py)
        points.append(HistoryPoint(logical_run_id(run[1]), run[2], dut, model, build, name, statistic, float(value),
                                   unit, comparator, claim, bound, confidence, uncertainty,
                                   float(room) if isinstance(room, (int, float)) else None))
    points.sort(key=lambda p: (p.started or dt.datetime.min, p.run_id, p.dut, p.name))
    return points


def _rows(store: Store, query: Executable) -> list[Row[Unpack[tuple[Any, ...]]]]:
    # Rows of any select, their columns untyped: the queries' filters (is_not(None)) narrow what the models declare
    try:
        with store.engine.connect() as conn:
            return list(conn.execute(query))
    except DBAPIError as exc:
        raise db.database_error(exc, store.url) from None
