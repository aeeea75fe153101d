"""The silent proxy in the worker: agents' messages and commands, customers' messages in human mode, delivery.

* A message from a phone number that belongs to one of the tenant's human agents is never a customer
  message: it is a slash command (:mod:`switchboard.handoff.commands`) or a reply relayed to the
  customer the agent is talking to (the replied-to relayed message, ``/switch N``, or their only one).
* A customer message while the conversation is in human mode is relayed to the assigned agent,
  prefixed with the customer's name/number (and ``#N`` when the agent handles several). No model is
  called. While the conversation waits in the queue the message is only stored (the agent's notice
  summarizes it later).
* Every relayed message is stored with ``proxy_metadata`` (who sent it, relayed from/to, original
  message id); agent replies also become ``human_agent`` rows of the customer's conversation, so the AI
  sees them after ``/end``. Media is relayed by its ref when both sides are on the same channel; across
  channels (an Instagram customer, an agent on WhatsApp) a line names it instead
  (:func:`~switchboard.handoff.notices.portable`).
* What this module decides to send is written to the outbox (:func:`~switchboard.handoff.notices.write_outgoing`)
  and sent by the one delivery loop (:mod:`switchboard.outbox.delivery`): relays to a customer go out
  through the customer's own channel, messages to an agent through the tenant's WhatsApp number. The
  service windows of both sides apply there (an agent outside theirs gets the tenant's
  ``handoff.agent_template_name`` template, or the row is recorded as ``agent_window_closed``).
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import update
from sqlmodel import col, select

from switchboard.conversations import append_message, to_agent_console
from switchboard.db.engine import session_scope
from switchboard.db.models import (
    Conversation,
    ConversationStatus,
    Customer,
    HumanAgent,
    Message,
    MessageDirection,
    MessageRole,
    Outbox,
    OutboxPurpose,
    OutboxStatus,
    utcnow,
)
from switchboard.handoff.agents import agent_by_phone
from switchboard.handoff.assignment import open_conversations_of
from switchboard.handoff.commands import CommandError, parse_command, run_command, selected_conversation
from switchboard.handoff.handback import queue_handed_back
from switchboard.handoff.notices import (
    AGENT_CONSOLE_CHANNEL,
    AGENT_TEXT_LIMIT,
    Outgoing,
    agent_outgoing,
    customer_address,
    customer_label,
    write_outgoing,
)
from switchboard.llm.router import ModelGateway
from switchboard.observability import get_logger

__all__ = [
    "AGENT_CONSOLE_REASON",
    "STALE_NOTICE_CODE",
    "agent_for_row",
    "handle_agent_message",
    "relay_customer_message",
]

log = get_logger(__name__)

STALE_NOTICE_CODE = "agent_notice_stale"
"""``outbox.error_code`` of a message to an agent that waited for their window and was dropped when it
opened: its conversation was no longer theirs (taken over, transferred, back with the AI) or closed."""
STALE_NOTICE_MESSAGE = "not sent: by the time the agent wrote, the conversation was no longer theirs"

AGENT_CONSOLE_REASON = "human agent console: messages from this number are handled by the handoff"
"""``escalation_reason`` of an agent's own conversation with the business number (never answered by the AI)."""
HANDOFF_PURPOSES = (OutboxPurpose.notice.value, OutboxPurpose.relay.value, OutboxPurpose.human_reply.value)
"""Outbox purposes the handoff writes (an AI reply is ``reply``)."""


def _flags(row: Message) -> dict[str, Any]:
    return ((row.raw or {}).get("normalized") or {}).get("flags") or {}


async def agent_of_row(session: Any, row: Message) -> HumanAgent | None:
    """The tenant's human agent who sent ``row`` (by ``wa_id``), or ``None`` for a customer; in ``session``."""
    if row.direction != MessageDirection.inbound.value or row.channel != AGENT_CONSOLE_CHANNEL:
        return None  # agents work from the console channel; an IGSID or e-mail is never an agent's phone
    phone = _flags(row).get("wa_id") or row.sender_external_id
    if not phone:
        return None
    return await agent_by_phone(session, tenant_id=row.tenant_id, phone=str(phone))


async def agent_for_row(sessions: Any, row: Message) -> HumanAgent | None:
    """:func:`agent_of_row` in a session of its own."""
    if row.direction != MessageDirection.inbound.value or row.channel != AGENT_CONSOLE_CHANNEL:
        return None  # no query for a customer on any other channel
    async with sessions() as session:
        return await agent_of_row(session, row)


