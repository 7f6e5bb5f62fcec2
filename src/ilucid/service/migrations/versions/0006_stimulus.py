"""What moved a job: every stored transition names its stimulus.

``transitions.stimulus``: the kind of decision or observation that caused the move
(``decision: start``, ``observed: exit``, ``request: cancel``...; see
:class:`ilucid.service.lifecycle.Stimulus`), beside the sentence in ``reason``.
Rows written before this revision keep an empty stimulus.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"


def upgrade() -> None:
    with op.batch_alter_table("transitions") as batch:
        batch.add_column(sa.Column("stimulus", sa.String(32), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("transitions") as batch:
        batch.drop_column("stimulus")
