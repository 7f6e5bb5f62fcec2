"""Indexes for the reconcile pass at 10,000 nodes (issue 32).

``ix_jobs_launched`` on ``(state, gpu_indices, stopping, id)``: each pass reads the ids
of the launched running jobs (to find those that ended) and the starts that still
wait for GPUs; with every column of those questions in one index, SQLite answers
from the index alone instead of a table look-up per running job. ``ix_jobs_profile_
until``: the profiling runs that are due, without reading every running job.
``ix_jobs_state`` goes: ``ix_jobs_launched`` starts with the state and answers every
question by state, and each index is one more page to write when a job moves.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.create_index("ix_jobs_launched", ["state", "gpu_indices", "stopping", "id"])
        batch.create_index("ix_jobs_profile_until", ["profile_until"])
        batch.drop_index("ix_jobs_state")


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.create_index("ix_jobs_state", ["state"])
        batch.drop_index("ix_jobs_profile_until")
        batch.drop_index("ix_jobs_launched")
