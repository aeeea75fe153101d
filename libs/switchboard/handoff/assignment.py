"""Choosing a human agent: least-loaded online agent, waiting queue, release and transfer.

Every change to who handles what runs inside :func:`tenant_handoff_lock`, a transaction-scoped
Postgres advisory lock per tenant (``pg_advisory_xact_lock``), and reads the agents ``FOR UPDATE``:
two escalations of the same tenant at the same moment are serialized, so the second sees the first
one's load and no conversation is assigned twice. The ordering: fewest
``total_conversations`` first, then lowest ``current_load``, then the longest-standing agent.

Status changes go through :mod:`switchboard.conversations.lifecycle` (which records them); this module
keeps the agents' counters and selection. It knows no transport: notices are written by
:mod:`switchboard.handoff.service`, sent by the channel's delivery.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, or_, text
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.conversations import lifecycle
from switchboard.conversations.lifecycle import Actor, ActorType
from switchboard.db.models import (
    AgentStatus,
    Conversation,
    ConversationStatus,
    HumanAgent,
    Team,
    TeamMember,
    utcnow,
)
from switchboard.handoff import hours
from switchboard.handoff.teams import default_team_id, is_member, teams_of_agent
from switchboard.tenant_settings import load_tenant_settings

__all__ = [
    "Assignment",
    "tenant_handoff_lock",
    "pick_agent",
    "escalate",
    "transfer",
    "release",
    "take_queue",
    "hand_to_console_user",
    "hand_to_agent",
    "give_to_team",
    "open_conversations_of",
    "queue_length",
    "count_assignment",
]


@dataclass(frozen=True)
class Assignment:
    """Outcome of one escalation or queue hand-out."""

    conversation_id: uuid.UUID
    agent: HumanAgent | None
    """The agent now handling it; ``None`` when it waits in the queue."""
    queue_position: int | None = None
    """1-based place in the tenant's waiting queue when ``agent`` is ``None``."""
    newly_assigned: bool = True
    """``False`` when ``agent`` already had the conversation (a second escalation): nobody needs telling."""
    opens_at: datetime | None = None
    """When it waits because the team is away (business hours): the next opening, UTC."""


async def tenant_handoff_lock(session: AsyncSession, tenant_id: uuid.UUID) -> None:
    """Serialize handoff changes of one tenant until the current transaction ends."""
    connection = await session.connection()
    await connection.execute(
        text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"), {"key": f"handoff:{tenant_id}"}
    )


async def pick_agent(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    exclude: uuid.UUID | None = None,
    team_id: uuid.UUID | None = None,
) -> HumanAgent | None:
    """The least-loaded online agent (row-locked), or ``None`` when nobody else is online.

    Call under :func:`tenant_handoff_lock`.

    Args:
        team_id: choose among that team's members only (``None``: any agent of the tenant).
    """
    query = (
        select(HumanAgent)
        .where(HumanAgent.tenant_id == tenant_id, HumanAgent.status == AgentStatus.online.value)
        .order_by(
            col(HumanAgent.total_conversations),
            col(HumanAgent.current_load),
            col(HumanAgent.created_at),
            col(HumanAgent.id),
        )
        .limit(1)
        .with_for_update()
    )
    if exclude is not None:
        query = query.where(HumanAgent.id != exclude)
    if team_id is not None:
        query = query.where(
            select(TeamMember.agent_id)
            .where(TeamMember.team_id == team_id, col(TeamMember.agent_id) == col(HumanAgent.id))
            .exists()
        )
    return (await session.exec(query)).first()


def count_assignment(agent: HumanAgent, conversation_id: uuid.UUID) -> None:
    """``agent`` took ``conversation_id``: counts up, it becomes the agent's selected conversation."""
    agent.total_conversations += 1
    agent.current_load += 1
    agent.active_conversation_id = conversation_id
    agent.updated_at = utcnow()


