"""Records a lab can defend (issue 48): the append-only ledger `record_chain` (a hash chain over
every run header, test, calibration record, acceptance attempt and accepted build, see
bench/store/chain.py), amendment columns on runs and calibration records (supersedes, by, reason),
and triggers that refuse UPDATE and DELETE of written records on SQLite and PostgreSQL.

Existing rows are chained here, in table order (runs, tests, calibration records, acceptance
attempts, accepted builds; each by id), with action "migrate": the chain vouches for them from this
migration on, not for what they were before it. Nothing existing is changed.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-06
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

AMEND_COLUMNS = (("supersedes", sa.Integer()), ("amended_by", sa.Text()), ("amend_reason", sa.Text()))
MIGRATED = ("chained by migration 0007: this record was written before the store had a chain; "
            "the chain vouches for it from the migration on")

# Records no one may change or remove once written (UPDATE and DELETE refused).
FROZEN = ("tests", "measurements", "raw_refs", "calibration_records", "accepted_builds", "record_chain")
# Records that grow while they are being recorded: DELETE refused, UPDATE of content once final.
RUN_CONTENT = ("run_id", "station_id", "started", "finished", "status", "code_version", "station_record",
               "summary", "supersedes", "amended_by", "amend_reason")
ATTEMPT_CONTENT = ("serial", "attempt", "read_serial", "station_id", "run_id", "batch", "outcome", "reason",
                   "failing", "retest_of", "started", "finished", "cycle_s", "overhead_s", "operator")


def upgrade() -> None:
    op.create_table(
        "record_chain",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("record_table", sa.String(40), nullable=False),
        sa.Column("record_pk", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Text()),
        sa.Column("label", sa.Text()),
        sa.Column("action", sa.String(20), nullable=False),
        sa.Column("supersedes", sa.Integer()),
        sa.Column("by", sa.Text()),
        sa.Column("reason", sa.Text()),
        sa.Column("recorded", sa.DateTime(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("content_digest", sa.String(64), nullable=False),
        sa.Column("prev_digest", sa.String(64), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False, unique=True),
    )
    op.create_index("ix_record_chain_record", "record_chain", ["record_table", "record_pk"])
    for table in ("runs", "calibration_records"):
        with op.batch_alter_table(table) as batch:
            for name, kind in AMEND_COLUMNS:
                batch.add_column(sa.Column(name, kind))
        op.create_index(f"ix_{table}_supersedes", table, ["supersedes"])  # readers ask "superseded?" per row
    conn = op.get_bind()
    _chain_existing(conn)
    for statement in trigger_statements(conn.dialect.name):
        op.execute(statement)


def downgrade() -> None:
    conn = op.get_bind()
    for statement in drop_trigger_statements(conn.dialect.name):
        op.execute(statement)
    for table in ("runs", "calibration_records"):
        op.drop_index(f"ix_{table}_supersedes", table)
        with op.batch_alter_table(table) as batch:
            for name, _ in AMEND_COLUMNS:
                batch.drop_column(name)
    op.drop_index("ix_record_chain_record", "record_chain")
    op.drop_table("record_chain")


def _chain_existing(conn: sa.Connection) -> None:
    from phonebench.bench.store import chain

    meta = sa.MetaData()
    meta.reflect(conn)  # the tables as this revision has them (later revisions may add columns)
    t = dict(meta.tables)
    runs = {pk: run_id for pk, run_id in conn.execute(sa.select(t["runs"].c.id, t["runs"].c.run_id)
                                                      .order_by(t["runs"].c.id))}
    entries: list[chain.Entry] = []

    def add(table: str, pks: list[int], run_of: dict[int, str | None], labels: dict[int, str | None]) -> None:
        for start in range(0, len(pks), 500):
            part = pks[start:start + 500]
            found = chain.contents(conn, table, part, t)
            entries.extend(chain.Entry(table, pk, chain.dumps(found[pk]), action="migrate", run_id=run_of.get(pk),
                                       label=labels.get(pk), reason=MIGRATED) for pk in part)

    add("runs", list(runs), runs, {})
    tests = t["tests"]
    rows = conn.execute(sa.select(tests.c.id, tests.c.run_pk, tests.c.nodeid).order_by(tests.c.id)).all()
    add("tests", [r[0] for r in rows], {r[0]: runs.get(r[1]) for r in rows}, {r[0]: r[2] for r in rows})
    for table, label_column in (("calibration_records", "certificate"), ("acceptance_attempts", "serial"),
                                ("accepted_builds", "model")):
        tab = t[table]
        rows = conn.execute(sa.select(tab.c.id, tab.c.run_id, tab.c[label_column]).order_by(tab.c.id)).all()
        add(table, [r[0] for r in rows], {r[0]: r[1] for r in rows}, {r[0]: r[2] for r in rows})
    if entries:
        chain.append(conn, entries, t["record_chain"])


def trigger_statements(dialect: str) -> list[str]:
    """Triggers refusing UPDATE/DELETE of written records (the table owner can drop them: they keep
    the bench and its writer role honest, `bench store verify` finds what anyone else did)."""
    if dialect == "postgresql":
        out = ["""CREATE OR REPLACE FUNCTION phonebench_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'phonebench: % of a written record in % is refused: records are append-only (amend instead)',
    TG_OP, TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';
