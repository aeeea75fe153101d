"""Human agents: the tenant's staff who answer handed-off conversations from their own WhatsApp."""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum

from sqlalchemy import CheckConstraint, String, UniqueConstraint
from sqlmodel import Field, SQLModel

from switchboard.db.models.base import (
    TenantOwned,
    created_at_field,
    id_field,
    optional_time_field,
    updated_at_field,
)


class AgentStatus(StrEnum):
    online = "online"
    offline = "offline"


class HumanAgent(TenantOwned, table=True):
    """A person who takes over conversations; their console is their WhatsApp chat with the business."""

    __tablename__ = "human_agents"
    __table_args__ = (
        UniqueConstraint("tenant_id", "phone", name="uq_human_agents_tenant_phone"),
        CheckConstraint("status IN ('online', 'offline')", name="ck_human_agents_status"),
    )

    id: uuid.UUID = id_field()
    name: str = Field(max_length=200)
    phone: str = Field(max_length=32)
    """E.164 digits without ``+``; messages from this number are never treated as a customer's."""
    status: str = Field(default=AgentStatus.offline.value, sa_type=String(16))
    total_conversations: int = Field(default=0)
    """Conversations ever assigned (the least-loaded ordering key)."""
    current_load: int = Field(default=0)
    """Conversations assigned right now."""
    last_inbound_at: datetime | None = optional_time_field()
    """When the agent last wrote to the business number (their own 24-hour window)."""
    active_conversation_id: uuid.UUID | None = Field(default=None)
    """The conversation the agent's plain messages go to (``/switch N``, a reply, the latest assignment)."""
    created_at: datetime = created_at_field()
    updated_at: datetime = updated_at_field()


class Team(TenantOwned, table=True):
    """A named group of a tenant's human agents: a conversation given to a team is assigned among its
    online members (:mod:`switchboard.handoff.teams`)."""

    __tablename__ = "teams"
    __table_args__ = (UniqueConstraint("tenant_id", "name", name="uq_teams_tenant_name"),)

    id: uuid.UUID = id_field()
    name: str = Field(max_length=100)
    created_at: datetime = created_at_field()
    updated_at: datetime = updated_at_field()


class TeamMember(SQLModel, table=True):
    """One agent in one team (an agent may be in several teams)."""

    __tablename__ = "team_members"

    team_id: uuid.UUID = Field(foreign_key="teams.id", primary_key=True, ondelete="CASCADE")
    agent_id: uuid.UUID = Field(
        foreign_key="human_agents.id", primary_key=True, index=True, ondelete="CASCADE"
    )
    tenant_id: uuid.UUID = Field(foreign_key="tenants.id", index=True, ondelete="CASCADE")