async def _uncount(session: AsyncSession, agent: HumanAgent, conversation_id: uuid.UUID) -> None:
    """``agent`` gave ``conversation_id`` up: load down, the selection moves to another open one."""
    agent.current_load = max(0, agent.current_load - 1)
    if agent.active_conversation_id == conversation_id:
        remaining = [c for c in await open_conversations_of(session, agent) if c.id != conversation_id]
        agent.active_conversation_id = remaining[-1].id if remaining else None
    agent.updated_at = utcnow()
    session.add(agent)


async def queue_length(session: AsyncSession, *, tenant_id: uuid.UUID) -> int:
    """Conversations of the tenant waiting for an agent."""
    return int(
        (
            await session.exec(
                select(func.count())
                .select_from(Conversation)
                .where(
                    Conversation.tenant_id == tenant_id,
                    col(Conversation.queued_at).is_not(None),
                    Conversation.status == ConversationStatus.human.value,
                )
            )
        ).one()
    )


async def escalate(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    conversation_id: uuid.UUID,
    reason: str,
    actor: Actor,
    trace_id: str | None = None,
) -> Assignment:
    """Switch the conversation to human mode and assign it, or queue it when nobody is online or the
    team is away (the tenant's business hours; the result's ``opens_at`` says until when).

    Runs in the caller's transaction (takes the tenant lock). A conversation that already has an
    agent keeps it (a second escalation changes only the reason). Business hours hold back requests
    of the customer, the AI and the system; a person's own takeover (the Business app) is never held.

    Args:
        actor: who asked (the model, the customer's button, the WhatsApp Business app...).

    Raises:
        LookupError: the conversation is not this tenant's.
        InvalidTransition: the conversation is closed.
    """
    await tenant_handoff_lock(session, tenant_id)
    conversation = (
        await session.exec(
            select(Conversation)
            .where(Conversation.id == conversation_id, Conversation.tenant_id == tenant_id)
            .with_for_update()
        )
    ).first()
    if conversation is None:
        raise LookupError(f"conversation {conversation_id} not found for tenant {tenant_id}")
    if conversation.assigned_agent_id is not None and conversation.status == ConversationStatus.human:
        current = await session.get(HumanAgent, conversation.assigned_agent_id)
        await lifecycle.to_human(
            session,
            conversation,
            agent_id=conversation.assigned_agent_id,
            actor=actor,
            reason=reason,
            trace_id=trace_id,
        )
        await session.flush()
        return Assignment(conversation.id, current, newly_assigned=False)
    if conversation.team_id is None:  # nobody chose a team: the tenant's default team, if any
        conversation.team_id = await default_team_id(session, tenant_id, conversation.channel)
    opens_at = await _away_until(session, tenant_id, actor)
    agent = (
        None
        if opens_at is not None
        else await pick_agent(session, tenant_id=tenant_id, team_id=conversation.team_id)
    )
    await lifecycle.to_human(
        session,
        conversation,
        agent_id=agent.id if agent is not None else None,
        actor=actor,
        reason=reason,
        trace_id=trace_id,
    )
    if agent is None:
        await session.flush()
        position = await queue_length(session, tenant_id=tenant_id)
        return Assignment(conversation.id, None, queue_position=position, opens_at=opens_at)
    count_assignment(agent, conversation.id)
    session.add(agent)
    await session.flush()
    return Assignment(conversation.id, agent)


_HELD_BY_HOURS = frozenset({ActorType.ai, ActorType.customer, ActorType.system})
"""Who asks for a person in a way business hours hold back until the next opening."""


async def _away_until(session: AsyncSession, tenant_id: uuid.UUID, actor: Actor) -> datetime | None:
    """The next opening when the tenant's team is away now and ``actor``'s request must wait, else ``None``
    (an enabled schedule has a period and at most 366 holidays, so an opening is always found)."""
    if actor.type not in _HELD_BY_HOURS:
        return None
    week = hours.business_hours(await load_tenant_settings(session, tenant_id))
    now = hours.utcnow()
    if week is None or week.is_open(now):
        return None
    return week.next_opening(now)


