"""Tenant API keys for the public API (``/api/v1``).

Revision ID: 0028_tenant_api_keys
Revises: 0027_model_failures
Create Date: 2026-12-07 18:30:00

* ``tenant_api_keys``: tenant, name, the key's shown prefix, the SHA-256 of the key, scopes (JSONB
  array), who created it, created / expires / last used / revoked times.
* Row-level security as in 0012 (the tool role sees no other tenant's rows and gets no grant).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0028_tenant_api_keys"
down_revision: str | None = "0027_model_failures"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLE = "switchboard_tools"
POLICY = "tool_server_tenant_isolation"
_TENANT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"


def _ts(name: str, *, nullable: bool) -> sa.Column:
    return sa.Column(
        name,
        sa.DateTime(timezone=True),
        nullable=nullable,
        server_default=None if nullable else sa.text("now()"),
    )


def upgrade() -> None:
    op.create_table(
        "tenant_api_keys",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("tenant_id", sa.Uuid(), sa.ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False),
        sa.Column("name", sa.String(100), nullable=False, server_default=""),
        sa.Column("prefix", sa.String(16), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("scopes", JSONB(), nullable=False, server_default=sa.text("'[]'::jsonb")),
        sa.Column(
            "created_by_id", sa.Uuid(), sa.ForeignKey("console_users.id", ondelete="SET NULL"), nullable=True
        ),
        _ts("created_at", nullable=False),
        _ts("expires_at", nullable=True),
        _ts("last_used_at", nullable=True),
        _ts("revoked_at", nullable=True),
        sa.UniqueConstraint("token_hash", name="uq_tenant_api_keys_hash"),
    )
    op.create_index("ix_tenant_api_keys_tenant_id", "tenant_api_keys", ["tenant_id"])
    op.execute('ALTER TABLE "tenant_api_keys" ENABLE ROW LEVEL SECURITY')
    op.execute(
        f'CREATE POLICY {POLICY} ON "tenant_api_keys" '
        f"USING (current_user <> '{ROLE}' OR tenant_id = {_TENANT}) "
        f"WITH CHECK (current_user <> '{ROLE}' OR tenant_id = {_TENANT})"
    )


def downgrade() -> None:
    op.drop_table("tenant_api_keys")
