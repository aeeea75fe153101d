"""Handoff operations that combine assignment, summaries and notices (one transaction each, then the model).

The customer never waits for the model's summary: :func:`escalate_and_notify` commits the escalation
and queues the agent's notice as the background job ``handoff_notice`` (:func:`handoff_notice`), which
writes the summary and the notice and asks the chat worker to send it. The customer's reply is written
and sent by the caller right away.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.conversations import Actor, lifecycle
from switchboard.db.engine import session_scope
from switchboard.db.models import Conversation, ConversationStatus, Customer, HumanAgent
from switchboard.handoff import hours
from switchboard.handoff.assignment import (
    Assignment,
    count_assignment,
    escalate,
    open_conversations_of,
    pick_agent,
    tenant_handoff_lock,
)
from switchboard.handoff.notices import Outgoing, agent_outgoing, assignment_notice, write_outgoing
from switchboard.handoff.summary import write_handoff_summary
from switchboard.llm.router import ModelGateway
from switchboard.observability import get_logger
from switchboard.queue.jobs import enqueue_handoff_notice
from switchboard.tenant_settings import load_tenant_settings

if TYPE_CHECKING:
    from arq.connections import ArqRedis

__all__ = [
    "escalate_and_notify",
    "notices_for_assignments",
    "assign_at_opening",
    "handoff_notice",
    "handoff_openings",
]

log = get_logger(__name__)


async def notices_for_assignments(
    sessions: async_sessionmaker[AsyncSession],
    gateway: ModelGateway | None,
    *,
    agent_id: uuid.UUID,
    conversation_ids: list[uuid.UUID],
    trace_id: str,
    transfer_from: str | None = None,
    assigned_by: str | None = None,
) -> list[Outgoing]:
    """One notice per conversation newly given to the agent (customer, reason, LLM summary).

    Without a gateway the summary quotes the customer's messages (see :func:`write_handoff_summary`).
    """
    out: list[Outgoing] = []
    for conversation_id in conversation_ids:
        async with sessions() as session:
            agent = await session.get(HumanAgent, agent_id)
            conversation = await session.get(Conversation, conversation_id)
            if agent is None or conversation is None:
                continue
            customer = await session.get(Customer, conversation.customer_id)
            assert customer is not None
            open_ids = [c.id for c in await open_conversations_of(session, agent)]
        summary = await write_handoff_summary(
            sessions,
            gateway,
            tenant_id=agent.tenant_id,
            conversation_id=conversation_id,
            trace_id=trace_id,
        )
        position = open_ids.index(conversation_id) + 1 if conversation_id in open_ids else len(open_ids)
        text = assignment_notice(
            customer=customer,
            reason=conversation.escalation_reason,
            summary=summary,
            position=position,
            total=len(open_ids),
            transfer_from=transfer_from,
            assigned_by=assigned_by,
            conversation_id=conversation_id,
        )
        out.append(agent_outgoing(agent, text, conversation_id))
    return out


async def escalate_and_notify(
    sessions: async_sessionmaker[AsyncSession],
    gateway: ModelGateway | None,
    *,
    tenant_id: uuid.UUID,
    conversation_id: uuid.UUID,
    reason: str,
    trace_id: str,
    actor: Actor,
    redis: ArqRedis | None = None,
) -> Assignment:
    """Escalate (assign or queue, one locked transaction), then see that the agent is told.

    With a queue (``redis``) the notice is the background job ``handoff_notice``: this returns as soon as
    it is queued, without any model call, so the caller sends the customer's reply at once. A failed
    enqueue writes the notice now with the customer's messages quoted (no model call either). Without a
    queue (a process embedding the agent) the notice and its model summary are written here.

    Args:
        actor: who asked for a person (``Actor.ai()`` for ``escalate_to_human``, the customer for a
            button, ``Actor.business_app()`` for a reply typed in the WhatsApp Business app).
        redis: the ARQ pool the notice job is queued on.

    Raises:
        LookupError: the conversation is not this tenant's.
        InvalidTransition: the conversation is closed.
    """
    async with session_scope(sessions) as session:
        assignment = await escalate(
            session,
            tenant_id=tenant_id,
            conversation_id=conversation_id,
            reason=reason,
            actor=actor,
            trace_id=trace_id,
        )
        agent_id = assignment.agent.id if assignment.agent is not None else None
    if agent_id is None:
        log.info(
            "handoff_queued", conversation_id=str(conversation_id), queue_position=assignment.queue_position
        )
        return assignment
    if not assignment.newly_assigned:
        # Escalated again (two at once, or the model asked twice): the agent was told the first time.
        log.info("handoff_already_assigned", conversation_id=str(conversation_id), agent_id=str(agent_id))
        return assignment
    log.info("handoff_assigned", conversation_id=str(conversation_id), agent_id=str(agent_id))
    if redis is not None:
        try:
            await enqueue_handoff_notice(
                redis,
                tenant_id=tenant_id,
                conversation_id=conversation_id,
                agent_id=agent_id,
                trace_id=trace_id or uuid.uuid4().hex,
            )
            return assignment
        except Exception as exc:  # noqa: BLE001 (the agent is told now instead, without a model call)
            log.error("handoff_notice_not_queued", error=f"{type(exc).__name__}: {exc}"[:300])
            gateway = None
    await _write_notices(sessions, gateway, tenant_id, agent_id, conversation_id, trace_id)
    return assignment


async def _write_notices(
    sessions: async_sessionmaker[AsyncSession],
    gateway: ModelGateway | None,
    tenant_id: uuid.UUID,
    agent_id: uuid.UUID,
    conversation_id: uuid.UUID,
    trace_id: str,
) -> int:
    """Write the agent's notice of ``conversation_id`` to the outbox; returns the notices written."""
    notices = await notices_for_assignments(
        sessions, gateway, agent_id=agent_id, conversation_ids=[conversation_id], trace_id=trace_id
    )
    async with session_scope(sessions) as session:
        await write_outgoing(session, tenant_id=tenant_id, items=notices, trace_id=trace_id)
    return len(notices)


