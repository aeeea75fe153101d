"""Canned replies and private notes for the people who answer customers.

Revision ID: 0030_canned_replies_notes
Revises: 0027_model_failures
Create Date: 2026-12-07 18:30:00

* ``canned_replies``: a tenant's saved answers, unique per tenant and shortcut.
* ``conversation_notes``: private notes on a conversation (who wrote it: a console user or a WhatsApp
  agent), never messages: nothing sends them and the model never reads them.
* Row-level security as in 0012 (the tool role sees no other tenant's rows and gets no grant).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0030_canned_replies_notes"
down_revision: str | None = "0029_outreach"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLE = "switchboard_tools"
POLICY = "tool_server_tenant_isolation"
_TENANT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"


def _ts(name: str) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=False, server_default=sa.text("now()"))


def _tenant() -> sa.Column:
    return sa.Column("tenant_id", sa.Uuid(), sa.ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False)


def _isolate(table: str) -> None:
    op.create_index(f"ix_{table}_tenant_id", table, ["tenant_id"])
    op.execute(f'ALTER TABLE "{table}" ENABLE ROW LEVEL SECURITY')
    op.execute(
        f'CREATE POLICY {POLICY} ON "{table}" '
        f"USING (current_user <> '{ROLE}' OR tenant_id = {_TENANT}) "
        f"WITH CHECK (current_user <> '{ROLE}' OR tenant_id = {_TENANT})"
    )


def upgrade() -> None:
    op.create_table(
        "canned_replies",
        sa.Column("id", sa.Uuid(), primary_key=True),
        _tenant(),
        sa.Column("shortcut", sa.String(32), nullable=False),
        sa.Column("text", sa.String(4096), nullable=False),
        _ts("created_at"),
        _ts("updated_at"),
        sa.UniqueConstraint("tenant_id", "shortcut", name="uq_canned_replies_tenant_shortcut"),
    )
    _isolate("canned_replies")
    op.create_table(
        "conversation_notes",
        sa.Column("id", sa.Uuid(), primary_key=True),
        _tenant(),
        sa.Column(
            "conversation_id", sa.Uuid(), sa.ForeignKey("conversations.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("text", sa.String(4096), nullable=False),
        sa.Column("author_name", sa.String(200), nullable=False),
        sa.Column("user_id", sa.Uuid(), sa.ForeignKey("console_users.id", ondelete="SET NULL"), nullable=True),
        sa.Column("agent_id", sa.Uuid(), sa.ForeignKey("human_agents.id", ondelete="SET NULL"), nullable=True),
        _ts("created_at"),
    )
    op.create_index(
        "ix_conversation_notes_conversation_created", "conversation_notes", ["conversation_id", "created_at"]
    )
    _isolate("conversation_notes")


def downgrade() -> None:
    op.drop_table("conversation_notes")
    op.drop_table("canned_replies")
