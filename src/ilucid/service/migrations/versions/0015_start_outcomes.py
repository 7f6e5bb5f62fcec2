"""Expected starts' outcomes (issue 37, docs/expected-starts.md).

``start_outcomes``: for each job whose first expected start was given and which has
since started, when that range was given, the projection it calibrated, its two ends
and the real start. A restarted service replays the newest of them to learn again
how its predictions miss, instead of beginning from a threefold margin.

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"


def upgrade() -> None:
    op.create_table(
        "start_outcomes",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("made_at", sa.Float, nullable=False),
        sa.Column("projected", sa.Float, nullable=False),
        sa.Column("low", sa.Float, nullable=False),
        sa.Column("high", sa.Float, nullable=False),
        sa.Column("started", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("start_outcomes")
