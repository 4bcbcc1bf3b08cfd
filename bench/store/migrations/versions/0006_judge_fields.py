"""The judge's record of a verdict (core/judge.py): the measurement's own decision (basis), the
check's findings, the evidence its SLA entry required and the notes of the rules that changed the
outcome, each in its own column.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-04
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

Json = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
COLUMNS = (("basis", sa.String(40)), ("findings", Json), ("evidence_required", sa.String(20)), ("ruling", Json))


def upgrade() -> None:
    with op.batch_alter_table("measurements") as batch:
        for name, kind in COLUMNS:
            batch.add_column(sa.Column(name, kind))


def downgrade() -> None:
    with op.batch_alter_table("measurements") as batch:
        for name, _ in COLUMNS:
            batch.drop_column(name)
