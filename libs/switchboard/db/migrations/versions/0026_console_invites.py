"""Console invitations: a link that lets a new tenant admin or agent set their own password once.

Revision ID: 0026_console_invites
Revises: 0025_tenant_hnsw_indexes
Create Date: 2026-12-07 16:30:00

* ``console_invites``: tenant, e-mail, name, role (``tenant_admin`` | ``agent``), the SHA-256 of the
  link's token, who invited, expiry, when accepted (and the account it made), when revoked.
* Row-level security as in 0012 (the tool role sees no other tenant's rows and gets no grant).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0026_console_invites"
down_revision: str | None = "0025_tenant_hnsw_indexes"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLE = "switchboard_tools"
POLICY = "tool_server_tenant_isolation"
_TENANT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"


def _ts(name: str, *, nullable: bool = False, default: bool = True) -> sa.Column:
    return sa.Column(
        name,
        sa.DateTime(timezone=True),
        nullable=nullable,
        server_default=sa.text("now()") if default and not nullable else None,
    )


def upgrade() -> None:
    op.create_table(
        "console_invites",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("tenant_id", sa.Uuid(), sa.ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False),
        sa.Column("email", sa.String(320), nullable=False),
        sa.Column("name", sa.String(200), nullable=False, server_default=""),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column(
            "invited_by_id", sa.Uuid(), sa.ForeignKey("console_users.id", ondelete="SET NULL"), nullable=True
        ),
        _ts("created_at"),
        _ts("expires_at", default=False),
        _ts("accepted_at", nullable=True),
        _ts("revoked_at", nullable=True),
        sa.Column("user_id", sa.Uuid(), sa.ForeignKey("console_users.id", ondelete="SET NULL"), nullable=True),
        sa.CheckConstraint("role IN ('tenant_admin', 'agent')", name="ck_console_invites_role"),
        sa.UniqueConstraint("token_hash", name="uq_console_invites_token_hash"),
    )
    op.create_index("ix_console_invites_tenant_id", "console_invites", ["tenant_id"])
    op.execute('ALTER TABLE "console_invites" ENABLE ROW LEVEL SECURITY')
    op.execute(
        f'CREATE POLICY {POLICY} ON "console_invites" '
        f"USING (current_user <> '{ROLE}' OR tenant_id = {_TENANT}) "
        f"WITH CHECK (current_user <> '{ROLE}' OR tenant_id = {_TENANT})"
    )


def downgrade() -> None:
    op.drop_table("console_invites")