async def handoff_notice(
    ctx: dict[str, Any], tenant_id: str, conversation_id: str, agent_id: str, trace_id: str
) -> dict[str, int]:
    """ARQ job (background queue): the notice telling ``agent_id`` that ``conversation_id`` is theirs,
    with the model's summary (the customer's messages quoted when the model fails or is slow,
    :func:`~switchboard.handoff.summary.write_handoff_summary`), written to the outbox and sent by the
    chat worker (the outbox sweep sends it if that request is lost).

    A conversation no longer assigned to that agent (given back, closed, transferred meanwhile) gets no
    notice: the newer assignment told its own agent.

    Returns:
        ``{"notices": 0 | 1}``.
    """
    from switchboard.outbox.jobs import deliver_soon

    deps = ctx["deps"]
    sessions: async_sessionmaker[AsyncSession] = deps.resources.sessions
    conversation_uuid, agent_uuid = uuid.UUID(conversation_id), uuid.UUID(agent_id)
    async with sessions() as session:
        conversation = await session.get(Conversation, conversation_uuid)
    if conversation is None or conversation.assigned_agent_id != agent_uuid:
        log.info("handoff_notice_outdated", conversation_id=conversation_id, agent_id=agent_id)
        return {"notices": 0}
    written = await _write_notices(
        sessions,
        getattr(deps, "gateway", None),
        uuid.UUID(tenant_id),
        agent_uuid,
        conversation_uuid,
        trace_id,
    )
    await deliver_soon(deps.resources.redis, conversation_uuid, source="handoff-notice")
    return {"notices": written}


OPENING_REASON = "assigned when the team opened"


def _waiting() -> Any:
    """Conversations waiting in a queue with nobody assigned."""
    return select(Conversation).where(
        col(Conversation.queued_at).is_not(None),
        col(Conversation.assigned_agent_id).is_(None),
        Conversation.status == ConversationStatus.human.value,
    )


async def assign_at_opening(
    sessions: async_sessionmaker[AsyncSession], gateway: ModelGateway | None, *, tenant_id: uuid.UUID
) -> int:
    """Once the tenant's business hours are open, give the conversations that waited for the opening to the
    online agents (least loaded first, oldest waiting first) and tell each agent, as an escalation would.

    A tenant without business hours is left alone (its queue waits for an agent to come ``/online``).

    Returns:
        Conversations assigned now.
    """
    async with sessions() as session:
        week = hours.business_hours(await load_tenant_settings(session, tenant_id))
    if week is None or not week.is_open(hours.utcnow()):
        return 0
    given: list[tuple[uuid.UUID, uuid.UUID]] = []
    async with session_scope(sessions) as session:
        await tenant_handoff_lock(session, tenant_id)
        waiting = (
            await session.exec(
                _waiting()
                .where(Conversation.tenant_id == tenant_id)
                .order_by(col(Conversation.queued_at), col(Conversation.id))
                .with_for_update()
            )
        ).all()
        for conversation in waiting:
            agent = await pick_agent(session, tenant_id=tenant_id, team_id=conversation.team_id)
            if agent is None:
                continue  # nobody of its team is online: the next one may be another team's
            await lifecycle.reassign(
                session, conversation, agent_id=agent.id, actor=Actor.system(), reason=OPENING_REASON
            )
            count_assignment(agent, conversation.id)
            session.add(agent)
            await session.flush()
            given.append((agent.id, conversation.id))
    for agent_id, conversation_id in given:
        trace_id = uuid.uuid4().hex
        notices = await notices_for_assignments(
            sessions, gateway, agent_id=agent_id, conversation_ids=[conversation_id], trace_id=trace_id
        )
        async with session_scope(sessions) as session:
            await write_outgoing(session, tenant_id=tenant_id, items=notices, trace_id=trace_id)
    if given:
        log.info("handoff_assigned_at_opening", tenant_id=str(tenant_id), conversations=len(given))
    return len(given)


async def handoff_openings(ctx: dict[str, Any]) -> dict[str, int]:
    """ARQ cron job: :func:`assign_at_opening` for every tenant with conversations waiting unassigned; the
    notices go out with the outbox sweep.

    Returns:
        ``{"assigned": N}``.
    """
    sessions: async_sessionmaker[AsyncSession] = ctx["deps"].resources.sessions
    async with sessions() as session:
        tenants = list(
            (await session.exec(_waiting().with_only_columns(Conversation.tenant_id).distinct())).all()
        )
    assigned = 0
    for tenant_id in tenants:
        assigned += await assign_at_opening(sessions, None, tenant_id=tenant_id)
    return {"assigned": assigned}
