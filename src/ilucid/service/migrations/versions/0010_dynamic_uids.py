"""Dynamic uids: each user without a Unix account runs jobs as a uid of its own.

``dynamic_uids``: ``uid`` (the key: never given twice) and ``user`` (unique: one
uid per user, whichever of the user's tokens submits).

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"


def upgrade() -> None:
    op.create_table(
        "dynamic_uids",
        sa.Column("uid", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("user", sa.String(128), nullable=False, unique=True),
    )


def downgrade() -> None:
    op.drop_table("dynamic_uids")