END $$"""]
        for table in FROZEN:
            out.append(f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
                       "FOR EACH ROW EXECUTE FUNCTION phonebench_refuse()")
        out.append(f"CREATE TRIGGER runs_final BEFORE UPDATE OF {', '.join(RUN_CONTENT)} ON runs FOR EACH ROW "
                   "WHEN (OLD.status = 'complete') EXECUTE FUNCTION phonebench_refuse()")
        out.append(f"CREATE TRIGGER acceptance_attempts_final BEFORE UPDATE OF {', '.join(ATTEMPT_CONTENT)} "
                   "ON acceptance_attempts FOR EACH ROW WHEN (OLD.outcome <> 'running') "
                   "EXECUTE FUNCTION phonebench_refuse()")
        for table in ("runs", "acceptance_attempts", "run_duts", "run_instruments"):
            out.append(f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} FOR EACH ROW "
                       "EXECUTE FUNCTION phonebench_refuse()")
        return out
    out = []
    for table in FROZEN:
        for op_ in ("UPDATE", "DELETE"):
            out.append(f"CREATE TRIGGER {table}_no_{op_.lower()} BEFORE {op_} ON {table} BEGIN "
                       f"SELECT RAISE(ABORT, 'phonebench: {op_} of a written record in {table} is refused: "
                       "records are append-only (amend instead)'); END")
    out.append(f"CREATE TRIGGER runs_final BEFORE UPDATE OF {', '.join(RUN_CONTENT)} ON runs "
               "WHEN OLD.status = 'complete' BEGIN SELECT RAISE(ABORT, 'phonebench: UPDATE of a complete run is "
               "refused: records are append-only (amend instead)'); END")
    out.append(f"CREATE TRIGGER acceptance_attempts_final BEFORE UPDATE OF {', '.join(ATTEMPT_CONTENT)} "
               "ON acceptance_attempts WHEN OLD.outcome <> 'running' BEGIN SELECT RAISE(ABORT, 'phonebench: "
               "UPDATE of a finished acceptance attempt is refused: records are append-only'); END")
    for table in ("runs", "acceptance_attempts", "run_duts", "run_instruments"):
        out.append(f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} BEGIN SELECT RAISE(ABORT, "
                   f"'phonebench: DELETE of a written record in {table} is refused'); END")
    return out


def drop_trigger_statements(dialect: str) -> list[str]:
    names = [f"{t}_append_only" for t in FROZEN] if dialect == "postgresql" else \
        [f"{t}_no_{o}" for t in FROZEN for o in ("update", "delete")]
    names += ["runs_final", "acceptance_attempts_final"] + \
        [f"{t}_no_delete" for t in ("runs", "acceptance_attempts", "run_duts", "run_instruments")]
    tables = {n: n.rsplit("_no_", 1)[0] if "_no_" in n else n.rsplit("_", 1)[0] for n in names}
    tables.update(runs_final="runs", acceptance_attempts_final="acceptance_attempts")
    if dialect == "postgresql":
        return [f"DROP TRIGGER IF EXISTS {n} ON {tables[n].removesuffix('_append')}" for n in names] + \
            ["DROP FUNCTION IF EXISTS phonebench_refuse()"]
    return [f"DROP TRIGGER IF EXISTS {n}" for n in names]
