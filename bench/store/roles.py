"""PostgreSQL roles for a shared results store (docs/results.md): the schema's owner migrates it;
the stations write through a role that may INSERT and SELECT every table but UPDATE only the rows
that grow while they are recorded (runs, their DUTs and instruments, acceptance attempts, the
shared station and unit rows) and DELETE nothing. Written records are refused to every role by
the triggers of migration 0007 as well; `bench store verify` finds what an owner did past them."""
from __future__ import annotations

import re

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from . import db

WRITER = "phonebench_writer"
# Rows a recording run updates: lifecycle columns (the triggers keep a complete run's content).
UPDATABLE = ("runs", "run_duts", "run_instruments", "acceptance_attempts", "stations", "dut_units",
             "instrument_units")
_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def check_role(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise db.StoreError(f"role name {name!r} is not a plain PostgreSQL name",
                            hint="use lower-case letters, digits and _ (e.g. phonebench_writer)")
    return name


def roles_sql(writer: str = WRITER, login: str | None = None) -> list[str]:
    """The statements that set up (or reset) the writer role; idempotent. Run as the schema's owner."""
    writer = check_role(writer)
    out = [f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{writer}') THEN "
           f"CREATE ROLE {writer} NOLOGIN; END IF; END $$",
           f"GRANT USAGE ON SCHEMA public TO {writer}",
           f"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {writer}",
           f"GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA public TO {writer}",
           f"REVOKE INSERT ON {db.VERSION_TABLE} FROM {writer}",  # migrating is the owner's
           f"GRANT UPDATE ON {', '.join(UPDATABLE)} TO {writer}",
           f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {writer}"]
    if login is not None:
        login = check_role(login)
        out.append(f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{login}') THEN "
                   f"CREATE ROLE {login} LOGIN; END IF; END $$")
        out.append(f"GRANT {writer} TO {login}")
    return out


def apply_roles(url: str, writer: str = WRITER, login: str | None = None) -> list[str]:
    """Run roles_sql() on the PostgreSQL store at `url` (its owner's URL); returns what ran."""
    if make_url(db.engine_url(url)).get_backend_name() != "postgresql":
        raise db.StoreError(f"results store {db.describe(url)} is not PostgreSQL: roles are PostgreSQL's",
                            hint="on SQLite the triggers refuse edits and the file's permissions say who writes")
    statements = roles_sql(writer, login)
    engine = db.create_store_engine(url)
    try:
        with engine.begin() as conn:
            for statement in statements:
                conn.execute(text(statement))
    except DBAPIError as exc:
        raise db.database_error(exc, url) from None
    finally:
        engine.dispose()
    return statements
