"""Turns: the orchestrator's answer per inbound message (idempotency, usage, timings, summaries).

Revision ID: 0002_turns
Revises: 0001
Create Date: 2026-11-30 10:50:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002_turns"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('turns',
    sa.Column('tenant_id', sa.Uuid(), nullable=False),
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('conversation_id', sa.Uuid(), nullable=False),
    sa.Column('inbound_message_id', sa.Uuid(), nullable=False),
    sa.Column('trace_id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('outcome', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=True),
    sa.Column('result', postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    sa.Column('model', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
    sa.Column('fallback_used', sa.Boolean(), nullable=False),
    sa.Column('usage', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.Column('timings', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('summary_text', sa.Text(), nullable=True),
    sa.Column('summary_through_message_id', sa.Uuid(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.CheckConstraint("status IN ('running', 'done')", name='ck_turns_status'),
    sa.ForeignKeyConstraint(['conversation_id'], ['conversations.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('inbound_message_id', name='uq_turns_inbound_message')
    )
    op.create_index('ix_turns_conversation_created', 'turns', ['conversation_id', 'created_at'], unique=False)
    op.create_index(op.f('ix_turns_tenant_id'), 'turns', ['tenant_id'], unique=False)
    op.create_index(op.f('ix_turns_trace_id'), 'turns', ['trace_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_turns_trace_id'), table_name='turns')
    op.drop_index(op.f('ix_turns_tenant_id'), table_name='turns')
    op.drop_index('ix_turns_conversation_created', table_name='turns')
    op.drop_table('turns')
