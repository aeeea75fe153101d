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
  sees them after ``/end``. Media is relayed by media id with the prefix as caption.
* Delivery (:func:`deliver_handoff_outbox`) sends pending handoff outbox rows with the row lock held
  (``FOR UPDATE SKIP LOCKED``: the job path and the sweep never send one twice). The 24-hour window
  applies to both sides: a customer outside theirs gets nothing (``window_closed``); an agent outside
  theirs gets the tenant's ``handoff.agent_template_name`` template, or the row is recorded as
  ``failed`` / ``agent_window_closed`` with the reason.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import update
from sqlmodel import col, select

from switchboard.channels.whatsapp.accounts import access_token_of
from switchboard.channels.whatsapp.send import TEXT_LIMIT_CHARS, GraphSendError, within_service_window
from switchboard.db.engine import session_scope
from switchboard.db.models import (
    ChannelAccount,
    Conversation,
    ConversationStatus,
    Customer,
    HumanAgent,
    Message,
    MessageDirection,
    MessageRole,
    Outbox,
    OutboxStatus,
    Tenant,
    utcnow,
)
from switchboard.handoff.agents import agent_by_phone
from switchboard.handoff.assignment import open_conversations_of
from switchboard.handoff.commands import CommandError, parse_command, run_command, selected_conversation
from switchboard.handoff.notices import (
    Outgoing,
    agent_outgoing,
    customer_address,
    customer_label,
    write_outgoing,
)
from switchboard.llm.router import ModelGateway
from switchboard.observability import get_logger
from switchboard.tenant_settings import tenant_settings_from

__all__ = [
    "AGENT_CONSOLE_REASON",
    "agent_for_row",
    "handle_agent_message",
    "relay_customer_message",
    "deliver_handoff_outbox",
]

log = get_logger(__name__)

AGENT_CONSOLE_REASON = "human agent console: messages from this number are handled by the handoff"
"""``escalation_reason`` of an agent's own conversation with the business number (never answered by the AI)."""
HANDOFF_PART_MIN = 100
"""Handoff outbox rows keyed by an inbound message use ``part_index >= 100`` (replies use 0..n)."""


def _flags(row: Message) -> dict[str, Any]:
    return ((row.raw or {}).get("normalized") or {}).get("flags") or {}


async def agent_for_row(sessions: Any, row: Message) -> HumanAgent | None:
    """The tenant's human agent who sent ``row`` (by ``wa_id``), or ``None`` for a customer."""
    if row.direction != MessageDirection.inbound.value:
        return None
    phone = _flags(row).get("wa_id") or row.sender_external_id
    if not phone:
        return None
    async with sessions() as session:
        return await agent_by_phone(session, tenant_id=row.tenant_id, phone=str(phone))


