"""Teams: named groups of a tenant's human agents, for routing and the inbox's filter.

Revision ID: 0034_teams
Revises: 0033_csat
Create Date: 2026-12-07 21:40:00

* ``teams``: a tenant's teams, unique per tenant and name.
* ``team_members``: which agents are in which team (an agent may be in several).
* ``conversations.team_id``: the team a conversation was given to (its automatic assignment picks among
  that team's online agents); null: any agent.
* Row-level security as in 0012 (the tool role sees no other tenant's rows and gets no grant).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0034_teams"
down_revision: str | None = "0033_csat"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLE = "switchboard_tools"
POLICY = "tool_server_tenant_isolation"
_TENANT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"


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
        "teams",
        sa.Column("id", sa.Uuid(), primary_key=True),
        _tenant(),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.text("now()")),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.text("now()")),
        sa.UniqueConstraint("tenant_id", "name", name="uq_teams_tenant_name"),
    )
    _isolate("teams")
    op.create_table(
        "team_members",
        sa.Column("team_id", sa.Uuid(), sa.ForeignKey("teams.id", ondelete="CASCADE"), primary_key=True),
        sa.Column(
            "agent_id", sa.Uuid(), sa.ForeignKey("human_agents.id", ondelete="CASCADE"), primary_key=True
        ),
        _tenant(),
    )
    op.create_index("ix_team_members_agent_id", "team_members", ["agent_id"])
    _isolate("team_members")
    op.add_column(
        "conversations",
        sa.Column("team_id", sa.Uuid(), sa.ForeignKey("teams.id", ondelete="SET NULL"), nullable=True),
    )
    op.create_index("ix_conversations_team_id", "conversations", ["team_id"])


def downgrade() -> None:
    op.drop_index("ix_conversations_team_id", table_name="conversations")
    op.drop_column("conversations", "team_id")
    op.drop_table("team_members")
    op.drop_table("teams")