async def open_conversations_of(session: AsyncSession, agent: HumanAgent) -> list[Conversation]:
    """The agent's human-mode conversations, oldest assignment first (``/switch N`` numbers them 1..n)."""
    rows = await session.exec(
        select(Conversation)
        .where(
            Conversation.tenant_id == agent.tenant_id,
            Conversation.assigned_agent_id == agent.id,
            Conversation.status == ConversationStatus.human.value,
        )
        .order_by(col(Conversation.assigned_at), col(Conversation.id))
    )
    return list(rows.all())


async def release(
    session: AsyncSession,
    conversation: Conversation,
    agent: HumanAgent,
    *,
    actor: Actor,
    reason: str | None = None,
    trace_id: str | None = None,
) -> None:
    """Hand ``conversation`` back to the AI (``/end``): off ``agent``, whose load goes down and whose
    selection moves to another open conversation. Call under :func:`tenant_handoff_lock`.

    Raises:
        InvalidTransition: the conversation is not in human mode.
    """
    await lifecycle.back_to_ai(session, conversation, actor=actor, reason=reason, trace_id=trace_id)
    await session.flush()
    await _uncount(session, agent, conversation.id)


async def closed_by_person(session: AsyncSession, agent: HumanAgent, conversation_id: uuid.UUID) -> None:
    """``agent``'s conversation was closed by a person of the team (the console,
    :func:`switchboard.conversations.lifecycle.close` with ``by_person``): their load goes down and their
    selection moves to another open one. Call under :func:`tenant_handoff_lock`, after the close."""
    await session.flush()
    await _uncount(session, agent, conversation_id)


async def transfer(
    session: AsyncSession,
    conversation: Conversation,
    *,
    from_agent: HumanAgent,
    to_agent: HumanAgent,
    actor: Actor,
    trace_id: str | None = None,
) -> None:
    """Move a human-mode conversation from one agent to another (``/transfer``), counters included.
    Call under :func:`tenant_handoff_lock` with both agents locked."""
    await lifecycle.reassign(
        session,
        conversation,
        agent_id=to_agent.id,
        actor=actor,
        reason=f"transferred from {from_agent.name} to {to_agent.name}",
        trace_id=trace_id,
    )
    await session.flush()
    await _uncount(session, from_agent, conversation.id)
    count_assignment(to_agent, conversation.id)
    session.add(to_agent)
    await session.flush()


async def hand_to_console_user(
    session: AsyncSession,
    conversation: Conversation,
    *,
    user_id: uuid.UUID,
    reason: str,
    trace_id: str | None = None,
) -> HumanAgent | None:
    """A web console user takes ``conversation`` (from the AI, the queue, a WhatsApp agent or another
    console user). A WhatsApp agent who had it is counted off. Call under :func:`tenant_handoff_lock`.

    Returns:
        The WhatsApp agent it was taken from (to tell them), or ``None``.

    Raises:
        InvalidTransition: the conversation is closed or an agent's own console.
    """
    previous = (
        await session.get(HumanAgent, conversation.assigned_agent_id, with_for_update=True)
        if conversation.assigned_agent_id
        else None
    )
    await lifecycle.to_console_user(session, conversation, user_id=user_id, reason=reason, trace_id=trace_id)
    await session.flush()
    if previous is not None:
        await _uncount(session, previous, conversation.id)
    return previous


