"""Customer satisfaction: one question per closed conversation and its answer.

Revision ID: 0033_csat
Revises: 0032_web_channel
Create Date: 2026-12-07 19:30:00

* ``csat_answers``: one row per conversation (asked once), the rating 1-5 and comment when answered,
  who handled the conversation (the AI, a WhatsApp agent or a console user).
* Row-level security as in 0012 (the tool role sees no other tenant's rows and gets no grant).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0033_csat"
down_revision: str | None = "0032_web_channel"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLE = "switchboard_tools"
POLICY = "tool_server_tenant_isolation"
_TENANT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"


def upgrade() -> None:
    op.create_table(
        "csat_answers",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("tenant_id", sa.Uuid(), sa.ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False),
        sa.Column(
            "conversation_id",
            sa.Uuid(),
            sa.ForeignKey("conversations.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("channel", sa.String(32), nullable=False),
        sa.Column("handled_by", sa.String(16), nullable=False),
        sa.Column(
            "agent_id", sa.Uuid(), sa.ForeignKey("human_agents.id", ondelete="SET NULL"), nullable=True
        ),
        sa.Column(
            "user_id", sa.Uuid(), sa.ForeignKey("console_users.id", ondelete="SET NULL"), nullable=True
        ),
        sa.Column("rating", sa.Integer(), nullable=True),
        sa.Column("comment", sa.String(2000), nullable=True),
        sa.Column("asked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("answered_at", sa.DateTime(timezone=True), nullable=True),
        sa.UniqueConstraint("conversation_id", name="uq_csat_answers_conversation"),
        sa.CheckConstraint("rating IS NULL OR rating BETWEEN 1 AND 5", name="ck_csat_answers_rating"),
        sa.CheckConstraint(
            "handled_by IN ('ai', 'agent', 'console_user')", name="ck_csat_answers_handled_by"
        ),
    )
    op.create_index("ix_csat_answers_tenant_id", "csat_answers", ["tenant_id"])
    op.create_index("ix_csat_answers_tenant_answered", "csat_answers", ["tenant_id", "answered_at"])
    op.execute('ALTER TABLE "csat_answers" ENABLE ROW LEVEL SECURITY')
    op.execute(
        f'CREATE POLICY {POLICY} ON "csat_answers" '
        f"USING (current_user <> '{ROLE}' OR tenant_id = {_TENANT}) "
        f"WITH CHECK (current_user <> '{ROLE}' OR tenant_id = {_TENANT})"
    )


def downgrade() -> None:
    op.drop_table("csat_answers")
