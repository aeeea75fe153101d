"""Admin API for human agents: ``/v1/admin/tenants/{slug}/agents`` (``ADMIN_TOKEN`` bearer)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from fastapi import HTTPException, status
from pydantic import BaseModel, Field

from switchboard.api.deps import GatewayDep, SessionDep, SessionsDep, TenantDep
from switchboard.api.routers import tenant_admin_router
from switchboard.conversations import Actor
from switchboard.db.engine import session_scope
from switchboard.db.models import HumanAgent
from switchboard.handoff.agents import AgentExists, add_agent, list_agents
from switchboard.handoff.commands import CommandError, set_status
from switchboard.handoff.notices import write_outgoing

__all__ = ["agents_router", "AgentCreate", "AgentPublic", "AgentStatusUpdate"]

agents_router = tenant_admin_router("/agents", tags=["human agents"])


class AgentCreate(BaseModel):
    """A new human agent."""

    name: str = Field(min_length=1, max_length=200)
    phone: str = Field(min_length=7, max_length=32, description="International number, e.g. +15550102030.")
    online: bool = False


class AgentStatusUpdate(BaseModel):
    """Go online (takes every waiting conversation) or offline (refused while conversations are open)."""

    status: Literal["online", "offline"]


class AgentPublic(BaseModel):
    """A human agent as the API shows it."""

    id: uuid.UUID
    name: str
    phone: str
    status: str
    total_conversations: int
    current_load: int
    last_inbound_at: datetime | None

    @classmethod
    def of(cls, agent: HumanAgent) -> AgentPublic:
        return cls.model_validate(agent, from_attributes=True)


@agents_router.get("", response_model=list[AgentPublic], summary="List the tenant's human agents")
async def get_agents(tenant: TenantDep, session: SessionDep) -> list[AgentPublic]:
    return [AgentPublic.of(a) for a in await list_agents(session, tenant_id=tenant.id)]


@agents_router.post(
    "",
    response_model=AgentPublic,
    status_code=status.HTTP_201_CREATED,
    summary="Add a human agent",
    description="The agent's WhatsApp number becomes their console: messages from it are never treated "
    "as a customer's. 409: the number is taken in this tenant; 422: malformed number.",
)
async def post_agent(body: AgentCreate, tenant: TenantDep, sessions: SessionsDep) -> AgentPublic:
    try:
        async with session_scope(sessions) as session:
            agent = await add_agent(
                session, tenant_id=tenant.id, name=body.name, phone=body.phone, online=body.online
            )
    except AgentExists as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None
    return AgentPublic.of(agent)


@agents_router.patch(
    "/{agent_id}",
    response_model=AgentPublic,
    summary="Set an agent online or offline",
    description="Online: every conversation waiting in the queue goes to this agent (notices with a "
    "summary are queued for sending). Offline: 409 while the agent still has open conversations.",
)
async def patch_agent(
    agent_id: uuid.UUID,
    body: AgentStatusUpdate,
    tenant: TenantDep,
    sessions: SessionsDep,
    gateway: GatewayDep,
) -> AgentPublic:
    tenant_id = tenant.id
    async with sessions() as session:
        agent = await session.get(HumanAgent, agent_id)
    if agent is None or agent.tenant_id != tenant_id:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "agent not found for this tenant")
    try:
        notices = await set_status(
            sessions,
            gateway,
            agent_id=agent_id,
            online=body.status == "online",
            trace_id=f"admin-{uuid.uuid4().hex[:12]}",
            actor=Actor.api(),
        )
    except CommandError as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
    async with session_scope(sessions) as session:
        await write_outgoing(session, tenant_id=tenant_id, items=notices)
    async with sessions() as session:
        agent = await session.get(HumanAgent, agent_id)
    return AgentPublic.of(agent)
