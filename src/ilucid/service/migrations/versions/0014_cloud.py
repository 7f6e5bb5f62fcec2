"""Hybrid cloud (issue 35, docs/hybrid.md).

``jobs.cloud``: whether the job may burst to a paid pool (``ilucid submit --no-cloud``
stores false). ``cloud_ledger``: what paid pools cost, kept across restarts: per
tenant and month the closed runs' cost and GPU-hours (``kind = "tenant"``), per pool
the closed node time (``kind = "pool"``, month ``all``), per tenant its closed runs of
all months (``kind = "total"``), per node up now the time it came up (``kind =
"node"``, ``since``) and per job running in a paid pool the start of its charge (``kind
= "run"``), so a restart neither forgets a month's spending nor bills a node twice.

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("cloud", sa.Boolean, nullable=False, server_default=sa.true()))
    op.create_table(
        "cloud_ledger",
        sa.Column("kind", sa.String(16), primary_key=True),
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("month", sa.String(16), primary_key=True),
        sa.Column("cost", sa.Float, nullable=False, server_default="0"),
        sa.Column("gpu_hours", sa.Float, nullable=False, server_default="0"),
        sa.Column("since", sa.Float, nullable=True),
    )


def downgrade() -> None:
    op.drop_table("cloud_ledger")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("cloud")
