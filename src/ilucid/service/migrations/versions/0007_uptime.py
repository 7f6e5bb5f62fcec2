"""When the service was up: one row per start, with its last sign of life.

``uptime.started`` and ``uptime.last_seen`` (service clock, s): the dashboard draws
the periods between one run's last sign of life and the next start as gaps in its
charts (see :mod:`ilucid.service.uptime`). Runs before this revision are unknown:
no gap is drawn for them.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"


def upgrade() -> None:
    op.create_table(
        "uptime",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("started", sa.Float, nullable=False),
        sa.Column("last_seen", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("uptime")
