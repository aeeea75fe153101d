"""A conversation's lifecycle, written in one place: opened, to a human, back to the AI, closed.

Only this module changes ``conversations.status``, ``assigned_agent_id``, ``assigned_at``,
``queued_at``, ``closed_at`` and ``status_actor_type`` (who made the newest transition); every change is recorded as a ``conversation_events`` row (from and to
status, the agent handling it afterwards, who acted, why, the trace id). The transitions:

==========  ==========  =============================================================
from        to          function
==========  ==========  =============================================================
(none)      ai          :func:`open_conversation` / :func:`start_conversation`
ai, human   human       :func:`to_human` (an agent, or the queue), :func:`reassign`
ai, human   human       :func:`to_console_user` (a person in the web console takes it over)
ai          human       :func:`to_agent_console` (a human agent's own chat)
human       ai          :func:`back_to_ai`
ai          closed      :func:`close`
==========  ==========  =============================================================

Invariant (database check ``ck_conversations_human_has_owner``): a conversation in human mode has an
assigned agent (``assigned_agent_id``: on WhatsApp; ``assigned_user_id``: in the web console), a place
in the queue, or is an agent's console. Each function runs in the caller's
transaction on a conversation loaded in that session (lock it, ``FOR UPDATE``, where two writers may
meet); agents' load counters are the handoff's business (:mod:`switchboard.handoff.assignment`).
This module knows no transport.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.conversations import csat
from switchboard.db.models import (
    ActorType,
    Conversation,
    ConversationEvent,
    ConversationStatus,
    Customer,
    utcnow,
)
from switchboard.errors import SwitchboardError
from switchboard.events import stage_event
from switchboard.observability import get_logger, metrics

__all__ = [
    "Actor",
    "InvalidTransition",
    "back_to_ai",
    "close",
    "reopen",
    "events_of",
    "open_conversation",
    "reassign",
    "start_conversation",
    "to_agent_console",
    "to_console_user",
    "to_human",
]

log = get_logger(__name__)

REASON_MAX_CHARS = 2_000
"""``escalation_reason`` and event reasons are cut to this many characters."""


@dataclass(frozen=True)
class Actor:
    """Who causes a transition (``conversation_events.actor_type`` / ``actor_id``)."""

    type: ActorType
    id: str | None = None
    """The agent's or customer's id when the actor is one of them."""

    @classmethod
    def agent(cls, agent_id: uuid.UUID) -> Actor:
        return cls(ActorType.agent, str(agent_id))

    @classmethod
    def customer(cls, customer_id: uuid.UUID) -> Actor:
        return cls(ActorType.customer, str(customer_id))

    @classmethod
    def ai(cls) -> Actor:
        return cls(ActorType.ai)

    @classmethod
    def business_app(cls) -> Actor:
        return cls(ActorType.business_app)

    @classmethod
    def system(cls) -> Actor:
        return cls(ActorType.system)

    @classmethod
    def api(cls) -> Actor:
        return cls(ActorType.api)

    @classmethod
    def console_user(cls, user_id: uuid.UUID) -> Actor:
        return cls(ActorType.console_user, str(user_id))


class InvalidTransition(SwitchboardError):
    """The conversation is not in a status the transition starts from (a programming or race error).

    Attributes:
        conversation_id: the conversation.
        status: its status now.
        wanted: the status the caller asked for.
    """

    def __init__(self, conversation_id: uuid.UUID, status: str, wanted: str) -> None:
        self.conversation_id = conversation_id
        self.status = status
        self.wanted = wanted
        super().__init__(f"conversation {conversation_id} is {status}: cannot go to {wanted}")


def _cut(reason: str | None) -> str | None:
    return reason[:REASON_MAX_CHARS] if reason else None


def _record(
    session: AsyncSession,
    conversation: Conversation,
    *,
    from_status: str | None,
    actor: Actor,
    reason: str | None,
    trace_id: str | None,
    now: datetime,
) -> ConversationEvent:
    event = ConversationEvent(
        tenant_id=conversation.tenant_id,
        conversation_id=conversation.id,
        from_status=from_status,
        to_status=conversation.status,
        agent_id=conversation.assigned_agent_id if conversation.status == ConversationStatus.human else None,
        actor_type=actor.type.value,
        actor_id=actor.id,
        reason=_cut(reason),
        trace_id=(trace_id or None) and trace_id[:64],
        created_at=now,
    )
    conversation.updated_at = now
    conversation.status_actor_type = actor.type.value  # the takeover marker the worker reads
    session.add(conversation)
    session.add(event)
    _stage_webhook_event(session, conversation, from_status=from_status, actor=actor, reason=reason)
    log.info(
        "conversation_transition",
        conversation_id=str(conversation.id),
        from_status=from_status,
        to_status=conversation.status,
        actor_type=actor.type.value,
        agent_id=str(event.agent_id) if event.agent_id else None,
    )
    return event


def _stage_webhook_event(
    session: AsyncSession,
    conversation: Conversation,
    *,
    from_status: str | None,
    actor: Actor,
    reason: str | None,
) -> None:
    """The tenant's event for a transition (:mod:`switchboard.events`), in the same transaction:
    ``conversation.created`` (``None → ai``), ``conversation.handed_off`` (to a person or the queue; not
    an agent's own console chat, not a transfer between people), ``conversation.closed``."""
    base = {"conversation_id": conversation.id, "channel": conversation.channel}
    if from_status is None:
        stage_event(
            session,
            tenant_id=conversation.tenant_id,
            event_type="conversation.created",
            data={**base, "customer_id": conversation.customer_id},
        )
    elif conversation.status == ConversationStatus.closed:
        stage_event(
            session,
            tenant_id=conversation.tenant_id,
            event_type="conversation.closed",
            data={**base, "reason": _cut(reason), "actor_type": actor.type.value},
        )
    elif (
        conversation.status == ConversationStatus.human
        and from_status != ConversationStatus.human
        and not conversation.is_agent_console
    ):
        stage_event(
            session,
            tenant_id=conversation.tenant_id,
            event_type="conversation.handed_off",
            data={
                **base,
                "agent_id": conversation.assigned_agent_id,
                "reason": _cut(reason),
                "actor_type": actor.type.value,
            },
        )


async def start_conversation(
    session: AsyncSession,
    *,
    customer: Customer,
    channel_account_id: uuid.UUID | None,
    actor: Actor | None = None,
    reason: str | None = None,
    trace_id: str | None = None,
    thread_key: str | None = None,
) -> Conversation:
    """A new AI-mode conversation of ``customer`` on their channel (event ``None → ai``).

    Args:
        channel_account_id: the business number/account it runs on (``None``: none, e.g. a simulation).
        actor: who opened it (default: the customer).
        thread_key: the provider's thread it follows (Gmail ``threadId``), stored as ``external_thread_id``.
    """
    now = utcnow()
    conversation = Conversation(
        tenant_id=customer.tenant_id,
        customer_id=customer.id,
        channel_account_id=channel_account_id,
        external_thread_id=thread_key,
        channel=customer.channel,
        status=ConversationStatus.ai.value,
        created_at=now,
        updated_at=now,
    )
    session.add(conversation)
    await session.flush()
    _record(
        session,
        conversation,
        from_status=None,
        actor=actor or Actor.customer(customer.id),
        reason=reason,
        trace_id=trace_id,
        now=now,
    )
    await session.flush()
    return conversation


async def open_conversation(
    session: AsyncSession,
    *,
    customer: Customer,
    channel_account_id: uuid.UUID | None,
    actor: Actor | None = None,
    trace_id: str | None = None,
    thread_key: str | None = None,
) -> Conversation:
    """The customer's open (``ai`` or ``human``) conversation on ``channel_account_id``, newest first;
    started (:func:`start_conversation`) when there is none.

    With ``thread_key`` (channels whose conversations are threads: Gmail's ``threadId``) only the open
    conversation of that thread counts, so two threads of one customer are two conversations.

    Serialized per customer with a transaction-scoped advisory lock, so two messages at once open one.
    """
    await session.exec(
        text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 0))"),
        params={"k": f"conversation:{customer.id}"},
    )
    found = (
        await session.exec(
            select(Conversation)
            .where(
                Conversation.tenant_id == customer.tenant_id,
                Conversation.customer_id == customer.id,
                Conversation.channel == customer.channel,
                col(Conversation.channel_account_id).is_not_distinct_from(channel_account_id),
                col(Conversation.external_thread_id).is_not_distinct_from(thread_key),
                col(Conversation.status).in_((ConversationStatus.ai.value, ConversationStatus.human.value)),
            )
            .order_by(col(Conversation.created_at).desc())
        )
    ).first()
    if found is not None:
        return found
    return await start_conversation(
        session,
        customer=customer,
        channel_account_id=channel_account_id,
        actor=actor,
        trace_id=trace_id,
        thread_key=thread_key,
    )


