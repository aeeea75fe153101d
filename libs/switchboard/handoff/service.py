"""Handoff operations that combine assignment, summaries and notices (one transaction each, then the model)."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.conversations import Actor
from switchboard.db.engine import session_scope
from switchboard.db.models import Conversation, Customer, HumanAgent
from switchboard.handoff.assignment import Assignment, escalate, open_conversations_of
from switchboard.handoff.notices import Outgoing, agent_outgoing, assignment_notice, write_outgoing
from switchboard.handoff.summary import write_handoff_summary
from switchboard.llm.router import ModelGateway
from switchboard.observability import get_logger

__all__ = ["escalate_and_notify", "notices_for_assignments"]

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
