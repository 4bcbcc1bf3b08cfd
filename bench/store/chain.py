"""The store's hash chain (issue 48): every record the store keeps as evidence has entries in one
append-only ledger, `record_chain`, each naming the record (table, id, run), a copy of its content
in canonical JSON, that content's SHA-256, and a digest over all of it and the previous entry's
digest. `bench store verify` (verify.py) recomputes every record's content from its rows and walks
the chain: an edit, a deletion or a reorder of rows or entries is named; only a rewrite of the
whole chain by someone holding the database is not (docs/security/store-chain.md).

Records: a run's header (runs row with its run_duts and run_instruments: an entry each time its
content grows while it records, then none once final), a test (tests row with its measurements and
raw_refs), a calibration record, an acceptance attempt (an entry per change while it runs, and for
its disposition), an accepted build. Shared lookup rows (stations, dut_units, instrument_units)
are not records: each run keeps what they said in its own rows.

Entries are appended under one lock per store, so concurrent writers still make one chain: SQLite
writers begin IMMEDIATE (db.writer), PostgreSQL writers take a transaction-level advisory lock
before they read the head; the entry ids are assigned under that lock, so insertion order is the
chain order.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from sqlalchemy import Connection, Table, select

GENESIS = "0" * 64  # the "previous digest" of a store's first entry
CHAIN_LOCK_KEY = 7201948  # pg_advisory_xact_lock key of the chain head (db._lock_schema uses 7201946)

# Columns of a runs row that say where and by whom it is being written, not what was measured:
# they change while a run records (heartbeat, recorder, a moved folder) and are not content.
RUN_VOLATILE = frozenset({"updated", "recorder_host", "recorder_pid", "run_dir"})
ATTEMPT_VOLATILE = frozenset({"recorder_host", "recorder_pid"})

RECORD_TABLES = ("runs", "tests", "calibration_records", "acceptance_attempts", "accepted_builds")


def canonical(value: Any) -> Any:
    """A value as plain JSON data, the same on SQLite and PostgreSQL: times as ISO text, floats
    that JSON cannot hold (NaN, infinities) as tagged text, mappings with string keys."""
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return f"float:{value!r}"
    if isinstance(value, Mapping):
        return {str(k): canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    return value


def dumps(value: Any) -> str:
    """Canonical JSON text: sorted keys, no spaces, ASCII only."""
    return json.dumps(canonical(value), sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def row_content(row: Mapping[Any, Any], volatile: frozenset[str] = frozenset()) -> dict[str, Any]:
    """A row's content: every column but the volatile ones, NULLs left out (so a column a later
    migration adds, NULL in old rows, does not change their digests)."""
    return {k: v for k, v in row.items() if v is not None and k not in volatile}


# --- record contents, read back from the database (what verify recomputes) ---------------------
def tables(conn: Connection) -> dict[str, Table]:
    from .models import Base

    return dict(Base.metadata.tables)


def run_contents(conn: Connection, run_pks: Sequence[int], t: Mapping[str, Table]) -> dict[int, dict[str, Any]]:
    """Each run header's content: the runs row, its DUTs and instruments as the run saw them."""
    runs, duts, instruments = t["runs"], t["run_duts"], t["run_instruments"]
    out: dict[int, dict[str, Any]] = {}
    for chunk in _chunks(run_pks):
        for row in conn.execute(select(runs).where(runs.c.id.in_(chunk))).mappings():
            out[row["id"]] = {"run": row_content(row, RUN_VOLATILE), "duts": [], "instruments": []}
        for row in conn.execute(select(duts).where(duts.c.run_pk.in_(chunk)).order_by(duts.c.id)).mappings():
            out[row["run_pk"]]["duts"].append(row_content(row))
        for row in conn.execute(select(instruments).where(instruments.c.run_pk.in_(chunk))
                                .order_by(instruments.c.id)).mappings():
            out[row["run_pk"]]["instruments"].append(row_content(row))
    return out


def test_contents(conn: Connection, test_pks: Sequence[int], t: Mapping[str, Table]) -> dict[int, dict[str, Any]]:
    """Each test's content: the tests row, its verdicts (measurements), each with its raw files."""
    tests, meas, raw = t["tests"], t["measurements"], t["raw_refs"]
    out: dict[int, dict[str, Any]] = {}
    for chunk in _chunks(test_pks):
        for row in conn.execute(select(tests).where(tests.c.id.in_(chunk))).mappings():
            out[row["id"]] = {"test": row_content(row), "verdicts": []}
        by_pk: dict[int, dict[str, Any]] = {}
        for row in conn.execute(select(meas).where(meas.c.test_pk.in_(chunk)).order_by(meas.c.id)).mappings():
            verdict = by_pk[row["id"]] = {"measurement": row_content(row), "raw": []}
            out[row["test_pk"]]["verdicts"].append(verdict)
        if by_pk:
            for row in conn.execute(select(raw).join(meas, raw.c.measurement_pk == meas.c.id)
                                    .where(meas.c.test_pk.in_(chunk)).order_by(raw.c.id)).mappings():
                by_pk[row["measurement_pk"]]["raw"].append(row_content(row))
    return out


