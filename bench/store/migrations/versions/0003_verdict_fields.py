"""Verdict fields of the typed record: metric, claim, profile, description, evidence, decision
rule, uncertainty budget, calibration state and plot hint, each in its own column; and the test
record's acceptance check, start time and bay.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

Json = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
COLUMNS = (("metric", sa.Text()), ("claim", sa.Integer()), ("profile", sa.Text()), ("description", sa.Text()),
           ("evidence", sa.String(20)), ("decision_rule", sa.String(20)), ("uncertainty", Json),
           ("calibration", Json), ("plot", Json))


TEST_COLUMNS = (("acceptance_check", sa.Text()), ("started", sa.Text()), ("bay", sa.Text()))


def upgrade() -> None:
    with op.batch_alter_table("measurements") as batch:
        for name, kind in COLUMNS:
            batch.add_column(sa.Column(name, kind))
    with op.batch_alter_table("tests") as batch:
        for name, kind in TEST_COLUMNS:
            batch.add_column(sa.Column(name, kind))


def downgrade() -> None:
    with op.batch_alter_table("tests") as batch:
        for name, _ in TEST_COLUMNS:
            batch.drop_column(name)
    with op.batch_alter_table("measurements") as batch:
        for name, _ in COLUMNS:
            batch.drop_column(name)