async def hand_to_agent(
    session: AsyncSession,
    conversation: Conversation,
    *,
    agent: HumanAgent,
    actor: Actor,
    reason: str,
    trace_id: str | None = None,
) -> None:
    """Give a conversation to a WhatsApp agent from the web console (from the AI, the queue, a console
    user or another agent), counters included. Call under :func:`tenant_handoff_lock` with ``agent``
    locked; the caller writes the agent's notice.

    Raises:
        InvalidTransition: the conversation is closed or an agent's own console.
    """
    if conversation.is_agent_console:
        raise lifecycle.InvalidTransition(
            conversation.id, conversation.status, ConversationStatus.human.value
        )
    previous = (
        await session.get(HumanAgent, conversation.assigned_agent_id, with_for_update=True)
        if conversation.assigned_agent_id and conversation.assigned_agent_id != agent.id
        else None
    )
    if conversation.status == ConversationStatus.human.value:
        await lifecycle.reassign(
            session, conversation, agent_id=agent.id, actor=actor, reason=reason, trace_id=trace_id
        )
    else:
        await lifecycle.to_human(
            session, conversation, agent_id=agent.id, actor=actor, reason=reason, trace_id=trace_id
        )
    await session.flush()
    if previous is not None:
        await _uncount(session, previous, conversation.id)
    count_assignment(agent, conversation.id)
    session.add(agent)
    await session.flush()


async def take_queue(
    session: AsyncSession, *, agent: HumanAgent, actor: Actor | None = None, trace_id: str | None = None
) -> list[Conversation]:
    """Give every waiting conversation of the agent's tenant to ``agent`` (oldest first), except those
    given to a team the agent is not in.

    Call under :func:`tenant_handoff_lock` with ``agent`` online.

    Args:
        actor: who put the agent online (default: the agent).
    """
    teams = await teams_of_agent(session, agent)
    rows = await session.exec(
        select(Conversation)
        .where(
            Conversation.tenant_id == agent.tenant_id,
            col(Conversation.queued_at).is_not(None),
            Conversation.status == ConversationStatus.human.value,
            # a conversation given to a team waits for one of its members
            or_(col(Conversation.team_id).is_(None), col(Conversation.team_id).in_(teams)),
        )
        .order_by(col(Conversation.queued_at), col(Conversation.id))
        .with_for_update()
    )
    taken = list(rows.all())
    for conversation in taken:
        await lifecycle.reassign(
            session,
            conversation,
            agent_id=agent.id,
            actor=actor or Actor.agent(agent.id),
            reason=f"taken from the queue by {agent.name}",
            trace_id=trace_id,
        )
        count_assignment(agent, conversation.id)
    session.add(agent)
    await session.flush()
    return taken


async def give_to_team(
    session: AsyncSession,
    conversation: Conversation,
    *,
    team: Team,
    actor: Actor,
    reason: str,
    trace_id: str | None = None,
) -> HumanAgent | None:
    """Give a conversation to ``team`` from the console (from the AI, the queue or a person): a member who
    has it keeps it; otherwise the team's least-loaded online agent gets it, counters included; with none
    of them online it waits in the queue for the team. Call under :func:`tenant_handoff_lock`.

    Returns:
        The agent it was newly given to (the caller writes their notice), or ``None`` (kept, or waiting).

    Raises:
        InvalidTransition: the conversation is closed or an agent's own console.
    """
    if conversation.status == ConversationStatus.closed.value or conversation.is_agent_console:
        raise lifecycle.InvalidTransition(
            conversation.id, conversation.status, ConversationStatus.human.value
        )
    conversation.team_id = team.id
    session.add(conversation)
    current = conversation.assigned_agent_id
    if (
        current is not None
        and conversation.status == ConversationStatus.human.value
        and await is_member(session, team_id=team.id, agent_id=current)
    ):
        await session.flush()
        return None
    agent = await pick_agent(session, tenant_id=conversation.tenant_id, team_id=team.id)
    if agent is not None:
        await hand_to_agent(session, conversation, agent=agent, actor=actor, reason=reason, trace_id=trace_id)
        return agent
    previous = (
        await session.get(HumanAgent, current, with_for_update=True)
        if current is not None and conversation.status == ConversationStatus.human.value
        else None
    )
    await lifecycle.to_human(
        session, conversation, agent_id=None, actor=actor, reason=reason, trace_id=trace_id
    )
    await session.flush()
    if previous is not None:
        await _uncount(session, previous, conversation.id)
    return None