async def _already_handled(sessions: Any, row_id: uuid.UUID) -> bool:
    async with sessions() as session:
        found = (
            await session.exec(
                select(Outbox.id)
                .where(Outbox.inbound_message_id == row_id, col(Outbox.purpose).in_(HANDOFF_PURPOSES))
                .limit(1)
            )
        ).first()
    return found is not None


def _media_of(row: Message) -> list[dict[str, Any]]:
    return [dict(m) for m in (row.media or []) if isinstance(m, dict) and m.get("ref")]


async def handle_agent_message(
    sessions: Any,
    gateway: ModelGateway | None,
    *,
    row: Message,
    agent: HumanAgent,
    console: Conversation,
    redis: Any = None,
) -> str:
    """Handle one inbound message from an agent's phone; write what to send to the outbox (keyed by ``row``).

    With ``redis``, a conversation handed back with ``/end`` gets its AI turn queued at once (without it,
    the inbound sweeper queues it).

    Returns:
        ``agent_command``, ``agent_command_rejected``, ``relayed_to_customer``, ``agent_no_conversation``
        or ``already_handled``.
    """
    async with session_scope(sessions) as session:
        stored_console = await session.get(Conversation, console.id, with_for_update=True)
        if stored_console is not None and stored_console.status == ConversationStatus.ai.value:
            await to_agent_console(
                session, stored_console, agent_id=agent.id, reason=AGENT_CONSOLE_REASON, trace_id=row.trace_id
            )
        locked = await session.get(HumanAgent, agent.id)
        if locked is not None:
            seen = row.sent_at or utcnow()
            if locked.last_inbound_at is None or seen > locked.last_inbound_at:
                locked.last_inbound_at = seen
                session.add(locked)
            # the agent's window is open again: notices that could not reach them are sent now, but
            # not those about a conversation that is no longer theirs (taken over, transferred,
            # closed): a late "Assigned to you" would send them to a customer someone else has
            await session.exec(
                update(Outbox)
                .where(
                    col(Outbox.tenant_id) == row.tenant_id,
                    col(Outbox.recipient) == locked.phone,
                    col(Outbox.status) == OutboxStatus.failed.value,
                    col(Outbox.error_code) == "agent_window_closed",
                    col(Outbox.conversation_id).in_(
                        select(Conversation.id).where(
                            Conversation.tenant_id == row.tenant_id,
                            col(Conversation.is_agent_console).is_(False),
                            (col(Conversation.assigned_agent_id).is_distinct_from(locked.id))
                            | (col(Conversation.status) == ConversationStatus.closed.value),
                        )
                    ),
                )
                .values(error_code=STALE_NOTICE_CODE, error_message=STALE_NOTICE_MESSAGE, updated_at=utcnow())
            )
            await session.exec(
                update(Outbox)
                .where(
                    col(Outbox.tenant_id) == row.tenant_id,
                    col(Outbox.recipient) == locked.phone,
                    col(Outbox.status) == OutboxStatus.failed.value,
                    col(Outbox.error_code) == "agent_window_closed",
                )
                .values(
                    status=OutboxStatus.pending.value,
                    error_code=None,
                    error_message=None,
                    updated_at=utcnow(),
                )
            )
    if await _already_handled(sessions, row.id):
        return "already_handled"
    trace_id = row.trace_id or f"agent-{row.id}"
    text = (row.text or "").strip()
    outcome = "agent_command"
    try:
        command = parse_command(text) if row.kind == "text" else None
    except CommandError as exc:
        items: list[Outgoing] = [agent_outgoing(agent, str(exc), console.id)]
        outcome = "agent_command_rejected"
        command = None
    else:
        items = []
    if command is not None:
        items = await run_command(
            sessions,
            gateway,
            agent_id=agent.id,
            command=command,
            console_conversation_id=console.id,
            trace_id=trace_id,
        )
    elif outcome != "agent_command_rejected":
        return await _relay_agent_reply(sessions, row=row, agent=agent, console=console, trace_id=trace_id)
    async with session_scope(sessions) as session:
        await write_outgoing(
            session, tenant_id=row.tenant_id, items=items, inbound_message_id=row.id, trace_id=trace_id
        )
    if command is not None and command.name == "end" and redis is not None:
        for conversation_id in {item.conversation_id for item in items if item.conversation_id != console.id}:
            await queue_handed_back(sessions, redis, conversation_id)
    log.info(
        "agent_message_handled",
        outcome=outcome,
        agent_id=str(agent.id),
        command=command.name if command else None,
    )
    return outcome