async def to_human(
    session: AsyncSession,
    conversation: Conversation,
    *,
    agent_id: uuid.UUID | None,
    actor: Actor,
    reason: str,
    trace_id: str | None = None,
) -> ConversationEvent | None:
    """Escalate: human mode with ``agent_id``, or in the queue when ``agent_id`` is ``None`` (an earlier
    place in the queue is kept). ``escalation_reason`` becomes ``reason``.

    From ``ai``, or again from ``human`` (a second escalation; only the reason changes when it already
    has that agent, and then no event is written).

    Returns:
        The event, or ``None`` when who handles it did not change.

    Raises:
        InvalidTransition: the conversation is closed.
    """
    before = conversation.status
    if before == ConversationStatus.closed:
        raise InvalidTransition(conversation.id, before, ConversationStatus.human.value)
    now = utcnow()
    conversation.escalation_reason = _cut(reason)
    unchanged = before == ConversationStatus.human and (
        (agent_id is not None and conversation.assigned_agent_id == agent_id)
        or (
            agent_id is None and conversation.assigned_agent_id is None and conversation.queued_at is not None
        )
    )
    if unchanged:
        conversation.updated_at = now
        session.add(conversation)
        return None
    _hand_to(conversation, agent_id, now)
    if before != ConversationStatus.human:
        metrics.HANDOFFS.labels(str(getattr(actor.type, "value", actor.type))).inc()
    return _record(
        session, conversation, from_status=before, actor=actor, reason=reason, trace_id=trace_id, now=now
    )


