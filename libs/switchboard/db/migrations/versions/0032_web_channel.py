"""The website chat channel: ``web`` among the channels, visitor identities, and the reply stream.

Revision ID: 0032_web_channel
Revises: 0027_model_failures
Create Date: 2026-12-07 18:30:00

* ``channel`` checks of ``channel_accounts``, ``customers``, ``customer_identities`` and
  ``conversations`` accept ``web``; ``customer_identities.kind`` accepts ``visitor`` (the random id a
  visitor's browser keeps) and ``web_user`` (a user id the business's backend signed).
* ``web_chat_events``: every event of a visitor's stream with its sequence number (the Server-Sent-Events
  id a reconnecting widget resumes after). Row-level security as in 0012.

Downgrade deletes the web channel's rows first (the old checks refuse them).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0032_web_channel"
down_revision: str | None = "0030_canned_replies_notes"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLE = "switchboard_tools"
POLICY = "tool_server_tenant_isolation"
_TENANT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"
_CHANNEL_CHECKS = {
    "channel_accounts": "ck_channel_accounts_channel",
    "customers": "ck_customers_channel",
    "customer_identities": "ck_customer_identities_channel",
    "conversations": "ck_conversations_channel",
}
_OLD_CHANNELS = "channel IN ('whatsapp', 'instagram', 'gmail')"
_NEW_CHANNELS = "channel IN ('whatsapp', 'instagram', 'gmail', 'web')"
_OLD_KINDS = "kind IN ('wa_id', 'bsuid', 'igsid', 'email')"
_NEW_KINDS = "kind IN ('wa_id', 'bsuid', 'igsid', 'email', 'visitor', 'web_user')"


def _checks(channels: str, kinds: str) -> None:
    for table, name in _CHANNEL_CHECKS.items():
        op.drop_constraint(name, table, type_="check")
        op.create_check_constraint(name, table, channels)
    op.drop_constraint("ck_customer_identities_kind", "customer_identities", type_="check")
    op.create_check_constraint("ck_customer_identities_kind", "customer_identities", kinds)


def upgrade() -> None:
    _checks(_NEW_CHANNELS, _NEW_KINDS)
    op.create_table(
        "web_chat_events",
        sa.Column("id", sa.BigInteger(), primary_key=True, autoincrement=True),
        sa.Column("tenant_id", sa.Uuid(), sa.ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False),
        sa.Column(
            "channel_account_id",
            sa.Uuid(),
            sa.ForeignKey("channel_accounts.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("address", sa.String(320), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("external_id", sa.String(64), nullable=False),
        sa.Column("payload", postgresql.JSONB(), nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.text("now()")),
        sa.UniqueConstraint("channel_account_id", "address", "seq", name="uq_web_chat_events_stream_seq"),
    )
    op.create_index("ix_web_chat_events_tenant_id", "web_chat_events", ["tenant_id"])
    op.create_index("ix_web_chat_events_external_id", "web_chat_events", ["external_id"])
    op.execute('ALTER TABLE "web_chat_events" ENABLE ROW LEVEL SECURITY')
    op.execute(
        f'CREATE POLICY {POLICY} ON "web_chat_events" '
        f"USING (current_user <> '{ROLE}' OR tenant_id = {_TENANT}) "
        f"WITH CHECK (current_user <> '{ROLE}' OR tenant_id = {_TENANT})"
    )


def downgrade() -> None:
    op.drop_table("web_chat_events")
    op.execute("DELETE FROM conversations WHERE channel = 'web'")
    op.execute("DELETE FROM customer_identities WHERE channel = 'web' OR kind IN ('visitor', 'web_user')")
    op.execute("DELETE FROM customers WHERE channel = 'web'")
    op.execute("DELETE FROM channel_accounts WHERE channel = 'web'")
    _checks(_OLD_CHANNELS, _OLD_KINDS)