async def _relay_agent_reply(
    sessions: Any, *, row: Message, agent: HumanAgent, console: Conversation, trace_id: str
) -> str:
    async with session_scope(sessions) as session:
        fresh = await session.get(HumanAgent, agent.id)
        assert fresh is not None
        conversation = await selected_conversation(
            session, fresh, reply_to_external_id=row.reply_to_external_id
        )
        if conversation is None:
            count = len(await open_conversations_of(session, fresh))
            text = (
                "You have no open conversation, so this message went nowhere. /status shows what you handle."
                if count == 0
                else f"You handle {count} customers: reply to one of their messages, or choose with /switch N "
                "(see /status), then send again."
            )
            await write_outgoing(
                session,
                tenant_id=row.tenant_id,
                items=[agent_outgoing(fresh, text, console.id)],
                inbound_message_id=row.id,
                trace_id=trace_id,
            )
            return "agent_no_conversation"
        customer = await session.get(Customer, conversation.customer_id)
        assert customer is not None
        to = customer_address(customer)
        proxy = {
            "sender": "human_agent",
            "agent_id": str(fresh.id),
            "agent_name": fresh.name,
            "relayed_from": fresh.phone,
            "relayed_to": to,
            "original_message_id": row.external_id,
            "original_row_id": str(row.id),
        }
        media = _media_of(row)
        append_message(
            session,
            conversation=conversation,
            role=MessageRole.human_agent,
            kind=row.kind,
            text=row.text,
            media=media,
            proxy_metadata=proxy,
            trace_id=trace_id,
        )
        await session.exec(
            update(Message)
            .where(col(Message.id) == row.id)
            .values(proxy_metadata={**proxy, "relayed_conversation_id": str(conversation.id)})
        )
        await write_outgoing(
            session,
            tenant_id=row.tenant_id,
            items=[
                Outgoing(
                    "customer",
                    to,
                    row.text or "",
                    conversation.id,
                    media=media,
                    proxy=proxy,
                    purpose=OutboxPurpose.human_reply,
                    media_channel=row.channel,
                )
            ],
            inbound_message_id=row.id,
            trace_id=trace_id,
        )
    log.info(
        "relayed_to_customer", conversation_id=str(conversation.id), agent_id=str(agent.id), media=len(media)
    )
    return "relayed_to_customer"


async def relay_customer_message(
    sessions: Any, *, row: Message, conversation: Conversation, customer: Customer
) -> str:
    """Relay a customer's message (human mode) to the assigned agent; returns ``relayed_to_agent``,
    ``waiting_in_queue`` or ``already_handled``."""
    if await _already_handled(sessions, row.id):
        return "already_handled"
    async with session_scope(sessions) as session:
        fresh = await session.get(Conversation, conversation.id)
        agent = (
            await session.get(HumanAgent, fresh.assigned_agent_id)
            if fresh and fresh.assigned_agent_id
            else None
        )
        if agent is None:
            log.info("customer_message_waits_for_agent", conversation_id=str(conversation.id))
            return "waiting_in_queue"
        open_ids = [c.id for c in await open_conversations_of(session, agent)]
        label = customer_label(customer)
        if len(open_ids) > 1 and conversation.id in open_ids:
            label = f"#{open_ids.index(conversation.id) + 1} {label}"
        body = (row.text or "").strip() or f"[{row.kind}]"
        proxy = {
            "sender": "customer",
            "relayed_from": customer_address(customer),
            "relayed_to": agent.phone,
            "agent_id": str(agent.id),
            "original_message_id": row.external_id,
        }
        await session.exec(update(Message).where(col(Message.id) == row.id).values(proxy_metadata=proxy))
        await write_outgoing(
            session,
            tenant_id=row.tenant_id,
            items=[
                Outgoing(
                    "agent",
                    agent.phone,
                    f"[{label}] {body}"[:AGENT_TEXT_LIMIT],
                    conversation.id,
                    agent_id=agent.id,
                    media=_media_of(row),
                    proxy=proxy,
                    purpose=OutboxPurpose.relay,
                    media_channel=row.channel,
                )
            ],
            inbound_message_id=row.id,
            trace_id=row.trace_id,
        )
    log.info("relayed_to_agent", agent_id=str(agent.id), media=len(row.media or []))
    return "relayed_to_agent"
