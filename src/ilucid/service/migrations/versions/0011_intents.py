"""Durable intents and stimulus ids: what the service promised survives a crash.

``jobs.stopping``: why the service is stopping the job (``cancelled``,
``preempted`` or ``profiled``), committed before the request or decision is
answered, so a restart finishes every stop it finds. ``transitions.stimulus_id``
and ``decisions.stimulus_id``: the one request, pass or observation that caused
the rows (a job's story groups by it). ``transitions.from_phase`` and
``to_phase``: the lifecycle's phases of the move (``decided``, ``stopping:
cancel``...), beside the stored states. Rows written before keep them empty.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("stopping", sa.String(16), nullable=True))
        batch.create_index("ix_jobs_stopping", ["stopping"])
    with op.batch_alter_table("transitions") as batch:
        batch.add_column(sa.Column("stimulus_id", sa.String(40), nullable=False, server_default=""))
        batch.add_column(sa.Column("from_phase", sa.String(32), nullable=False, server_default=""))
        batch.add_column(sa.Column("to_phase", sa.String(32), nullable=False, server_default=""))
    with op.batch_alter_table("decisions") as batch:
        batch.add_column(sa.Column("stimulus_id", sa.String(40), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("decisions") as batch:
        batch.drop_column("stimulus_id")
    with op.batch_alter_table("transitions") as batch:
        batch.drop_column("to_phase")
        batch.drop_column("from_phase")
        batch.drop_column("stimulus_id")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_index("ix_jobs_stopping")
        batch.drop_column("stopping")
