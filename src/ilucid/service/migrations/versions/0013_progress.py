"""A job's own progress report (issue 33, docs/progress.md).

``jobs.progress_step``, ``progress_total``: its last report, step of total (None: none
yet); ``progress_at``: when the service saw it (epoch s); ``progress_rate``: steps per
second of its run, measured between its reports (None until two reports of one run).
``job_progress``: the reports over time, one row when the step changed, thinned so a
long job keeps at most about 200 (the job page's chart).

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("progress_step", sa.Float, nullable=True))
        batch.add_column(sa.Column("progress_total", sa.Float, nullable=True))
        batch.add_column(sa.Column("progress_at", sa.Float, nullable=True))
        batch.add_column(sa.Column("progress_rate", sa.Float, nullable=True))
    op.create_table(
        "job_progress",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(64), sa.ForeignKey("jobs.id"), nullable=False),
        sa.Column("at", sa.Float, nullable=False),
        sa.Column("step", sa.Float, nullable=False),
        sa.Column("total", sa.Float, nullable=False),
        sa.Column("gpu_type", sa.String(64), nullable=True),
    )
    op.create_index("ix_job_progress_job_id", "job_progress", ["job_id"])


def downgrade() -> None:
    op.drop_index("ix_job_progress_job_id", "job_progress")
    op.drop_table("job_progress")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("progress_rate")
        batch.drop_column("progress_at")
        batch.drop_column("progress_total")
        batch.drop_column("progress_step")
