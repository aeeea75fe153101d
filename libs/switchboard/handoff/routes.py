"""Admin API for human agents: ``/v1/admin/tenants/{tenant}/agents`` (``ADMIN_TOKEN`` bearer)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from fastapi import APIRouter, HTTPException, Request, status
from pydantic import BaseModel, Field

from switchboard.agent.routes import orchestrator_from_app
from switchboard.api.auth import AdminAuth
from switchboard.conversations import Actor
from switchboard.db.engine import session_scope
from switchboard.db.models import HumanAgent
from switchboard.errors import TenantNotFound
from switchboard.handoff.agents import AgentExists, add_agent, list_agents
from switchboard.handoff.commands import CommandError, set_status
from switchboard.handoff.notices import write_outgoing
from switchboard.tenants import get_tenant

__all__ = ["agents_router", "AgentCreate", "AgentPublic", "AgentStatusUpdate"]

agents_router = APIRouter(
    prefix="/v1/admin/tenants/{tenant}/agents", tags=["human agents"], dependencies=[AdminAuth]
)


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


async def _tenant_id(request: Request, tenant: str) -> uuid.UUID:
    async with request.app.state.resources.sessions() as session:
        try:
            return (await get_tenant(session, tenant)).id
        except TenantNotFound:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"tenant {tenant!r} not found") from None


@agents_router.get("", response_model=list[AgentPublic], summary="List the tenant's human agents")
async def get_agents(tenant: str, request: Request) -> list[AgentPublic]:
    tenant_id = await _tenant_id(request, tenant)
    async with request.app.state.resources.sessions() as session:
        return [AgentPublic.of(a) for a in await list_agents(session, tenant_id=tenant_id)]


@agents_router.post(
    "",
    response_model=AgentPublic,
    status_code=status.HTTP_201_CREATED,
    summary="Add a human agent",
    description="The agent's WhatsApp number becomes their console: messages from it are never treated "
    "as a customer's. 409: the number is taken in this tenant; 422: malformed number.",
)
async def post_agent(tenant: str, body: AgentCreate, request: Request) -> AgentPublic:
    tenant_id = await _tenant_id(request, tenant)
    try:
        async with session_scope(request.app.state.resources.sessions) as session:
            agent = await add_agent(
                session, tenant_id=tenant_id, name=body.name, phone=body.phone, online=body.online
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
    tenant: str, agent_id: uuid.UUID, body: AgentStatusUpdate, request: Request
) -> AgentPublic:
    tenant_id = await _tenant_id(request, tenant)
    sessions = request.app.state.resources.sessions
    async with sessions() as session:
        agent = await session.get(HumanAgent, agent_id)
    if agent is None or agent.tenant_id != tenant_id:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "agent not found for this tenant")
    try:
        notices = await set_status(
            sessions,
            orchestrator_from_app(request).gateway,
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