async def _already_handled(sessions: Any, row_id: uuid.UUID) -> bool:
    async with sessions() as session:
        found = (
            await session.exec(
                select(Outbox.id)
                .where(Outbox.inbound_message_id == row_id, col(Outbox.part_index) >= HANDOFF_PART_MIN)
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
) -> str:
    """Handle one inbound message from an agent's phone; write what to send to the outbox (keyed by ``row``).

    Returns:
        ``agent_command``, ``agent_command_rejected``, ``relayed_to_customer``, ``agent_no_conversation``
        or ``already_handled``.
    """
    async with session_scope(sessions) as session:
        stored_console = await session.get(Conversation, console.id)
        if stored_console is not None and stored_console.status != ConversationStatus.human.value:
            stored_console.status = ConversationStatus.human.value
            stored_console.escalation_reason = AGENT_CONSOLE_REASON
            session.add(stored_console)
        locked = await session.get(HumanAgent, agent.id)
        if locked is not None:
            seen = row.sent_at or utcnow()
            if locked.last_inbound_at is None or seen > locked.last_inbound_at:
                locked.last_inbound_at = seen
                session.add(locked)
            # the agent's window is open again: notices that could not reach them are sent now
            await session.execute(
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
        session.add(
            Message(
                tenant_id=row.tenant_id,
                conversation_id=conversation.id,
                channel=conversation.channel,
                channel_account_id=conversation.channel_account_id,
                direction=MessageDirection.outbound.value,
                role=MessageRole.human_agent.value,
                kind=row.kind,
                text=row.text,
                media=media,
                proxy_metadata=proxy,
                trace_id=trace_id,
            )
        )
        await session.execute(
            update(Message)
            .where(col(Message.id) == row.id)
            .values(proxy_metadata={**proxy, "relayed_conversation_id": str(conversation.id)})
        )
        await write_outgoing(
            session,
            tenant_id=row.tenant_id,
            items=[Outgoing("customer", to, row.text or "", conversation.id, media=media, proxy=proxy)],
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
        await session.execute(update(Message).where(col(Message.id) == row.id).values(proxy_metadata=proxy))
        await write_outgoing(
            session,
            tenant_id=row.tenant_id,
            items=[
                Outgoing(
                    "agent",
                    agent.phone,
                    f"[{label}] {body}"[:TEXT_LIMIT_CHARS],
                    conversation.id,
                    agent_id=agent.id,
                    media=_media_of(row),
                    proxy=proxy,
                )
            ],
            inbound_message_id=row.id,
            trace_id=row.trace_id,
        )
    log.info("relayed_to_agent", agent_id=str(agent.id), media=len(row.media or []))
    return "relayed_to_agent"


async def deliver_handoff_outbox(
    sessions: Any,
    graph: Any,
    cipher: Any,
    *,
    inbound_message_id: uuid.UUID | None = None,
    conversation_id: uuid.UUID | None = None,
    tenant_id: uuid.UUID | None = None,
    recipient: str | None = None,
    limit: int = 200,
) -> int:
    """Send pending handoff outbox rows: all, one inbound message's, one conversation's notices, or
    everything pending for one ``recipient`` of ``tenant_id``.

    Returns:
        Messages sent now. Transient Graph errors leave the row pending (the next call or the sweep
        sends it); permanent ones mark it ``failed`` with Meta's code.
    """
    sent = 0
    async with session_scope(sessions) as session:
        query = (
            select(Outbox)
            .where(
                Outbox.status == OutboxStatus.pending.value,
                Outbox.payload["handoff"].astext == "true",  # type: ignore[index]
            )
            .order_by(col(Outbox.created_at), col(Outbox.part_index))
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        if inbound_message_id is not None:
            query = query.where(Outbox.inbound_message_id == inbound_message_id)
        if conversation_id is not None:
            query = query.where(
                Outbox.conversation_id == conversation_id, col(Outbox.inbound_message_id).is_(None)
            )
        if recipient is not None:
            query = query.where(Outbox.tenant_id == tenant_id, Outbox.recipient == recipient)
        rows = list((await session.exec(query)).all())
        for part in rows:
            sent += await _deliver_one(session, graph, cipher, part)
    return sent


async def _deliver_one(session: Any, graph: Any, cipher: Any, part: Outbox) -> int:
    conversation = await session.get(Conversation, part.conversation_id)
    account = (
        await session.get(ChannelAccount, conversation.channel_account_id)
        if conversation is not None and conversation.channel_account_id
        else None
    )
    now = utcnow()
    if account is None:
        _fail(part, "no_account", "the conversation has no WhatsApp number to send from")
        session.add(part)
        return 0
    token = access_token_of(account, cipher) or "sandbox-token"
    payload = part.payload
    template: str | None = None
    if payload.get("audience") == "agent":
        agent = (
            await session.get(HumanAgent, uuid.UUID(payload["agent_id"])) if payload.get("agent_id") else None
        )
        if agent is None or not within_service_window(agent.last_inbound_at, now):
            tenant = await session.get(Tenant, part.tenant_id)
            handoff = tenant_settings_from(tenant.settings_extensions if tenant else None).handoff
            template = handoff.agent_template_name
            if template is None:
                _fail(
                    part,
                    "agent_window_closed",
                    "the agent has not written to the business number in 24 hours and no "
                    "handoff.agent_template_name is configured",
                )
                session.add(part)
                log.warning(
                    "agent_notice_undeliverable", outbox_id=str(part.id), reason="agent_window_closed"
                )
                return 0
            language = handoff.agent_template_language
    elif conversation is None or not within_service_window(conversation.last_customer_message_at, now):
        _fail(part, "window_closed", "outside the customer's 24-hour window: needs a template")
        session.add(part)
        log.warning("relay_to_customer_outside_window", outbox_id=str(part.id))
        return 0
    try:
        if template is not None:
            wamid = await graph.send_template(
                phone_number_id=account.external_account_id,
                token=token,
                to=part.recipient,
                name=template,
                language=language,
            )
        else:
            wamid = None
            if payload.get("text"):
                wamid = await graph.send_text(
                    phone_number_id=account.external_account_id,
                    token=token,
                    to=part.recipient,
                    text=payload["text"][:TEXT_LIMIT_CHARS],
                    tracker=f"handoff={part.id}",
                )
            for media in payload.get("media") or []:
                wamid = (
                    await graph.send_media(
                        phone_number_id=account.external_account_id,
                        token=token,
                        to=part.recipient,
                        kind=_media_kind(media),
                        media_id=media["ref"],
                        caption=media.get("caption"),
                        filename=media.get("filename"),
                    )
                    or wamid
                )
    except GraphSendError as exc:
        part.attempts += 1
        part.error_code = str(exc.code) if exc.code else None
        part.error_message = str(exc)[:500]
        if not exc.is_transient:
            part.status = OutboxStatus.failed.value
        part.updated_at = utcnow()
        session.add(part)
        log.warning(
            "handoff_send_failed", outbox_id=str(part.id), error_code=exc.code, transient=exc.is_transient
        )
        return 0
    part.status = OutboxStatus.sent.value
    part.external_id = wamid
    part.attempts += 1
    part.sent_at = part.updated_at = utcnow()
    part.error_code = "agent_template" if template is not None else None
    session.add(part)
    return 1


def _fail(part: Outbox, code: str, message: str) -> None:
    part.status = OutboxStatus.failed.value
    part.error_code = code[:32]
    part.error_message = message
    part.updated_at = utcnow()


def _media_kind(media: dict[str, Any]) -> str:
    mime = str(media.get("mime") or "")
    if media.get("kind"):
        return str(media["kind"])
    for prefix, kind in (("image/", "image"), ("audio/", "audio"), ("video/", "video")):
        if mime.startswith(prefix):
            return kind
    return "document"
