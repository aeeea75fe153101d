"""Web console: users, server-side sessions, per-user API tokens, read marks; console takeover.

Revision ID: 0013_console_users
Revises: 0012_tool_server_rls
Create Date: 2026-12-01 15:40:00

* ``console_users`` (e-mail + argon2 hash, role ``platform_admin`` | ``tenant_admin`` | ``agent``; a
  platform admin has no tenant), ``console_sessions`` (SHA-256 of the cookie token, CSRF token, expiry),
  ``console_api_tokens`` (SHA-256 of a per-user admin API token), ``console_conversation_reads``.
* ``conversations.assigned_user_id``: a console user who took the conversation over; the human-mode
  check accepts it as the conversation's owner. ``conversation_events.actor_type`` gains
  ``console_user``.
* Row-level security as in 0012 for the tables with ``tenant_id`` (``console_users``,
  ``console_conversation_reads``); the tool role gets no grant on them at all.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013_console_users"
down_revision: str | None = "0012_tool_server_rls"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLE = "switchboard_tools"
POLICY = "tool_server_tenant_isolation"
_TENANT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"

_OWNER_OLD = "status <> 'human' OR assigned_agent_id IS NOT NULL OR queued_at IS NOT NULL OR is_agent_console"
_OWNER_NEW = (
    "status <> 'human' OR assigned_agent_id IS NOT NULL OR assigned_user_id IS NOT NULL "
    "OR queued_at IS NOT NULL OR is_agent_console"
)
_ACTORS_OLD = "actor_type IN ('customer', 'ai', 'agent', 'business_app', 'system', 'api')"
_ACTORS_NEW = "actor_type IN ('customer', 'ai', 'agent', 'business_app', 'system', 'api', 'console_user')"


def _ts(name: str, *, nullable: bool = False, default: bool = True) -> sa.Column:
    return sa.Column(
        name,
        sa.DateTime(timezone=True),
        nullable=nullable,
        server_default=sa.text("now()") if default and not nullable else None,
    )


def upgrade() -> None:
    op.create_table(
        "console_users",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("tenant_id", sa.Uuid(), sa.ForeignKey("tenants.id", ondelete="CASCADE"), nullable=True),
        sa.Column("email", sa.String(320), nullable=False, unique=True),
        sa.Column("name", sa.String(200), nullable=False, server_default=""),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("password_hash", sa.String(512), nullable=False),
        sa.Column("is_active", sa.Boolean(), nullable=False, server_default=sa.text("true")),
        _ts("last_login_at", nullable=True),
        _ts("created_at"),
        _ts("updated_at"),
        sa.CheckConstraint("role IN ('platform_admin', 'tenant_admin', 'agent')", name="ck_console_users_role"),
        sa.CheckConstraint("(role = 'platform_admin') = (tenant_id IS NULL)", name="ck_console_users_tenant_by_role"),
    )
    op.create_index("ix_console_users_tenant_id", "console_users", ["tenant_id"])
    op.create_table(
        "console_sessions",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("user_id", sa.Uuid(), sa.ForeignKey("console_users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("csrf_token", sa.String(64), nullable=False),
        _ts("created_at"),
        _ts("expires_at", default=False),
        _ts("last_seen_at"),
    )
    op.create_index("ix_console_sessions_user_id", "console_sessions", ["user_id"])
    op.create_index("ix_console_sessions_expires", "console_sessions", ["expires_at"])
    op.create_table(
        "console_api_tokens",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("user_id", sa.Uuid(), sa.ForeignKey("console_users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("name", sa.String(100), nullable=False, server_default=""),
        sa.Column("token_hash", sa.String(64), nullable=False),
        _ts("created_at"),
        _ts("last_used_at", nullable=True),
        _ts("revoked_at", nullable=True),
        sa.UniqueConstraint("token_hash", name="uq_console_api_tokens_hash"),
    )
    op.create_index("ix_console_api_tokens_user_id", "console_api_tokens", ["user_id"])
    op.create_table(
        "console_conversation_reads",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("tenant_id", sa.Uuid(), sa.ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False),
        sa.Column("user_id", sa.Uuid(), sa.ForeignKey("console_users.id", ondelete="CASCADE"), nullable=False),
        sa.Column(
            "conversation_id", sa.Uuid(), sa.ForeignKey("conversations.id", ondelete="CASCADE"), nullable=False
        ),
        _ts("read_at"),
        sa.UniqueConstraint("user_id", "conversation_id", name="uq_console_reads_user_conversation"),
        sa.CheckConstraint("read_at IS NOT NULL", name="ck_console_reads_read_at"),
    )
    op.create_index("ix_console_conversation_reads_tenant_id", "console_conversation_reads", ["tenant_id"])

    op.add_column(
        "conversations",
        sa.Column(
            "assigned_user_id", sa.Uuid(), sa.ForeignKey("console_users.id", ondelete="SET NULL"), nullable=True
        ),
    )
    op.create_index("ix_conversations_assigned_user_id", "conversations", ["assigned_user_id"])
    op.drop_constraint("ck_conversations_human_has_owner", "conversations", type_="check")
    op.create_check_constraint("ck_conversations_human_has_owner", "conversations", _OWNER_NEW)
    op.drop_constraint("ck_conversation_events_actor_type", "conversation_events", type_="check")
    op.create_check_constraint("ck_conversation_events_actor_type", "conversation_events", _ACTORS_NEW)

    for table in ("console_users", "console_conversation_reads"):
        op.execute(f'ALTER TABLE "{table}" ENABLE ROW LEVEL SECURITY')
        op.execute(
            f'CREATE POLICY {POLICY} ON "{table}" '
            f"USING (current_user <> '{ROLE}' OR tenant_id = {_TENANT}) "
            f"WITH CHECK (current_user <> '{ROLE}' OR tenant_id = {_TENANT})"
        )


def downgrade() -> None:
    op.execute(
        "UPDATE conversations SET status = 'ai', assigned_user_id = NULL "
        "WHERE status = 'human' AND assigned_agent_id IS NULL AND queued_at IS NULL AND NOT is_agent_console"
    )
    op.execute("DELETE FROM conversation_events WHERE actor_type = 'console_user'")
    op.drop_constraint("ck_conversation_events_actor_type", "conversation_events", type_="check")
    op.create_check_constraint("ck_conversation_events_actor_type", "conversation_events", _ACTORS_OLD)
    op.drop_constraint("ck_conversations_human_has_owner", "conversations", type_="check")
    op.create_check_constraint("ck_conversations_human_has_owner", "conversations", _OWNER_OLD)
    op.drop_index("ix_conversations_assigned_user_id", table_name="conversations")
    op.drop_column("conversations", "assigned_user_id")
    op.drop_table("console_conversation_reads")
    op.drop_table("console_api_tokens")
    op.drop_table("console_sessions")
    op.drop_table("console_users")