async def reassign(
    session: AsyncSession,
    conversation: Conversation,
    *,
    agent_id: uuid.UUID,
    actor: Actor,
    reason: str,
    trace_id: str | None = None,
) -> ConversationEvent:
    """A human-mode conversation goes to another agent (a transfer, a hand-out from the queue);
    ``escalation_reason`` stays.

    Raises:
        InvalidTransition: the conversation is not in human mode.
    """
    before = conversation.status
    if before != ConversationStatus.human or conversation.is_agent_console:
        raise InvalidTransition(conversation.id, before, ConversationStatus.human.value)
    now = utcnow()
    _hand_to(conversation, agent_id, now)
    return _record(
        session, conversation, from_status=before, actor=actor, reason=reason, trace_id=trace_id, now=now
    )


def _hand_to(conversation: Conversation, agent_id: uuid.UUID | None, now: datetime) -> None:
    conversation.status = ConversationStatus.human.value
    conversation.assigned_user_id = None  # a WhatsApp agent (or the queue) has it now, not the web console
    if agent_id is None:
        conversation.assigned_agent_id = None
        conversation.assigned_at = None
        conversation.queued_at = conversation.queued_at or now
    else:
        if conversation.assigned_agent_id != agent_id:
            conversation.assigned_at = now
        if conversation.assigned_agent_id is None:  # a person takes it: how long the customer waited
            waited_s = (now - conversation.queued_at).total_seconds() if conversation.queued_at else 0.0
            metrics.HANDOFF_WAIT_SECONDS.observe(max(waited_s, 0.0))
        conversation.assigned_agent_id = agent_id
        conversation.queued_at = None


async def to_console_user(
    session: AsyncSession,
    conversation: Conversation,
    *,
    user_id: uuid.UUID,
    reason: str,
    trace_id: str | None = None,
) -> ConversationEvent | None:
    """A person in the web console takes the conversation over: human mode with ``assigned_user_id``,
    out of the queue; from that moment no model is called for it. From ``ai`` or ``human`` (taking it
    from a WhatsApp agent: the caller releases that agent's load first). ``None`` when that user has it.

    Raises:
        InvalidTransition: the conversation is closed or is an agent's own console.
    """
    before = conversation.status
    if before == ConversationStatus.closed or conversation.is_agent_console:
        raise InvalidTransition(conversation.id, before, ConversationStatus.human.value)
    if before == ConversationStatus.human and conversation.assigned_user_id == user_id:
        return None
    now = utcnow()
    conversation.status = ConversationStatus.human.value
    conversation.assigned_user_id = user_id
    conversation.assigned_agent_id = None
    conversation.queued_at = None
    conversation.assigned_at = now
    conversation.escalation_reason = _cut(reason)
    return _record(
        session,
        conversation,
        from_status=before,
        actor=Actor.console_user(user_id),
        reason=reason,
        trace_id=trace_id,
        now=now,
    )


async def to_agent_console(
    session: AsyncSession,
    conversation: Conversation,
    *,
    agent_id: uuid.UUID,
    reason: str,
    trace_id: str | None = None,
) -> ConversationEvent | None:
    """Mark the conversation as a human agent's own chat with the business number: human mode, never
    answered by the AI, nobody assigned. ``None`` when it already is one.

    Raises:
        InvalidTransition: the conversation is closed.
    """
    if conversation.is_agent_console and conversation.status == ConversationStatus.human:
        return None
    before = conversation.status
    if before == ConversationStatus.closed:
        raise InvalidTransition(conversation.id, before, ConversationStatus.human.value)
    now = utcnow()
    conversation.status = ConversationStatus.human.value
    conversation.is_agent_console = True
    conversation.escalation_reason = _cut(reason)
    return _record(
        session,
        conversation,
        from_status=before,
        actor=Actor.agent(agent_id),
        reason=reason,
        trace_id=trace_id,
        now=now,
    )


