"""Who a job runs as: the Unix user a token maps to, kept on the job at submission.

``tokens.unix_user``: the account jobs submitted with this token run as when the
service runs as root (None: the service's default job user). ``jobs.run_as``:
that account, copied when the job is accepted, so revoking or re-mapping a token
later never changes who an accepted job runs as.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"


def upgrade() -> None:
    with op.batch_alter_table("tokens") as batch:
        batch.add_column(sa.Column("unix_user", sa.String(64), nullable=True))
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("run_as", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("run_as")
    with op.batch_alter_table("tokens") as batch:
        batch.drop_column("unix_user")