def plain_contents(conn: Connection, table: str, pks: Sequence[int] | None, t: Mapping[str, Table],
                   ) -> dict[int, dict[str, Any]]:
    """Rows that are records by themselves (calibration, attempts, accepted builds); all if pks is None."""
    tab = t[table]
    volatile = ATTEMPT_VOLATILE if table == "acceptance_attempts" else frozenset()
    out = {}
    chunks: Iterable[Sequence[int] | None] = [None] if pks is None else _chunks(pks)
    for chunk in chunks:
        query = select(tab) if chunk is None else select(tab).where(tab.c.id.in_(chunk))
        for row in conn.execute(query).mappings():
            out[row["id"]] = row_content(row, volatile)
    return out


def contents(conn: Connection, table: str, pks: Sequence[int], t: Mapping[str, Table] | None = None,
             ) -> dict[int, dict[str, Any]]:
    t = t if t is not None else tables(conn)
    if table == "runs":
        return run_contents(conn, pks, t)
    if table == "tests":
        return test_contents(conn, pks, t)
    return plain_contents(conn, table, pks, t)


def _chunks(pks: Sequence[int], size: int = 500) -> Iterable[Sequence[int]]:
    pks = list(pks)
    for start in range(0, len(pks), size):
        yield pks[start:start + size]


# --- the ledger ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    """One ledger entry to append (its id, previous digest and digest are set under the lock)."""

    table: str
    record_pk: int
    content: str  # canonical JSON of the record as stored
    action: str = "insert"  # insert | state (a running record grew) | amend | migrate
    run_id: str | None = None
    label: str | None = None  # what a person calls it: a test's nodeid, a certificate, a serial
    supersedes: int | None = None  # the id (same table) of the record an amendment replaces
    by: str | None = None  # who: for amendments and dispositions
    reason: str | None = None  # why


def entry_digest(prev: str, entry_id: int, e: Entry, recorded: dt.datetime, content_digest: str) -> str:
    """The digest of an entry: everything it says and the digest of the one before it."""
    return sha256(dumps([prev, entry_id, e.table, e.record_pk, e.run_id, e.label, e.action, e.supersedes, e.by,
                         e.reason, recorded.isoformat(), content_digest]))


def lock_head(conn: Connection) -> None:
    """Hold the chain head until this transaction ends (SQLite: the IMMEDIATE write lock already does)."""
    if conn.dialect.name == "postgresql":
        from sqlalchemy import text

        conn.execute(text(f"SELECT pg_advisory_xact_lock({CHAIN_LOCK_KEY})"))


def head(conn: Connection, chain: Table) -> tuple[int, str]:
    row = conn.execute(select(chain.c.id, chain.c.digest).order_by(chain.c.id.desc()).limit(1)).first()
    return (0, GENESIS) if row is None else (int(row[0]), str(row[1]))


def append(conn: Connection, entries: Sequence[Entry], chain: Table | None = None,
           now: dt.datetime | None = None) -> str:
    """Append entries at the head, in order, inside the caller's (writing) transaction; returns the
    new head digest."""
    if chain is None:
        chain = tables(conn)["record_chain"]
    lock_head(conn)
    last_id, prev = head(conn, chain)
    if not entries:
        return prev
    recorded = (now or dt.datetime.now(dt.timezone.utc)).replace(tzinfo=None, microsecond=0)
    rows = []
    for offset, e in enumerate(entries, 1):
        content_digest = sha256(e.content)
        digest = entry_digest(prev, last_id + offset, e, recorded, content_digest)
        rows.append({"id": last_id + offset, "record_table": e.table, "record_pk": e.record_pk, "run_id": e.run_id,
                     "label": e.label, "action": e.action, "supersedes": e.supersedes, "by": e.by,
                     "reason": e.reason, "recorded": recorded, "content": e.content,
                     "content_digest": content_digest, "prev_digest": prev, "digest": digest})
        prev = digest
    conn.execute(chain.insert(), rows)
    return prev


def latest_content_digest(conn: Connection, table: str, record_pk: int, chain: Table | None = None) -> str | None:
    """The content digest of a record's newest entry, None if it has none yet."""
    if chain is None:
        chain = tables(conn)["record_chain"]
    return conn.execute(select(chain.c.content_digest)
                        .where(chain.c.record_table == table, chain.c.record_pk == record_pk)
                        .order_by(chain.c.id.desc()).limit(1)).scalar()


def record_entries(conn: Connection, table: str, pks: Sequence[int], *, action: str = "insert",
                   run_id: str | None = None, labels: Mapping[int, str | None] | None = None,
                   supersedes: int | None = None, by: str | None = None, reason: str | None = None,
                   only_changed: bool = False) -> list[Entry]:
    """Entries for records just written (read back from the database, as verify will read them).
    only_changed: skip a record whose newest entry already has this content (a running record
    that did not change)."""
    t = tables(conn)
    found = contents(conn, table, pks, t)
    out = []
    for pk in pks:
        text_ = dumps(found[pk])
        if only_changed and latest_content_digest(conn, table, pk, t["record_chain"]) == sha256(text_):
            continue
        out.append(Entry(table, pk, text_, action=action, run_id=run_id, label=(labels or {}).get(pk),
                         supersedes=supersedes, by=by, reason=reason))
    return out


def chain_records(conn: Connection, table: str, pks: Sequence[int], **options: Any) -> str:
    """record_entries() appended: the one call a writer makes after its rows are flushed."""
    only_changed = bool(options.get("only_changed"))
    entries = record_entries(conn, table, pks, **options)
    if only_changed and not entries:
        return ""
    return append(conn, entries)
