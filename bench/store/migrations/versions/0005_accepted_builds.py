"""Accepted builds: the baseline a nightly compares against, one row per phone model each time a
run's build is accepted (`bench accept-build`, docs/nightly.md).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "accepted_builds",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("build", sa.Text()),
        sa.Column("accepted", sa.DateTime(), nullable=False),
        sa.Column("accepted_by", sa.Text()),
        sa.Column("note", sa.Text()),
    )
    op.create_index("ix_accepted_builds_model", "accepted_builds", ["model", "accepted"])


def downgrade() -> None:
    op.drop_index("ix_accepted_builds_model", table_name="accepted_builds")
    op.drop_table("accepted_builds")
