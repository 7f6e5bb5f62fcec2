"""Initial schema: jobs, transitions, decisions, tokens, estimator versions.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("user", sa.String(128), nullable=False, index=True),
        sa.Column("tenant", sa.String(128), nullable=False, index=True),
        sa.Column("job_class", sa.String(32), nullable=False),
        sa.Column("gpus", sa.Integer, nullable=False),
        sa.Column("command", sa.Text, nullable=False),
        sa.Column("cwd", sa.Text, nullable=True),
        sa.Column("state", sa.String(32), nullable=False, index=True),
        sa.Column("submit_time", sa.Float, nullable=False),
        sa.Column("first_start", sa.Float, nullable=True),
        sa.Column("end_time", sa.Float, nullable=True),
        sa.Column("exit_code", sa.Integer, nullable=True),
        sa.Column("gpu_indices", sa.String(256), nullable=False, server_default=""),
        sa.Column("preemptions", sa.Integer, nullable=False, server_default="0"),
        sa.Column("estimate_s", sa.Float, nullable=True),
        sa.Column("checkpoint_s", sa.Float, nullable=True),
        sa.Column("priority", sa.Integer, nullable=False, server_default="0"),
    )
    op.create_table(
        "transitions",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(64), sa.ForeignKey("jobs.id"), nullable=False, index=True),
        sa.Column("time", sa.Float, nullable=False),
        sa.Column("from_state", sa.String(32), nullable=False),
        sa.Column("to_state", sa.String(32), nullable=False),
        sa.Column("reason", sa.Text, nullable=False, server_default=""),
    )
    op.create_table(
        "decisions",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("time", sa.Float, nullable=False, index=True),
        sa.Column("job_id", sa.String(64), nullable=False, index=True),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("code", sa.String(64), nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("placement", sa.String(256), nullable=False, server_default=""),
    )
    op.create_table(
        "tokens",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("token_hash", sa.String(128), nullable=False, unique=True),
        sa.Column("user", sa.String(128), nullable=False),
        sa.Column("tenant", sa.String(128), nullable=False),
        sa.Column("admin", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("created", sa.Float, nullable=False),
    )
    op.create_table(
        "estimator_versions",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("trained_at", sa.Float, nullable=False),
        sa.Column("rows", sa.Integer, nullable=False),
    )


def downgrade() -> None:
    for table in ("estimator_versions", "tokens", "decisions", "transitions", "jobs"):
        op.drop_table(table)
