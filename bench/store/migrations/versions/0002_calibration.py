"""Calibration records (ISO/IEC 17025 equipment records: instruments, fixture, DUT units) and
production acceptance attempts.

Revision ID: 0002
Revises: 0001
Create Date: 2025-02-01
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

Json = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "calibration_records",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("certificate", sa.Text(), nullable=False, unique=True),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("procedure", sa.Text(), nullable=False),
        sa.Column("procedure_version", sa.Text(), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("reason", sa.Text()),
        sa.Column("role", sa.Text()),
        sa.Column("manufacturer", sa.Text(), nullable=False),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("serial", sa.Text(), nullable=False),
        sa.Column("firmware", sa.Text()),
        sa.Column("asset_tag", sa.Text()),
        sa.Column("location", sa.Text()),
        sa.Column("station_id", sa.Integer(), sa.ForeignKey("stations.id")),
        sa.Column("instrument_unit_id", sa.Integer(), sa.ForeignKey("instrument_units.id")),
        sa.Column("dut_unit_id", sa.Integer(), sa.ForeignKey("dut_units.id")),
        sa.Column("performed", sa.DateTime(), nullable=False),
        sa.Column("due", sa.DateTime()),
        sa.Column("operator", sa.Text()),
        sa.Column("run_id", sa.Text()),
        sa.Column("ambient", Json, nullable=False),
        sa.Column("results", Json, nullable=False),
        sa.Column("adjustments", Json, nullable=False),
        sa.Column("acceptance", Json, nullable=False),
        sa.Column("reference", Json, nullable=False),
    )
    op.create_index("ix_calibration_records_equipment", "calibration_records",
                    ["kind", "manufacturer", "model", "serial", "procedure"])
    op.create_index("ix_calibration_records_performed", "calibration_records", ["performed"])
    op.create_index("ix_calibration_records_instrument_unit_id", "calibration_records", ["instrument_unit_id"])
    op.create_index("ix_calibration_records_dut_unit_id", "calibration_records", ["dut_unit_id"])
    op.create_table(
        "acceptance_attempts",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("serial", sa.Text(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("read_serial", sa.Text()),
        sa.Column("station_id", sa.Integer(), sa.ForeignKey("stations.id")),
        sa.Column("run_id", sa.Text()),
        sa.Column("batch", sa.Text()),
        sa.Column("outcome", sa.String(20), nullable=False),
        sa.Column("reason", sa.Text()),
        sa.Column("failing", Json, nullable=False),
        sa.Column("retest_of", sa.Integer()),
        sa.Column("started", sa.DateTime(), nullable=False),
        sa.Column("finished", sa.DateTime()),
        sa.Column("cycle_s", sa.Float()),
        sa.Column("overhead_s", sa.Float()),
        sa.Column("operator", sa.Text()),
        sa.Column("recorder_host", sa.Text()),
        sa.Column("recorder_pid", sa.Integer()),
        sa.Column("details", Json, nullable=False),
        sa.UniqueConstraint("serial", "attempt", name="uq_acceptance_attempts_serial_attempt"),
    )
    op.create_index("ix_acceptance_attempts_serial", "acceptance_attempts", ["serial"])
    op.create_index("ix_acceptance_attempts_run_id", "acceptance_attempts", ["run_id"])
    op.create_index("ix_acceptance_attempts_batch", "acceptance_attempts", ["batch"])
    op.create_index("ix_acceptance_attempts_started", "acceptance_attempts", ["started"])


def downgrade() -> None:
    op.drop_table("acceptance_attempts")
    op.drop_table("calibration_records")
