"""Takeover marker on the conversation: ``conversations.status_actor_type``.

Revision ID: 0020_turns
Revises: 0018_account_api_base
Create Date: 2026-12-01 18:45:00

The worker checks, after every answered turn, whether a person took the conversation over while the
model was answering (then the reply is dropped). It used to read the conversation's status and then,
in a second query, the actor of its newest ``conversation_events`` row. Now the lifecycle writes the
actor type of the transition that set the status next to the status, so the check reads both from
one row. Existing rows get the actor of their newest event (``NULL``: no event). Downgrade drops the
column.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020_turns"
down_revision: str | None = "0018_account_api_base"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("conversations", sa.Column("status_actor_type", sa.String(length=16), nullable=True))
    op.execute(
        """
        UPDATE conversations c SET status_actor_type = e.actor_type
        FROM (
            SELECT DISTINCT ON (conversation_id) conversation_id, actor_type
            FROM conversation_events
            ORDER BY conversation_id, created_at DESC
        ) e
        WHERE e.conversation_id = c.id
        """
    )


def downgrade() -> None:
    op.drop_column("conversations", "status_actor_type")
