"""Handoff operations that combine assignment, summaries and notices (one transaction each, then the model)."""

from __future__ import annotations

import uuid
from typing import Any

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
from switchboard.tenant_settings import load_tenant_settings

__all__ = ["escalate_and_notify", "notices_for_assignments", "assign_at_opening", "handoff_openings"]

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
) -> Assignment:
    """Escalate (assign or queue, one locked transaction), then write the agent's notice to the outbox.

    Args:
        actor: who asked for a person (``Actor.ai()`` for ``escalate_to_human``, the customer for a
            button, ``Actor.business_app()`` for a reply typed in the WhatsApp Business app).

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
    notices = await notices_for_assignments(
        sessions, gateway, agent_id=agent_id, conversation_ids=[conversation_id], trace_id=trace_id
    )
    async with session_scope(sessions) as session:
        await write_outgoing(session, tenant_id=tenant_id, items=notices, trace_id=trace_id)
    return assignment


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
