"""Opening the results store: URL handling, refusing foreign or corrupt databases without touching
them, and migrating our own schema to the current revision."""
from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from phonebench.core.errors import BenchError

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
VERSION_TABLE = "phonebench_schema"  # alembic's version table, named so that it marks our databases
SQLITE_MAGIC = b"SQLite format 3\x00"
ENV_VAR = "PHONEBENCH_DATABASE"
SQLITE_LOCK_TIMEOUT_S = 30.0  # how long a write waits for another process's lock before it fails
DEFAULT_FILE = "results.sqlite"


class StoreError(BenchError):
    """The results database cannot be opened, is not ours, or refused a write."""


def resolve_database_url(configured: str | None = None, results_dir: str | Path = "reports") -> str:
    """The store to use: $PHONEBENCH_DATABASE, else the station's `database`, else
    <results_dir>/results.sqlite. A plain path means an SQLite file."""
    chosen = os.environ.get(ENV_VAR) or configured
    return to_url(chosen) if chosen else to_url(Path(results_dir) / DEFAULT_FILE)


def to_url(url_or_path: str | Path) -> str:
    text_ = str(url_or_path)
    if "://" in text_:
        return text_
    return f"sqlite:///{Path(text_).expanduser().resolve()}"


def engine_url(url: str) -> str:
    """SQLAlchemy URL with our driver: plain postgresql:// means psycopg 3."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def describe(url: str) -> str:
    """The URL with any password hidden, for messages and logs."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (SQLAlchemyError, ValueError):
        return "<unparsable database URL>"


def alembic_config(connection: Any = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def known_revisions() -> set[str]:
    return {s.revision for s in ScriptDirectory.from_config(alembic_config()).walk_revisions()}


def create_store_engine(url: str) -> Engine:
    try:
        parsed = make_url(engine_url(url))
    except (SQLAlchemyError, ValueError) as exc:
        raise StoreError(f"database URL {describe(url)!r} is not valid: {exc}",
                         hint='use a path, sqlite:///PATH or postgresql://user:password@host:port/dbname') from None
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        engine = create_engine(parsed, connect_args={"timeout": SQLITE_LOCK_TIMEOUT_S})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA journal_mode=WAL")  # readers (bench runs) never block the recording run
            cursor.execute("PRAGMA synchronous=NORMAL")  # a commit survives a killed process
            cursor.close()

        return engine
    if backend == "postgresql":
        return create_engine(parsed, pool_pre_ping=True, connect_args={"connect_timeout": 5})
    raise StoreError(f"database URL {describe(url)!r}: {backend} is not supported",
                     hint="use an SQLite file (a path or sqlite:///PATH) or postgresql://...")


def inspect_sqlite_file(path: Path) -> tuple[set[str], str | None]:
    """Table names and our schema revision of an SQLite file, read-only: a foreign or corrupt file
    must be refused before anything (even the journal mode) is written to it."""
    if not path.exists() or path.stat().st_size == 0:
        return set(), None
    hint = "point the store at another file ([station] database or PHONEBENCH_DATABASE); this one was not changed"
    try:
        with path.open("rb") as handle:
            head = handle.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise StoreError(f"results database {path} cannot be read: {exc}", hint=hint) from None
    if head != SQLITE_MAGIC:
        raise StoreError(f"results database {path} is not an SQLite database (corrupt or another kind of file)",
                         hint=hint)
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            current = None
            if VERSION_TABLE in tables:
                current = conn.execute(f"SELECT version_num FROM {VERSION_TABLE}").fetchone()
                current = current[0] if current else None
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"results database {path} is corrupt: {exc}", hint=hint) from None
    return tables, current


def inspect_database(engine: Engine, url: str) -> tuple[set[str], str | None]:
    try:
        with engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
            current = None
            if VERSION_TABLE in tables:
                current = conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()
    except DBAPIError as exc:
        raise database_error(exc, url) from None
    return tables, current


def prepare_schema(engine: Engine, url: str, tables: set[str], current: str | None) -> None:
    """Create the schema in an empty database, upgrade an older one of ours, refuse anything else."""
    where = describe(url)
    head = head_revision()
    if current == head:
        return
    if current is None and tables - {VERSION_TABLE}:
        sample = ", ".join(sorted(tables)[:5])
        raise StoreError(f"results database {where} is not a phonebench store (it has tables: {sample})",
                         hint="use a database of its own for phonebench results; nothing was written to this one")
    if current is not None and current not in known_revisions():
        raise StoreError(f"results database {where} has schema revision {current!r}, unknown to this "
                         f"phonebench (a newer version wrote it?)",
                         hint="upgrade phonebench, or use another database; nothing was changed")
    try:
        with engine.begin() as conn:
            _lock_schema(conn)  # another station may be creating the schema right now
            tables = set(inspect(conn).get_table_names())
            if VERSION_TABLE in tables:
                current = conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()
                if current == head:
                    return
            log.info("results store %s: migrating schema %s -> %s", where, current or "(empty)", head)
            command.upgrade(alembic_config(conn), "head")
    except DBAPIError as exc:
        raise database_error(exc, url) from None


def _lock_schema(conn: Any) -> None:
    """Serialize migrations between processes: an advisory lock on PostgreSQL, the write lock on SQLite."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(7201946)"))  # any constant, the same everywhere
    elif conn.dialect.name == "sqlite":
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def database_error(exc: DBAPIError, url: str) -> StoreError:
    """A driver error turned into a message naming the database and what to do."""
    parsed = make_url(engine_url(url))
    reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
    if parsed.get_backend_name() == "postgresql":
        return StoreError(f"cannot use PostgreSQL results store {describe(url)}: {reason}",
                          hint="is the server running and reachable, and the database created? "
                               "Runs still write results.json; import them later with `bench store-import`")
    if "locked" in reason.lower() or "busy" in reason.lower():
        return StoreError(f"results database {describe(url)} is locked by another process ({reason})",
                          hint="another bench or a viewer holds its write lock; runs still write results.json, "
                               "and `bench store-import RUN_FOLDER` adds them once the lock is gone")
    if "full" in reason.lower():
        return StoreError(f"results database {describe(url)}: disk full ({reason})",
                          hint="free space; what was committed before is intact")
    return StoreError(f"cannot use results database {describe(url)}: {reason}",
                      hint="check the file's permissions and free space")

