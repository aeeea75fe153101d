"""Handoff and memory: the waiting queue, assignment times, the agent's selected conversation, memory state.

Revision ID: 0007_handoff
Revises: 0005_business
Create Date: 2026-11-30 11:35:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_handoff"
down_revision: str | None = "0005_business"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("conversations", sa.Column("queued_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("conversations", sa.Column("assigned_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column(
        "conversations", sa.Column("memory_summarized_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.create_index(
        "ix_conversations_tenant_queued",
        "conversations",
        ["tenant_id", "queued_at"],
        unique=False,
        postgresql_where=sa.text("queued_at IS NOT NULL"),
    )
    op.add_column("human_agents", sa.Column("active_conversation_id", sa.Uuid(), nullable=True))


def downgrade() -> None:
    op.drop_column("human_agents", "active_conversation_id")
    op.drop_index("ix_conversations_tenant_queued", table_name="conversations")
    op.drop_column("conversations", "memory_summarized_at")
    op.drop_column("conversations", "assigned_at")
    op.drop_column("conversations", "queued_at")
