"""Gmail: mailbox sync state, push notifications, our sent Message-IDs; a conversation per thread.

Revision ID: 0010_gmail
Revises: 0009_channel_core
Create Date: 2026-12-01 13:00:00

* ``gmail_mailboxes``: one row per connected mailbox (history cursor, last ``internalDate``, watch
  expiry, ``active`` / ``needs_reauth`` / ``disabled``).
* ``gmail_push_notifications``: Pub/Sub pushes stored before they are acknowledged (unique on the
  Pub/Sub message id).
* ``gmail_sent_messages``: the ``Message-ID`` of every mail we sent (a mail carrying one of them is
  ours and never wakes the agent).
* ``conversations.external_thread_id`` (Gmail ``threadId``) and ``conversations.review_flags``.
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0010_gmail"
down_revision: str | None = "0009_channel_core"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _tenant_and_account() -> list[sa.Column]:
    return [
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), sa.ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False),
        sa.Column(
            "channel_account_id",
            sa.Uuid(),
            sa.ForeignKey("channel_accounts.id", ondelete="CASCADE"),
            nullable=False,
        ),
    ]


def upgrade() -> None:
    op.create_table(
        "gmail_mailboxes",
        *_tenant_and_account(),
        sa.Column("email", sqlmodel.sql.sqltypes.AutoString(length=320), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("history_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=True),
        sa.Column("last_internal_date_ms", sa.BigInteger(), nullable=True),
        sa.Column("watch_expiration_ms", sa.BigInteger(), nullable=True),
        sa.Column("last_synced_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("channel_account_id", name="uq_gmail_mailboxes_account"),
        sa.CheckConstraint("status IN ('active', 'needs_reauth', 'disabled')", name="ck_gmail_mailboxes_status"),
    )
    op.create_index("ix_gmail_mailboxes_tenant_id", "gmail_mailboxes", ["tenant_id"])
    op.create_table(
        "gmail_push_notifications",
        *_tenant_and_account(),
        sa.Column("pubsub_message_id", sqlmodel.sql.sqltypes.AutoString(length=255), nullable=False),
        sa.Column("history_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=True),
        sa.Column("published_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("processed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("pubsub_message_id", name="uq_gmail_push_pubsub_message"),
    )
    op.create_index("ix_gmail_push_notifications_tenant_id", "gmail_push_notifications", ["tenant_id"])
    op.create_table(
        "gmail_sent_messages",
        *_tenant_and_account(),
        sa.Column("rfc_message_id", sqlmodel.sql.sqltypes.AutoString(length=512), nullable=False),
        sa.Column("gmail_message_id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
        sa.Column("thread_id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
        sa.Column("correlation_id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("channel_account_id", "rfc_message_id", name="uq_gmail_sent_account_message_id"),
    )
    op.create_index("ix_gmail_sent_messages_tenant_id", "gmail_sent_messages", ["tenant_id"])
    op.create_index("ix_gmail_sent_messages_correlation_id", "gmail_sent_messages", ["correlation_id"])
    op.add_column(
        "conversations",
        sa.Column("external_thread_id", sqlmodel.sql.sqltypes.AutoString(length=255), nullable=True),
    )
    op.add_column(
        "conversations",
        sa.Column(
            "review_flags", postgresql.JSONB(), server_default=sa.text("'[]'::jsonb"), nullable=False
        ),
    )
    op.create_index(
        "ix_conversations_account_thread",
        "conversations",
        ["channel_account_id", "external_thread_id"],
        postgresql_where=sa.text("external_thread_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_conversations_account_thread", table_name="conversations")
    op.drop_column("conversations", "review_flags")
    op.drop_column("conversations", "external_thread_id")
    op.drop_table("gmail_sent_messages")
    op.drop_table("gmail_push_notifications")
    op.drop_table("gmail_mailboxes")