async def back_to_ai(
    session: AsyncSession,
    conversation: Conversation,
    *,
    actor: Actor,
    reason: str | None = None,
    trace_id: str | None = None,
) -> ConversationEvent:
    """Hand a human-mode conversation back to the AI: no agent, out of the queue, no escalation reason.

    Raises:
        InvalidTransition: the conversation is not in human mode, or is an agent's console.
    """
    before = conversation.status
    if before != ConversationStatus.human or conversation.is_agent_console:
        raise InvalidTransition(conversation.id, before, ConversationStatus.ai.value)
    now = utcnow()
    conversation.status = ConversationStatus.ai.value
    conversation.assigned_agent_id = None
    conversation.assigned_user_id = None
    conversation.assigned_at = None
    conversation.queued_at = None
    conversation.escalation_reason = None
    return _record(
        session, conversation, from_status=before, actor=actor, reason=reason, trace_id=trace_id, now=now
    )


async def close(
    session: AsyncSession,
    conversation: Conversation,
    *,
    actor: Actor,
    reason: str | None = None,
    trace_id: str | None = None,
    now: datetime | None = None,
    ask_rating: bool = True,
    by_person: bool = False,
) -> ConversationEvent | None:
    """Close an AI-mode conversation (``closed_at`` = ``now``); the customer's next message opens a new one.
    The customer is asked how it went, once per conversation (:func:`switchboard.conversations.csat.ask`:
    the question is written to the outbox in this transaction, for the caller or the sweep to deliver),
    unless ``ask_rating`` is off (the channel account is being disconnected).

    Args:
        by_person: a person of the team closes it (the console), so a human-mode conversation closes too,
            straight away: out of the queue, and it keeps who handled it (``assigned_agent_id`` /
            ``assigned_user_id``) for its history and the console. The caller lowers that agent's load.

    Returns:
        The event, or ``None`` when it was already closed.

    Raises:
        InvalidTransition: the conversation is in human mode and ``by_person`` is off (a person handles
            it: they hand it back first), or it is an agent's console.
    """
    before = conversation.status
    if before == ConversationStatus.closed:
        return None
    from_person = before == ConversationStatus.human and by_person and not conversation.is_agent_console
    if before != ConversationStatus.ai and not from_person:
        raise InvalidTransition(conversation.id, before, ConversationStatus.closed.value)
    now = now or utcnow()
    conversation.status = ConversationStatus.closed.value
    conversation.closed_at = now
    conversation.queued_at = None
    event = _record(
        session, conversation, from_status=before, actor=actor, reason=reason, trace_id=trace_id, now=now
    )
    await session.flush()
    if ask_rating:
        await csat.ask(session, conversation, now=now)  # once per conversation, whoever closed it
    return event


async def reopen(
    session: AsyncSession,
    conversation: Conversation,
    *,
    actor: Actor,
    reason: str | None = None,
    trace_id: str | None = None,
) -> ConversationEvent:
    """Open a closed conversation again, with the AI answering (``closed_at`` cleared; the memory job
    reads it again when it closes next).

    Raises:
        InvalidTransition: it is not closed, or the customer has another open conversation on the same
            channel account (their messages go there: reopening would give them two).
    """
    before = conversation.status
    if before != ConversationStatus.closed:
        raise InvalidTransition(conversation.id, before, ConversationStatus.ai.value)
    newer = (
        await session.exec(
            select(Conversation.id).where(
                Conversation.tenant_id == conversation.tenant_id,
                Conversation.customer_id == conversation.customer_id,
                Conversation.channel == conversation.channel,
                Conversation.id != conversation.id,
                Conversation.status != ConversationStatus.closed.value,
                col(Conversation.is_agent_console).is_(False),
            )
        )
    ).first()
    if newer is not None:
        raise InvalidTransition(conversation.id, "superseded", ConversationStatus.ai.value)
    now = utcnow()
    conversation.status = ConversationStatus.ai.value
    conversation.closed_at = None
    conversation.memory_summarized_at = None
    # who handled it before it closed no longer has it: the AI answers
    conversation.assigned_agent_id = None
    conversation.assigned_user_id = None
    conversation.assigned_at = None
    return _record(
        session, conversation, from_status=before, actor=actor, reason=reason, trace_id=trace_id, now=now
    )


async def events_of(
    session: AsyncSession, *, tenant_id: uuid.UUID, conversation_id: uuid.UUID
) -> list[ConversationEvent]:
    """The conversation's lifecycle events, oldest first."""
    rows = await session.exec(
        select(ConversationEvent)
        .where(ConversationEvent.tenant_id == tenant_id, ConversationEvent.conversation_id == conversation_id)
        .order_by(col(ConversationEvent.created_at), col(ConversationEvent.id))
    )
    return list(rows.all())
