"""GPU samples of running jobs (the live profiler's measurements).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    op.create_table(
        "samples",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(64), sa.ForeignKey("jobs.id"), nullable=False, index=True),
        sa.Column("time", sa.Float, nullable=False),
        sa.Column("gpu_util", sa.Float, nullable=False),
        sa.Column("mem_util", sa.Float, nullable=False),
        sa.Column("mem_mib", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("samples")
