"""The results store: every run, DUT, instrument, test and measurement, in SQLite (default) or
PostgreSQL, through SQLAlchemy; schema migrations with Alembic (migrations/)."""
from phonebench.core.dburl import resolve_database_url  # the rule is the core's: a run request names its store
from .db import StoreError
from .sink import StoreSink
from .store import RunInfo, Store, StoredRun, SyncResult, open_store

__all__ = ["RunInfo", "Store", "StoreError", "StoreSink", "StoredRun", "SyncResult", "open_store",
           "resolve_database_url"]
