"""Leads from the intent check, and event webhooks (endpoints, event outbox, delivery log).

Revision ID: 0017_leads_events
Revises: 0012_tool_server_rls
Create Date: 2026-12-01 15:50:00

``leads`` gains ``source`` (``tool`` | ``intent``), ``summary``, ``consent`` and ``detected_by``; a lead
of the after-turn intent check has the idempotency key ``intent:<conversation id>``, so the existing
unique ``(tenant_id, idempotency_key)`` records it once per conversation. New tenant tables
``webhook_endpoints``, ``event_outbox`` and ``webhook_deliveries`` get the tool role's row-level
security policy of 0012 (``tests/db/test_rls.py``).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0017_leads_events"
down_revision: str | None = "0016_knowledge_graph"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLE = "switchboard_tools"
POLICY = "tool_server_tenant_isolation"
_TENANT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"
_NEW_TABLES = ("webhook_endpoints", "event_outbox", "webhook_deliveries")


def _now() -> sa.TextClause:
    return sa.text("now()")


def _tenant_column() -> sa.Column:
    return sa.Column(
        "tenant_id", sa.Uuid(), sa.ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False
    )


def upgrade() -> None:
    op.add_column("leads", sa.Column("source", sa.String(length=16), nullable=False, server_default="tool"))
    op.add_column("leads", sa.Column("summary", sa.Text(), nullable=False, server_default=""))
    op.add_column("leads", sa.Column("consent", sa.String(length=16), nullable=False, server_default="unknown"))
    op.add_column("leads", sa.Column("detected_by", sa.String(length=32), nullable=True))
    for column in ("source", "summary", "consent"):
        op.alter_column("leads", column, server_default=None)

    op.create_table(
        "webhook_endpoints",
        sa.Column("id", sa.Uuid(), primary_key=True),
        _tenant_column(),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("description", sa.String(length=500), nullable=False),
        sa.Column("event_types", postgresql.JSONB(), nullable=False, server_default=sa.text("'[]'::jsonb")),
        sa.Column("secret_encrypted", sa.Text(), nullable=False),
        sa.Column("is_active", sa.Boolean(), nullable=False),
        sa.Column("consecutive_failures", sa.Integer(), nullable=False),
        sa.Column("disabled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("disabled_reason", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=_now()),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=_now()),
    )
    op.create_index("ix_webhook_endpoints_tenant_id", "webhook_endpoints", ["tenant_id"])
    op.create_table(
        "event_outbox",
        sa.Column("id", sa.Uuid(), primary_key=True),
        _tenant_column(),
        sa.Column("event_type", sa.String(length=64), nullable=False),
        sa.Column("payload", postgresql.JSONB(), nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=_now()),
        sa.Column("dispatched_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_event_outbox_tenant_id", "event_outbox", ["tenant_id"])
    op.create_index(
        "ix_event_outbox_undispatched", "event_outbox", ["created_at"], postgresql_where=sa.text("dispatched_at IS NULL")
    )
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.Uuid(), primary_key=True),
        _tenant_column(),
        sa.Column("event_id", sa.Uuid(), sa.ForeignKey("event_outbox.id", ondelete="CASCADE"), nullable=False),
        sa.Column(
            "endpoint_id", sa.Uuid(), sa.ForeignKey("webhook_endpoints.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("event_type", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_status_code", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("log", postgresql.JSONB(), nullable=False, server_default=sa.text("'[]'::jsonb")),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=_now()),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=_now()),
        sa.UniqueConstraint("event_id", "endpoint_id", name="uq_webhook_deliveries_event_endpoint"),
        sa.CheckConstraint("status IN ('pending', 'delivered', 'failed')", name="ck_webhook_deliveries_status"),
    )
    op.create_index("ix_webhook_deliveries_tenant_id", "webhook_deliveries", ["tenant_id"])
    op.create_index("ix_webhook_deliveries_endpoint_id", "webhook_deliveries", ["endpoint_id"])
    op.create_index(
        "ix_webhook_deliveries_due", "webhook_deliveries", ["next_attempt_at"], postgresql_where=sa.text("status = 'pending'")
    )
    for table in _NEW_TABLES:  # the tool role's isolation, as 0012 set it up for every tenant table
        op.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON "{table}" TO {ROLE}')
        op.execute(f'ALTER TABLE "{table}" ENABLE ROW LEVEL SECURITY')
        op.execute(
            f'CREATE POLICY {POLICY} ON "{table}" '
            f"USING (current_user <> '{ROLE}' OR tenant_id = {_TENANT}) "
            f"WITH CHECK (current_user <> '{ROLE}' OR tenant_id = {_TENANT})"
        )


def downgrade() -> None:
    for table in reversed(_NEW_TABLES):
        op.drop_table(table)  # drops its indexes and policy
    for column in ("detected_by", "consent", "summary", "source"):
        op.drop_column("leads", column)
