"""`bench store verify`: walk a store's hash chain (chain.py) and recompute every record from its
rows. Names the first entry or record that does not match: an edited row or entry, a deleted one,
entries out of order, a record written past the bench (no entry). Reads only."""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, select
from sqlalchemy.exc import DBAPIError

from phonebench.core.dburl import to_url
from . import chain, db
from .amend import first_difference

log = logging.getLogger(__name__)

_SHOWN = 200  # characters of a difference shown (the rows may hold anything: bounded)


@dataclass(frozen=True)
class Problem:
    """One record or entry that does not match."""

    table: str
    record_id: int | None
    run_id: str | None
    what: str
    entry: int | None = None  # the chain entry it was found at (None: a row with no entry)
    label: str | None = None  # what a person calls the record (a test's nodeid, a certificate)

    def __str__(self) -> str:
        where = f"{self.table} id {self.record_id}" if self.record_id is not None else self.table
        names = [f"run {self.run_id}"] if self.run_id else []
        if self.label and self.label != self.run_id:
            names.append(self.label)
        run = f" ({_bounded(', '.join(names))})" if names else ""
        at = f" [chain entry {self.entry}]" if self.entry is not None else ""
        return f"{where}{run}{at}: {_bounded(self.what)}"


@dataclass
class Verified:
    entries: int
    records: int
    head: str  # the digest of the newest entry: note it in the lab log to anchor the chain
    problems: list[Problem] = field(default_factory=list)

    @property
    def intact(self) -> bool:
        return not self.problems


def _bounded(text: str) -> str:
    text = text.encode("unicode_escape").decode("ascii")  # rows may hold control characters: escaped
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


def verify_store(url: str) -> Verified:
    """Verify the store at `url` or SQLite path (already opened with open_store: migrated, ours)."""
    url = to_url(url)
    engine = db.create_store_engine(url)
    try:
        with engine.connect() as conn:
            return verify_connection(conn)
    except DBAPIError as exc:
        raise db.database_error(exc, url) from None
    finally:
        engine.dispose()


def verify_connection(conn: Connection) -> Verified:
    t = chain.tables(conn)
    ledger = t["record_chain"]
    problems: list[Problem] = []
    # each record's newest entry: id, content digest, run, label (the content itself is read only
    # for a record that differs: a large store's copies do not fit in memory)
    latest: dict[tuple[str, int], tuple[int, str, str | None, str | None]] = {}
    prev, expected_id, count = chain.GENESIS, 1, 0
    query = select(ledger).order_by(ledger.c.id)
    for e in conn.execution_options(yield_per=1000).execute(query).mappings():
        count += 1
        table, pk, run_id = e["record_table"], e["record_pk"], e["run_id"]
        if e["id"] != expected_id:
            problems.append(Problem("record_chain", e["id"], run_id, f"entry {expected_id} is missing (the chain "
                                    f"jumps to {e['id']}): entries were deleted", e["id"]))
        if e["prev_digest"] != prev:
            problems.append(Problem("record_chain", e["id"], run_id, "does not follow the entry before it (its "
                                    "previous digest differs): entries were removed, reordered or rewritten", e["id"]))
        if chain.sha256(e["content"]) != e["content_digest"]:
            problems.append(Problem("record_chain", e["id"], run_id, f"the copy of {table} id {pk} was edited (its "
                                    "content no longer has its digest)", e["id"]))
        entry = chain.Entry(table, pk, e["content"], action=e["action"], run_id=run_id, label=e["label"],
                            supersedes=e["supersedes"], by=e["by"], reason=e["reason"])
        if chain.entry_digest(e["prev_digest"], e["id"], entry, e["recorded"], e["content_digest"]) != e["digest"]:
            problems.append(Problem("record_chain", e["id"], run_id, "the entry was edited (its digest does not "
                                    "match what it says)", e["id"]))
        latest[(table, pk)] = (e["id"], e["content_digest"], run_id, e["label"])
        prev, expected_id = e["digest"], e["id"] + 1
    records = 0
    for table in chain.RECORD_TABLES:
        pks = [r[0] for r in conn.execute(select(t[table].c.id).order_by(t[table].c.id))]
        records += len(pks)
        chained = {pk for (tab, pk) in latest if tab == table}
        for start in range(0, len(pks), 500):
            found = chain.contents(conn, table, pks[start:start + 500], t)
            for pk, content in found.items():
                text = chain.dumps(content)
                known = latest.get((table, pk))
                if known is None:
                    problems.append(Problem(table, pk, _run_of(content), "is not in the chain: written past the "
                                            "bench, or its entry was removed"))
                    continue
                entry_id, digest, run_id, label = known
                if chain.sha256(text) != digest:
                    copy = conn.execute(select(ledger.c.content).where(ledger.c.id == entry_id)).scalar() or ""
                    problems.append(Problem(table, pk, run_id, _what_differs(copy, text), entry_id, label))
        for pk in sorted(chained - set(pks)):
            entry_id, _, run_id, label = latest[(table, pk)]
            problems.append(Problem(table, pk, run_id, "was deleted (the chain has it, the table does not)", entry_id,
                                    label))
    problems.sort(key=lambda p: (p.entry is None, p.entry or 0))
    return Verified(entries=count, records=records, head=prev, problems=problems)


def _run_of(content: dict[str, Any]) -> str | None:
    run = content.get("run")
    return run.get("run_id") if isinstance(run, dict) else content.get("run_id")


def _what_differs(chained: str, current: str) -> str:
    try:
        difference = first_difference(json.loads(chained), json.loads(current), "", ("chained", "now"))
    except ValueError:
        difference = None
    return f"differs from its chained record: {difference or 'its content changed'}"


def head_in_chain(url: str, digest: str) -> bool:
    """Whether an entry of the store's chain has this digest (a head noted earlier)."""
    url = to_url(url)
    engine = db.create_store_engine(url)
    try:
        with engine.connect() as conn:
            ledger = chain.tables(conn)["record_chain"]
            return conn.execute(select(ledger.c.id).where(ledger.c.digest == digest.strip().lower())).first() is not None
    except DBAPIError as exc:
        raise db.database_error(exc, url) from None
    finally:
        engine.dispose()
