"""Initial schema: stations, DUT units, instrument units, runs, per-run DUTs and instruments,
tests, measurements, raw-data references.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

Json = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "stations",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.Text(), nullable=False, unique=True),
        sa.Column("host", sa.Text()),
        sa.Column("location", sa.Text()),
    )
    op.create_table(
        "dut_units",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("serial", sa.Text(), nullable=False, unique=True),
        sa.Column("soc_manufacturer", sa.Text()),
        sa.Column("soc_model", sa.Text()),
        sa.Column("product_model", sa.Text()),
    )
    op.create_table(
        "instrument_units",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("manufacturer", sa.Text(), nullable=False),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("serial", sa.Text(), nullable=False),
        sa.UniqueConstraint("manufacturer", "model", "serial", name="uq_instrument_units_idn"),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.Text(), nullable=False, unique=True),
        sa.Column("station_id", sa.Integer(), sa.ForeignKey("stations.id")),
        sa.Column("status", sa.String(40), nullable=False),
        sa.Column("started", sa.DateTime()),
        sa.Column("finished", sa.DateTime()),
        sa.Column("updated", sa.DateTime(), nullable=False),
        sa.Column("code_version", sa.Text()),
        sa.Column("run_dir", sa.Text()),
        sa.Column("recorder_host", sa.Text()),
        sa.Column("recorder_pid", sa.Integer()),
        sa.Column("station_record", Json, nullable=False),
        sa.Column("summary", Json, nullable=False),
    )
    op.create_index("ix_runs_started", "runs", ["started"])
    op.create_table(
        "run_duts",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_pk", sa.Integer(), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("unit_id", sa.Integer(), sa.ForeignKey("dut_units.id")),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("address", sa.Text()),
        sa.Column("serial", sa.Text()),
        sa.Column("soc_manufacturer", sa.Text()),
        sa.Column("soc_model", sa.Text()),
        sa.Column("build_fingerprint", sa.Text()),
        sa.Column("runtime_version", sa.Text()),
        sa.Column("microcode", sa.Text()),
        sa.Column("error", sa.Text()),
        sa.Column("identity", Json, nullable=False),
        sa.Column("fingerprint", Json),
        sa.UniqueConstraint("run_pk", "name", name="uq_run_duts_name"),
    )
    op.create_index("ix_run_duts_unit_id", "run_duts", ["unit_id"])
    op.create_table(
        "run_instruments",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_pk", sa.Integer(), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("unit_id", sa.Integer(), sa.ForeignKey("instrument_units.id")),
        sa.Column("role", sa.String(40), nullable=False),
        sa.Column("family", sa.Text()),
        sa.Column("address", sa.Text()),
        sa.Column("attached_to", sa.Text()),
        sa.Column("firmware", sa.Text()),
        sa.Column("identity", Json, nullable=False),
        sa.Column("calibration", Json),
        sa.UniqueConstraint("run_pk", "role", name="uq_run_instruments_role"),
    )
    op.create_index("ix_run_instruments_unit_id", "run_instruments", ["unit_id"])
    op.create_table(
        "tests",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_pk", sa.Integer(), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("nodeid", sa.Text(), nullable=False),
        sa.Column("dut", sa.Text()),
        sa.Column("outcome", sa.String(20), nullable=False),
        sa.Column("duration_s", sa.Float()),
        sa.Column("message", sa.Text()),
        sa.Column("markers", Json, nullable=False),
        sa.UniqueConstraint("run_pk", "seq", name="uq_tests_seq"),
    )
    op.create_table(
        "measurements",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("test_pk", sa.Integer(), sa.ForeignKey("tests.id", ondelete="CASCADE"), nullable=False),
        sa.Column("run_pk", sa.Integer(), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("dut", sa.Text()),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("value", sa.Float()),
        sa.Column("unit", sa.Text()),
        sa.Column("outcome", sa.String(40), nullable=False),
        sa.Column("limit_value", sa.Float()),
        sa.Column("comparator", sa.String(4)),
        sa.Column("statistic", sa.Text()),
        sa.Column("bound", sa.Float()),
        sa.Column("confidence", sa.Float()),
        sa.Column("n", sa.Integer()),
        sa.Column("n_required", sa.Integer()),
        sa.Column("detail", sa.Text()),
        sa.Column("extra", Json, nullable=False),
    )
    op.create_index("ix_measurements_test_pk", "measurements", ["test_pk"])
    op.create_index("ix_measurements_name", "measurements", ["name"])
    op.create_index("ix_measurements_run_name", "measurements", ["run_pk", "name"])
    op.create_table(
        "raw_refs",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("measurement_pk", sa.Integer(), sa.ForeignKey("measurements.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
    )
    op.create_index("ix_raw_refs_measurement_pk", "raw_refs", ["measurement_pk"])


def downgrade() -> None:
    for table in ("raw_refs", "measurements", "tests", "run_instruments", "run_duts", "runs",
                  "instrument_units", "dut_units", "stations"):
        op.drop_table(table)
