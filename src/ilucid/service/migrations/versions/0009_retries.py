"""Retries of a job that could not be launched or whose process vanished.

``jobs``: ``attempts`` (failed attempts retried so far, 0 for every existing job);
``retry_at`` (when a job held back for its retry goes back to the queue; None: not
held); ``max_retries`` (the job's own limit; None: the service's default).

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("retry_at", sa.Float(), nullable=True))
        batch.add_column(sa.Column("max_retries", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("max_retries")
        batch.drop_column("retry_at")
        batch.drop_column("attempts")
