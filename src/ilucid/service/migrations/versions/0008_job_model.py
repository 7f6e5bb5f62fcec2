"""The whole job model on the live path: what a submission may ask for.

``jobs``: ``name``; ``gpu_type`` (a hard constraint) and ``preferred_gpu_types``
(a JSON list, soft, best first); ``gpu_memory_gb`` (per GPU); ``nodes`` x
``gpus_per_node`` (a gang's shape); ``gpu_milli`` (a share of one GPU, 1000: whole);
``cpus`` and ``memory_gb`` (per job, for backends that place them).

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"

COLUMNS = (
    ("name", sa.String(128)),
    ("gpu_type", sa.String(64)),
    ("preferred_gpu_types", sa.Text()),
    ("gpu_memory_gb", sa.Float()),
    ("nodes", sa.Integer()),
    ("gpus_per_node", sa.Integer()),
    ("gpu_milli", sa.Integer()),
    ("cpus", sa.Float()),
    ("memory_gb", sa.Float()),
)


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        for name, kind in COLUMNS:
            batch.add_column(sa.Column(name, kind, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        for name, _ in reversed(COLUMNS):
            batch.drop_column(name)
