"""Opening the results store: URL handling, refusing foreign or corrupt databases without touching
them, and migrating our own schema to the current revision."""
from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.pool import ConnectionPoolEntry

from phonebench.core.dburl import ENV_VAR, password_of
from phonebench.core.errors import BenchError

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
VERSION_TABLE = "phonebench_schema"  # alembic's version table, named so that it marks our databases
SQLITE_LOCK_TIMEOUT_S = 30.0  # how long a write waits for another process's lock before it fails


class StoreError(BenchError):
    """The results database cannot be opened, is not ours, or refused a write."""


@contextlib.contextmanager
def password_in_environment(url: str | None) -> Iterator[None]:
    """While a run reads its store from station files the bench wrote (without the password, see
    phonebench.core.dburl), the whole URL is in $PHONEBENCH_DATABASE of this process and its
    children: the environment, which only this user's processes read, never a file or argv."""
    if password_of(url) is None or os.environ.get(ENV_VAR):
        yield
        return
    os.environ[ENV_VAR] = str(url)
    try:
        yield
    finally:
        os.environ.pop(ENV_VAR, None)


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


def alembic_config(connection: Connection | None = None) -> Config:
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
                         hint='use a path, sqlite:///PATH or postgresql://user@host:port/dbname (the password in ~/.pgpass)') from None
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        engine = create_engine(parsed, connect_args={"timeout": SQLITE_LOCK_TIMEOUT_S})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
            dbapi_conn.isolation_level = None  # the driver's own BEGIN off: ours is below
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA journal_mode=WAL")  # readers (bench runs) never block the recording run
            cursor.execute("PRAGMA synchronous=NORMAL")  # a commit survives a killed process
            cursor.close()

        @event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            # Many bench processes share one file. A deferred transaction that reads and then
            # writes cannot wait for another writer (SQLite answers SQLITE_BUSY at once, past the
            # busy timeout, to avoid a deadlock); a writing one (writer(engine)) takes the write
            # lock when it begins and so waits its turn, bounded by the timeout. Readers stay
            # deferred: under WAL they never wait for a writer.
            conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(_WRITES) else "BEGIN")

        return engine
    if backend == "postgresql":
        return create_engine(parsed, pool_pre_ping=True, connect_args={"connect_timeout": 5})
    raise StoreError(f"database URL {describe(url)!r}: {backend} is not supported",
                     hint="use an SQLite file (a path or sqlite:///PATH) or postgresql://...")


_WRITES = "phonebench_writes"


def writer(engine: Engine) -> Engine:
    """The engine for a transaction that writes: on SQLite it begins IMMEDIATE (see above)."""
    return engine.execution_options(**{_WRITES: True})


def inspect_sqlite_file(path: Path) -> tuple[set[str], str | None]:
    """Table names and our schema revision of an SQLite file, read-only: a foreign or corrupt file
    must be refused before anything (even the journal mode) is written to it."""
    if not path.exists() or path.stat().st_size == 0:
        return set(), None
    hint = "point the store at another file ([station] database or PHONEBENCH_DATABASE); this one was not changed"
    # Never open the file itself (to read its magic bytes, say): closing any descriptor of a
    # database file drops every POSIX lock this process holds on it, those of its own open SQLite
    # connections included, and a concurrent writer then corrupts the file. SQLite tells a file
    # that is not a database itself (NOTADB).
    deadline = time.monotonic() + SQLITE_LOCK_TIMEOUT_S
    while True:
        try:
            return _read_schema(path)
        except sqlite3.DatabaseError as exc:
            if _sqlite_code(exc) == _NOTADB:
                raise StoreError(f"results database {path} is not an SQLite database (corrupt or another kind of "
                                 "file)", hint=hint) from None
            if is_corrupt(exc):
                raise StoreError(f"results database {path} is corrupt: {exc}", hint=hint) from None
            if not is_transient(exc) or time.monotonic() >= deadline:
                raise StoreError(f"results database {path} could not be read for {SQLITE_LOCK_TIMEOUT_S:g} s: {exc}",
                                 hint="another process holds it, or the disk refuses reads; the file was not "
                                      "changed") from None
            time.sleep(_TRANSIENT_RETRY_S)


def _read_schema(path: Path) -> tuple[set[str], str | None]:
    # Opened read-write but only read: a read-only (mode=ro) open of a WAL database fails with
    # "disk I/O error" while another connection checkpoints or closes the WAL, which is not
    # corruption. Reading writes nothing to a foreign file (not even its journal mode).
    conn = sqlite3.connect(str(path), timeout=SQLITE_LOCK_TIMEOUT_S)
    try:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        current = None
        if VERSION_TABLE in tables:
            row = conn.execute(f"SELECT version_num FROM {VERSION_TABLE}").fetchone()
            current = row[0] if row else None
        return tables, current
    finally:
        conn.close()


# SQLite result codes (primary, the low byte of an extended code) that say what a failure is.
_NOTADB = 26
_CORRUPT_CODES = {11, _NOTADB}  # SQLITE_CORRUPT, SQLITE_NOTADB: the file is not a sound database
_TRANSIENT_CODES = {5, 6, 10}  # SQLITE_BUSY, SQLITE_LOCKED, SQLITE_IOERR: another process, a checkpoint
_TRANSIENT_RETRY_S = 0.05


def _sqlite_code(exc: BaseException) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def is_corrupt(exc: BaseException) -> bool:
    """Only SQLite's own verdict makes a file corrupt: never a busy, locked or I/O error."""
    code = _sqlite_code(exc)
    if code is not None:
        return code in _CORRUPT_CODES
    text_ = str(exc).lower()
    return "malformed" in text_ or "not a database" in text_


def is_transient(exc: BaseException) -> bool:
    """A failure another process causes and that passes: busy, locked, an I/O error while a WAL is
    checkpointed. Waited out (bounded) rather than reported."""
    code = _sqlite_code(exc)
    if code is not None:
        return code in _TRANSIENT_CODES
    text_ = str(exc).lower()
    return "locked" in text_ or "busy" in text_ or "disk i/o error" in text_


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
        with writer(engine).begin() as conn:
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


def _lock_schema(conn: Connection) -> None:
    """Serialize migrations between processes: an advisory lock on PostgreSQL, the write lock on SQLite."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(7201946)"))  # any constant, the same everywhere
    # SQLite: a writer(engine) transaction begins IMMEDIATE, so this one holds the write lock.


def database_error(exc: DBAPIError, url: str) -> StoreError:
    """A driver error turned into a message naming the database and what to do."""
    parsed = make_url(engine_url(url))
    reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
    if parsed.get_backend_name() == "postgresql":
        return StoreError(f"cannot use PostgreSQL results store {describe(url)}: {reason}",
                          hint="is the server running and reachable, and the database created? "
                               "Runs still write results.json; import them later with `bench store-import`")
    if is_transient(exc.orig) if exc.orig is not None else ("locked" in reason.lower() or "busy" in reason.lower()):
        return StoreError(f"results database {describe(url)} is locked by another process ({reason})",
                          hint="another bench or a viewer holds its write lock; runs still write results.json, "
                               "and `bench store-import RUN_FOLDER` adds them once the lock is gone")
    if "full" in reason.lower():
        return StoreError(f"results database {describe(url)}: disk full ({reason})",
                          hint="free space; what was committed before is intact")
    return StoreError(f"cannot use results database {describe(url)}: {reason}",
                      hint="check the file's permissions and free space")

