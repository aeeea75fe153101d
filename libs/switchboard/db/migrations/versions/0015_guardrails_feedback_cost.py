"""Guardrail results and cost on turns; feedback on messages.

Revision ID: 0015_guardrails_feedback_cost
Revises: 0012_tool_server_rls
Create Date: 2026-12-01 16:00:00

* ``turns.guardrails`` (JSONB, ``{}``): the input and output guardrail records of the turn.
* ``turns.cost_usd`` (double, 0): the turn's model spend (LiteLLM's cost map), summed by budgets over
  ``ix_turns_tenant_created``.
* ``feedback``: one rating per (message, source), joined to the turn and trace; row-level security for
  the tool server's role like every tenant table (``0012_tool_server_rls``).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0015_guardrails_feedback_cost"
down_revision: str | None = "0014_settings_audit"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLE = "switchboard_tools"
POLICY = "tool_server_tenant_isolation"
_TENANT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"


def upgrade() -> None:
    op.add_column(
        "turns",
        sa.Column("guardrails", postgresql.JSONB(), nullable=False, server_default=sa.text("'{}'::jsonb")),
    )
    op.add_column("turns", sa.Column("cost_usd", sa.Float(), nullable=False, server_default="0"))
    op.create_index("ix_turns_tenant_created", "turns", ["tenant_id", "created_at"])
    op.create_table(
        "feedback",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), sa.ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False),
        sa.Column("message_id", sa.Uuid(), sa.ForeignKey("messages.id", ondelete="CASCADE"), nullable=False),
        sa.Column(
            "conversation_id", sa.Uuid(), sa.ForeignKey("conversations.id", ondelete="CASCADE"), nullable=True
        ),
        sa.Column("turn_id", sa.Uuid(), sa.ForeignKey("turns.id", ondelete="SET NULL"), nullable=True),
        sa.Column("trace_id", sa.String(64), nullable=True),
        sa.Column("rating", sa.String(8), nullable=False),
        sa.Column("comment", sa.Text(), nullable=True),
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("exported_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("message_id", "source", name="uq_feedback_message_source"),
        sa.CheckConstraint("rating IN ('up', 'down')", name="ck_feedback_rating"),
    )
    op.create_index("ix_feedback_tenant_id", "feedback", ["tenant_id"])
    op.create_index("ix_feedback_trace_id", "feedback", ["trace_id"])
    op.create_index("ix_feedback_tenant_created", "feedback", ["tenant_id", "created_at"])
    op.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON "feedback" TO {ROLE}')
    op.execute('ALTER TABLE "feedback" ENABLE ROW LEVEL SECURITY')
    op.execute(
        f'CREATE POLICY {POLICY} ON "feedback" '
        f"USING (current_user <> '{ROLE}' OR tenant_id = {_TENANT}) "
        f"WITH CHECK (current_user <> '{ROLE}' OR tenant_id = {_TENANT})"
    )


def downgrade() -> None:
    op.execute(f'DROP POLICY IF EXISTS {POLICY} ON "feedback"')
    op.drop_table("feedback")
    op.drop_index("ix_turns_tenant_created", table_name="turns")
    op.drop_column("turns", "cost_usd")
    op.drop_column("turns", "guardrails")
