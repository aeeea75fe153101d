"""Event retention: an index on ``event_outbox.created_at`` for the ``prune_events`` job.

Revision ID: 0023_events
Revises: 0018_account_api_base
Create Date: 2026-12-01 18:50:00

The retention job (:mod:`switchboard.events.retention`) deletes events older than a cutoff, oldest
first, in batches; without an index on ``created_at`` every batch would scan the whole table. The
existing ``ix_event_outbox_undispatched`` is partial (``dispatched_at IS NULL``) and never matches.
Downgrade drops the index.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0023_events"
down_revision: str | None = "0021_retrieval"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_event_outbox_created_at", "event_outbox", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_event_outbox_created_at", table_name="event_outbox")
