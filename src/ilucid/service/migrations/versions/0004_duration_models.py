"""The live duration model: its versions, and the estimate each job got from it.

``models`` records each refitted model once its file is completely written, so
a restart loads the newest complete one. On ``jobs``: the model's estimate
(kept beside a user's own ``estimate_s``, which wins), the version that made it
(``v3``, or ``median`` for the fallback) and its explanation.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"


def upgrade() -> None:
    op.create_table(
        "models",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("trained_at", sa.Float, nullable=False),
        sa.Column("rows", sa.Integer, nullable=False),
        sa.Column("fit_s", sa.Float, nullable=False),
        sa.UniqueConstraint("kind", "version", name="uq_models_kind_version"),
    )
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("model_estimate_s", sa.Float, nullable=True))
        batch.add_column(sa.Column("estimate_version", sa.String(32), nullable=True))
        batch.add_column(sa.Column("estimate_note", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("estimate_note")
        batch.drop_column("estimate_version")
        batch.drop_column("model_estimate_s")
    op.drop_table("models")
