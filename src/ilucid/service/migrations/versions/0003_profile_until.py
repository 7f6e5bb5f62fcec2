"""When a job's live profiling run ends (NULL: not profiling).

Stored so a restarted service still ends the run on time and hands the
measurements to the policy, instead of letting a profiling run go on for good.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("profile_until", sa.Float, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("profile_until")
