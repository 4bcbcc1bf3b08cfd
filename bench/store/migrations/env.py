"""Alembic environment for the results store. phonebench.bench.store.db runs migrations programmatically,
passing its open connection in config.attributes["connection"]; the `alembic` command line (see
docs/results.md) gets the URL from PHONEBENCH_DATABASE instead."""
from __future__ import annotations

import os

from alembic import context
from sqlalchemy import create_engine

from phonebench.bench.store.models import Base

VERSION_TABLE = "phonebench_schema"


def _run(connection) -> None:
    context.configure(connection=connection, target_metadata=Base.metadata, version_table=VERSION_TABLE,
                      render_as_batch=connection.dialect.name == "sqlite", compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


connection = context.config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    from phonebench.bench.store.db import engine_url

    url = os.environ.get("PHONEBENCH_DATABASE") or context.config.get_main_option("sqlalchemy.url")
    if not url:
        raise SystemExit("set PHONEBENCH_DATABASE to the store's URL (e.g. sqlite:///reports/results.sqlite)")
    engine = create_engine(engine_url(url))
    with engine.connect() as conn:
        _run(conn)
    engine.dispose()
