"""The one outbox writer: every message Switchboard sends is a row here before any provider call.

Rows keyed by an inbound message (``inbound_message_id``) are unique on ``(inbound_message_id,
purpose, part_index)``, so a job that runs twice writes each part once (``ON CONFLICT DO NOTHING``).
Rows without one (an assignment notice from the admin API) are written as given. The delivery loop
(:mod:`switchboard.outbox.delivery`) sends them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from sqlalchemy.dialects.postgresql import insert
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.channels.base import OutboundPart, channel_capabilities, split_text, text_length
from switchboard.db.models import Outbox, OutboxPurpose, OutboxStatus, utcnow
from switchboard.storable import clean_tree

__all__ = ["OutboxItem", "write_outbox", "text_items", "reply_items", "fit_to_channel"]


@dataclass(frozen=True)
class OutboxItem:
    """One message to send.

    Attributes:
        conversation_id: the customer conversation it belongs to (or an agent's console conversation).
        channel: the channel it goes out on (the customer's, or ``whatsapp`` for an agent's phone).
        channel_account_id: the account it is sent from.
        recipient: the provider address (WhatsApp ``wa_id`` or BSUID, Instagram IGSID, e-mail address).
        part: what to send.
        purpose: reply, notice, relay or a person's reply.
        audience: ``customer`` or ``agent`` (an agent's window is their own ``last_inbound_at``).
        agent_id: the human agent a notice or relay is for.
        proxy: ``proxy_metadata`` of a relayed message.
    """

    conversation_id: uuid.UUID
    channel: str
    channel_account_id: uuid.UUID | None
    recipient: str
    part: OutboundPart
    purpose: OutboxPurpose = OutboxPurpose.reply
    audience: Literal["customer", "agent"] = "customer"
    agent_id: uuid.UUID | None = None
    proxy: dict[str, Any] | None = field(default=None)


def text_items(
    texts: list[str],
    *,
    conversation_id: uuid.UUID,
    channel: str,
    channel_account_id: uuid.UUID | None,
    recipient: str,
    purpose: OutboxPurpose = OutboxPurpose.reply,
) -> list[OutboxItem]:
    """One text item per already split part (see :func:`switchboard.channels.base.split_text`)."""
    parts = [OutboundPart(type="text", text=text) for text in texts]
    return reply_items(
        "",
        [],
        conversation_id=conversation_id,
        channel=channel,
        channel_account_id=channel_account_id,
        recipient=recipient,
        purpose=purpose,
        parts=parts,
    )


def reply_items(
    text: str,
    structured: list[Any],
    *,
    conversation_id: uuid.UUID,
    channel: str,
    channel_account_id: uuid.UUID | None,
    recipient: str,
    purpose: OutboxPurpose = OutboxPurpose.reply,
    parts: list[OutboundPart] | None = None,
) -> list[OutboxItem]:
    """A reply with structured parts (:data:`switchboard.replies.StructuredPart`) as the channel renders
    it (:func:`switchboard.channels.render.render_reply`): interactive parts within the channel's limits,
    text parts split by :func:`write_outbox` as any text. ``parts`` given: those, already made."""
    if parts is None:
        from switchboard.channels.render import render_reply

        parts = render_reply(channel, text, structured)
    return [
        OutboxItem(
            conversation_id=conversation_id,
            channel=channel,
            channel_account_id=channel_account_id,
            recipient=recipient,
            part=part,
            purpose=purpose,
        )
        for part in parts
    ]


def fit_to_channel(items: list[OutboxItem]) -> list[OutboxItem]:
    """Items cut to their channel's limits (:attr:`Capabilities.text_limit` / ``caption_limit``, in the
    channel's own unit), nothing dropped: a caption over the limit keeps the part that fits and the rest
    follows as text item(s) right after the media; a text over the limit becomes several items. Items of
    a channel that is not registered in this process are kept as they are."""
    out: list[OutboxItem] = []
    for item in items:
        caps = channel_capabilities(item.channel)
        if caps is None or item.part.type not in ("text", "media"):
            out.append(item)
            continue
        follow: list[str] = []
        media = []
        for entry in item.part.media:
            caption = entry.get("caption")
            if isinstance(caption, str) and text_length(caption, caps.text_unit) > caps.caption_limit:
                head = split_text(caption, caps.caption_limit, caps.text_unit)[0]
                entry = {**entry, "caption": head}
                follow.append(caption.strip()[len(head) :].strip())  # the parts after the first
            media.append(entry)
        texts = split_text(item.part.text, caps.text_limit, caps.text_unit) if item.part.text else []
        if len(texts) > 1 or media != list(item.part.media):
            # the text goes first (as the channel sends it), then the media, then the caption's rest
            parts = [OutboundPart(type="text", text=t) for t in texts[:-1]]
            last_text = texts[-1] if texts else ""
            if media:
                parts.append(OutboundPart(type=item.part.type, text=last_text, media=tuple(media)))
            elif last_text:
                parts.append(OutboundPart(type="text", text=last_text))
            for rest_text in follow:
                pieces = split_text(rest_text, caps.text_limit, caps.text_unit)
                parts += [OutboundPart(type="text", text=piece) for piece in pieces]
            out += [replace(item, part=part) for part in parts]
        else:
            out.append(item)
    return out


async def write_outbox(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    items: list[OutboxItem],
    inbound_message_id: uuid.UUID | None = None,
    trace_id: str | None = None,
) -> int:
    """Insert one pending row per item, numbered 0..n-1 per purpose, in the caller's transaction; items
    are first cut to their channel's limits (:func:`fit_to_channel`).

    Returns:
        Rows inserted now (0 when a re-run finds them written already).
    """
    items = fit_to_channel(items)
    if not items:
        return 0
    now = utcnow()
    counters: dict[str, int] = {}
    rows = []
    for item in items:
        index = counters.get(item.purpose.value, 0)
        counters[item.purpose.value] = index + 1
        payload = clean_tree(item.part.to_payload())  # nothing Postgres or a provider refuses (NUL...)
        payload["audience"] = item.audience
        if item.agent_id is not None:
            payload["agent_id"] = str(item.agent_id)
        if item.proxy is not None:
            payload["proxy"] = item.proxy
        row_id = uuid.uuid4()
        rows.append(
            {
                "id": row_id,
                "tenant_id": tenant_id,
                "conversation_id": item.conversation_id,
                "inbound_message_id": inbound_message_id,
                "purpose": item.purpose.value,
                "part_index": index,
                "channel": item.channel,
                "channel_account_id": item.channel_account_id,
                "recipient": item.recipient,
                "payload": payload,
                "status": OutboxStatus.pending.value,
                "attempts": 0,
                # short and unique: Meta echoes it back as biz_opaque_callback_data
                "correlation_id": f"sb:{row_id.hex}",
                "trace_id": trace_id,
                "created_at": now,
                "updated_at": now,
            }
        )
    connection = await session.connection()
    stmt = insert(Outbox.__table__).values(rows)  # type: ignore[arg-type]
    if inbound_message_id is not None:
        stmt = stmt.on_conflict_do_nothing(constraint="uq_outbox_inbound_purpose_part")
    result = await connection.execute(stmt)
    return int(result.rowcount or 0)
