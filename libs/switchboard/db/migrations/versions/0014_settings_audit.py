"""Audit trail of tenant settings changes; tenant suspension.

Revision ID: 0014_settings_audit
Revises: 0013_console_users
Create Date: 2026-12-01 15:30:00

* ``settings_changes``: one row per saved change of ``tenants.settings_extensions`` (CLI, admin API,
  console): who, when, the changed sections and paths, before/after with secrets redacted
  (:mod:`switchboard.tenant_config`). Row-level security like every tenant table (0012).
* ``tenants.suspended_at``: a platform admin's suspension (inbound stored, not answered).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0014_settings_audit"
down_revision: str | None = "0013_console_users"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLE = "switchboard_tools"
POLICY = "tool_server_tenant_isolation"
_TENANT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"


def upgrade() -> None:
    op.create_table(
        "settings_changes",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("tenant_id", sa.Uuid(), sa.ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("sections", postgresql.JSONB(), nullable=False),
        sa.Column("changed_paths", postgresql.JSONB(), nullable=False),
        sa.Column("before", postgresql.JSONB(), nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("after", postgresql.JSONB(), nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.text("now()")),
    )
    op.create_index("ix_settings_changes_tenant_id", "settings_changes", ["tenant_id"])
    op.create_index("ix_settings_changes_tenant_created", "settings_changes", ["tenant_id", "created_at"])
    op.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON "settings_changes" TO {ROLE}')
    op.execute('ALTER TABLE "settings_changes" ENABLE ROW LEVEL SECURITY')
    op.execute(
        f'CREATE POLICY {POLICY} ON "settings_changes" '
        f"USING (current_user <> '{ROLE}' OR tenant_id = {_TENANT}) "
        f"WITH CHECK (current_user <> '{ROLE}' OR tenant_id = {_TENANT})"
    )
    op.add_column("tenants", sa.Column("suspended_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("tenants", "suspended_at")
    op.execute(f'DROP POLICY IF EXISTS {POLICY} ON "settings_changes"')
    op.drop_table("settings_changes")
