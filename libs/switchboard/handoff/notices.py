"""Messages the handoff sends (to agents and customers), written through the one outbox writer.

An item says who it is for (``audience``), why (``purpose``: a notice, a relay of the customer's
message, a person's reply) and about which conversation; :func:`write_outgoing` picks the channel and
account it goes out on (a customer's own channel; the tenant's WhatsApp number for agents, whatever
channel the customer wrote on), and the delivery loop (:mod:`switchboard.outbox.delivery`) sends it.
Rows keyed by an inbound message are written once even when a job runs twice.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.channels.base import (
    OutboundPart,
    channel_capabilities,
    channel_label,
    shown_address,
    split_text,
)
from switchboard.conversations import customer_reply_address
from switchboard.db.models import ChannelAccount, Conversation, Customer, HumanAgent, OutboxPurpose
from switchboard.outbox.writer import OutboxItem, write_outbox

__all__ = [
    "AGENT_CONSOLE_CHANNEL",
    "AGENT_TEXT_LIMIT",
    "Outgoing",
    "write_outgoing",
    "customer_label",
    "customer_address",
    "assignment_notice",
    "conversation_reference",
    "portable",
]

AGENT_CONSOLE_CHANNEL = "whatsapp"
"""Human agents work from their own WhatsApp: notices and relays to them go out on this channel."""
AGENT_TEXT_LIMIT = 4096
"""A relayed line to an agent is cut to one WhatsApp text message (Cloud API: 4,096 characters)."""


@dataclass(frozen=True)
class Outgoing:
    """One message to send on behalf of the handoff."""

    audience: Literal["agent", "customer"]
    recipient: str
    """The agent's WhatsApp number (``wa_id``), or the customer's address on their channel."""
    text: str
    conversation_id: uuid.UUID
    """The customer conversation it is about (or the agent's console conversation)."""
    agent_id: uuid.UUID | None = None
    media: list[dict[str, Any]] = field(default_factory=list)
    """Media references to relay (``{ref, mime, caption?}``), sent after the text."""
    proxy: dict[str, Any] | None = None
    """``proxy_metadata`` of a relayed message (stored on the outbound history row when sent)."""
    purpose: OutboxPurpose = OutboxPurpose.notice
    """``notice`` (to an agent or a customer), ``relay`` (a customer's message to their agent) or
    ``human_reply`` (an agent's reply to the customer)."""
    media_channel: str | None = None
    """The channel ``media`` refs belong to (a WhatsApp media id, an Instagram copy in our storage):
    media goes along only when the item goes out on that channel; otherwise a line names it."""


def customer_address(customer: Customer) -> str:
    """Where a customer's messages go on their channel: the phone (``wa_id``), else the external id
    (WhatsApp BSUID, Instagram IGSID, e-mail address)."""
    return customer.phone or customer.external_user_id


def customer_label(customer: Customer) -> str:
    """How agents see a customer: ``"Ana Lima (+5511999990000)"`` / ``"+5511999990000"`` on WhatsApp;
    ``"Ana Lima (@ana.lima on Instagram)"`` / ``"1000000000000001 on Instagram"`` on another channel, whose
    address is shown as the channel lets people see it (``"visitor 3f9a on Website chat"``)."""
    if customer.channel in (None, "", AGENT_CONSOLE_CHANNEL):
        number = f"+{customer.phone}" if customer.phone else customer.external_user_id
        return f"{customer.display_name} ({number})" if customer.display_name else number
    username = (customer.profile or {}).get("username")
    handle = f"@{username}" if username else shown_address(customer.channel, customer.external_user_id)
    where = f"{handle} on {channel_label(customer.channel)}"
    return f"{customer.display_name} ({where})" if customer.display_name else where


def portable(item: Outgoing, channel: str) -> tuple[str, list[dict[str, Any]]]:
    """``(text, media)`` of ``item`` as it can go out on ``channel``: media of another channel cannot be
    sent by its ref (a WhatsApp media id means nothing to Instagram), so it becomes a line naming it."""
    if not item.media or item.media_channel in (None, channel):
        return item.text, list(item.media)
    source = channel_label(item.media_channel)
    lines = [
        f"[{m.get('kind') or str(m.get('mime') or 'file').split('/')[0]} sent on {source}: not forwarded]"
        for m in item.media
    ]
    return "\n".join([t for t in (item.text.strip(),) if t] + lines), []


def conversation_reference(conversation_id: uuid.UUID) -> str:
    """How people name a conversation in words: the first 8 hex digits of its id (``/reopen`` takes it;
    the agent's assignment notice and the console's conversation page show it)."""
    return conversation_id.hex[:8]


def assignment_notice(
    *,
    customer: Customer,
    reason: str | None,
    summary: str,
    position: int,
    total: int,
    transfer_from: str | None = None,
    assigned_by: str | None = None,
    conversation_id: uuid.UUID | None = None,
) -> str:
    """The text a newly assigned agent receives: from a colleague (``transfer_from``), given by someone
    from the AI or the queue (``assigned_by``), or chosen automatically (neither)."""
    if transfer_from:
        origin = f"Transferred to you by {transfer_from}."
    elif assigned_by:
        origin = f"Assigned to you by {assigned_by}."
    else:
        origin = "New conversation for you."
    lines = [
        f"{origin} #{position} of your {total} open" if total > 1 else origin,
        f"Customer: {customer_label(customer)}",
        *([f"Ref: {conversation_reference(conversation_id)}"] if conversation_id is not None else []),
        f"Reason: {reason or '-'}",
        f"Summary: {summary}",
        "Reply here and I will pass it on. /end hands it back to the AI, /help lists commands.",
    ]
    return "\n".join(lines)


async def _customer_recipient(
    session: AsyncSession, item: Outgoing, conversation: Conversation | None, channel: str
) -> str:
    """Where a message for the customer goes: their identity the channel prefers, as its send address
    (a signed-in website visitor's stream is not their bare user id); ``item.recipient`` without one."""
    customer = await session.get(Customer, conversation.customer_id) if conversation is not None else None
    if customer is None:
        return item.recipient
    found = await customer_reply_address(session, customer, channel, prefer=item.recipient)
    return found or item.recipient


async def _sending_account(
    session: AsyncSession, item: Outgoing, cache: dict[uuid.UUID, Conversation | None]
) -> tuple[str, uuid.UUID | None]:
    """``(channel, channel_account_id)`` an item goes out on: the customer's own channel for a customer;
    the tenant's WhatsApp number (the agents' console) for an agent."""
    if item.conversation_id not in cache:
        cache[item.conversation_id] = await session.get(Conversation, item.conversation_id)
    conversation = cache[item.conversation_id]
    if item.audience == "customer":
        if conversation is None:
            return "whatsapp", None
        return conversation.channel, conversation.channel_account_id
    if conversation is not None and conversation.channel == AGENT_CONSOLE_CHANNEL:
        return AGENT_CONSOLE_CHANNEL, conversation.channel_account_id
    tenant_id = conversation.tenant_id if conversation is not None else None
    account = (
        await session.exec(
            select(ChannelAccount.id)
            .where(
                ChannelAccount.tenant_id == tenant_id,
                ChannelAccount.channel == AGENT_CONSOLE_CHANNEL,
                col(ChannelAccount.is_active).is_(True),
            )
            .order_by(col(ChannelAccount.created_at))
            .limit(1)
        )
    ).first()
    return AGENT_CONSOLE_CHANNEL, account


def _pieces(text: str, channel: str) -> list[str]:
    """``text`` split under ``channel``'s limit, one outbox part each (a person's 3,000-character reply is
    three Instagram messages, each with its own id to match its echo); ``[""]`` for no text."""
    if not text:
        return [""]
    caps = channel_capabilities(channel)
    if caps is None:  # a channel this process does not know: the channel's send decides
        return [text]
    return split_text(text, caps.text_limit, caps.text_unit) or [text]


async def write_outgoing(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    items: list[Outgoing],
    inbound_message_id: uuid.UUID | None = None,
    trace_id: str | None = None,
) -> int:
    """Write the handoff's messages through the one outbox writer (:func:`switchboard.outbox.write_outbox`).

    Returns:
        Rows inserted now (0 when a re-run of the same inbound message finds them written).
    """
    cache: dict[uuid.UUID, Conversation | None] = {}
    rows = []
    for item in items:
        channel, account_id = await _sending_account(session, item, cache)
        recipient = item.recipient
        if item.audience == "customer":
            recipient = await _customer_recipient(session, item, cache[item.conversation_id], channel)
        text, media = portable(item, channel)
        pieces = _pieces(text, channel)
        for number, piece in enumerate(pieces, start=1):
            last = number == len(pieces)
            rows.append(
                OutboxItem(
                    conversation_id=item.conversation_id,
                    channel=channel,
                    channel_account_id=account_id,
                    recipient=recipient,
                    part=OutboundPart(
                        type="media" if last and media and not piece else "text",
                        text=piece,
                        media=tuple(media) if last else (),
                    ),
                    purpose=item.purpose,
                    audience=item.audience,
                    agent_id=item.agent_id,
                    proxy=item.proxy,
                )
            )
    return await write_outbox(
        session, tenant_id=tenant_id, items=rows, inbound_message_id=inbound_message_id, trace_id=trace_id
    )


def agent_outgoing(agent: HumanAgent, text: str, conversation_id: uuid.UUID) -> Outgoing:
    """A message to ``agent`` about ``conversation_id``."""
    return Outgoing("agent", agent.phone, text, conversation_id, agent_id=agent.id)
