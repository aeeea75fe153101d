"""Messages the handoff sends (to agents and customers), stored as outbox rows before any send.

Rows written here carry ``payload.audience`` (``agent`` or ``customer``) and ``payload.handoff =
true``; the worker's delivery step (:mod:`switchboard.handoff.relay`) sends them. Keyed rows
(``inbound_message_id`` + ``part_index``) are written once even when a job runs twice.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy.dialects.postgresql import insert
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import Customer, HumanAgent, Outbox, OutboxStatus, utcnow

__all__ = ["Outgoing", "write_outgoing", "customer_label", "customer_address", "assignment_notice"]


@dataclass(frozen=True)
class Outgoing:
    """One message to send on behalf of the handoff."""

    audience: Literal["agent", "customer"]
    recipient: str
    """WhatsApp ``wa_id`` (E.164 digits) of the agent or customer."""
    text: str
    conversation_id: uuid.UUID
    """The customer conversation it is about (or the agent's console conversation)."""
    agent_id: uuid.UUID | None = None
    media: list[dict[str, Any]] = field(default_factory=list)
    """Media references to relay (``{ref, mime, caption?}``), sent after the text."""
    proxy: dict[str, Any] | None = None
    """``proxy_metadata`` of a relayed message (stored on the outbound history row when sent)."""


def customer_address(customer: Customer) -> str:
    """Where a customer's WhatsApp messages go: phone (``wa_id``), else the external id (BSUID)."""
    return customer.phone or customer.external_user_id


def customer_label(customer: Customer) -> str:
    """``"Ana Lima (+5511999990000)"`` / ``"+5511999990000"``: how agents see a customer."""
    number = f"+{customer.phone}" if customer.phone else customer.external_user_id
    return f"{customer.display_name} ({number})" if customer.display_name else number


def assignment_notice(
    *,
    customer: Customer,
    reason: str | None,
    summary: str,
    position: int,
    total: int,
    transfer_from: str | None = None,
) -> str:
    """The text a newly assigned agent receives."""
    origin = f"Transferred to you by {transfer_from}." if transfer_from else "New conversation for you."
    lines = [
        f"{origin} #{position} of your {total} open" if total > 1 else origin,
        f"Customer: {customer_label(customer)}",
        f"Reason: {reason or '-'}",
        f"Summary: {summary}",
        "Reply here and I will pass it on. /end hands it back to the AI, /help lists commands.",
    ]
    return "\n".join(lines)


async def write_outgoing(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    items: list[Outgoing],
    inbound_message_id: uuid.UUID | None = None,
    trace_id: str | None = None,
) -> None:
    """Insert one pending outbox row per item (``ON CONFLICT DO NOTHING`` when keyed by an inbound id)."""
    if not items:
        return
    rows = []
    for index, item in enumerate(items):
        payload: dict[str, Any] = {
            "type": "text",
            "text": item.text,
            "audience": item.audience,
            "handoff": True,
        }
        if item.agent_id is not None:
            payload["agent_id"] = str(item.agent_id)
        if item.media:
            payload["media"] = item.media
        if item.proxy is not None:
            payload["proxy"] = item.proxy
        rows.append(
            {
                "id": uuid.uuid4(),
                "tenant_id": tenant_id,
                "conversation_id": item.conversation_id,
                "inbound_message_id": inbound_message_id,
                "part_index": 100 + index if inbound_message_id is not None else index,
                "channel": "whatsapp",
                "recipient": item.recipient,
                "payload": payload,
                "status": OutboxStatus.pending.value,
                "attempts": 0,
                "trace_id": trace_id,
                "created_at": utcnow(),
                "updated_at": utcnow(),
            }
        )
    connection = await session.connection()
    await connection.execute(
        insert(Outbox.__table__).values(rows).on_conflict_do_nothing()  # type: ignore[arg-type]
    )


def agent_outgoing(agent: HumanAgent, text: str, conversation_id: uuid.UUID) -> Outgoing:
    """A message to ``agent`` about ``conversation_id``."""
    return Outgoing("agent", agent.phone, text, conversation_id, agent_id=agent.id)
