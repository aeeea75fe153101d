"""A customer with data in every place a customer's data is kept, for the erase, export and retention tests."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession
from switchboard.db.models import (
    AuditLog,
    Conversation,
    ConversationEvent,
    Customer,
    CustomerIdentity,
    EventOutbox,
    Feedback,
    Lead,
    Message,
    Order,
    Outbox,
    PendingAction,
    SecurityAlert,
    ToolReceipt,
    Turn,
    UserMemory,
    WebhookDelivery,
    WebhookEndpoint,
    utcnow,
)
from switchboard.media.store import MediaStore


@dataclass
class Seeded:
    """What was stored about one customer: their identifiers and words, to look for after an erase."""

    customer_id: uuid.UUID
    phone: str
    email: str
    name: str
    texts: list[str] = field(default_factory=list)
    media_refs: list[str] = field(default_factory=list)
    conversation_ids: list[uuid.UUID] = field(default_factory=list)
    message_ids: list[uuid.UUID] = field(default_factory=list)

    @property
    def identifiers(self) -> list[str]:
        return [self.phone, self.email, self.name]


async def seed_customer(
    sessions: async_sessionmaker[AsyncSession],
    tenant_id: uuid.UUID,
    store: MediaStore,
    tag: str,
    *,
    at: datetime | None = None,
) -> Seeded:
    """A customer who wrote on WhatsApp and Gmail, sent a photo (stored copy), has memory, a lead, turns
    with guardrail records, tool receipts, an audit row and a security alert of their turn, a pending
    action, and an event delivered to a webhook. ``tag`` makes every identifier and text unique."""
    at = at or utcnow()
    digits = str(uuid.uuid4().int)[:10]
    s = Seeded(
        customer_id=uuid.uuid4(),
        phone=f"34{digits}",
        email=f"ana.{tag}.{digits}@example.org",
        name=f"Ana {tag} Ruiz{digits[:4]}",
    )
    photo = await store.put(
        f"photo of {tag} {digits}".encode() + b"\x89PNG", namespace=f"whatsapp/{tenant_id}", mime="image/png"
    )
    s.media_refs.append(photo.ref)
    async with sessions() as session, session.begin():
        session.add(
            Customer(
                id=s.customer_id,
                tenant_id=tenant_id,
                channel="whatsapp",
                external_user_id=s.phone,
                phone=s.phone,
                email=s.email,
                display_name=s.name,
                profile={"city": f"Sevilla {tag}"},
                created_at=at,
            )
        )
        await session.flush()
        for channel, kind, value in (("whatsapp", "wa_id", s.phone), ("gmail", "email", s.email)):
            session.add(
                CustomerIdentity(
                    tenant_id=tenant_id, customer_id=s.customer_id, channel=channel, kind=kind, value=value
                )
            )
        endpoint = WebhookEndpoint(
            tenant_id=tenant_id, url="https://hooks.example.org/in", secret_encrypted="x"
        )
        session.add(endpoint)
        for n, channel in enumerate(("whatsapp", "gmail")):
            conv = Conversation(
                tenant_id=tenant_id,
                customer_id=s.customer_id,
                channel=channel,
                created_at=at,
                external_thread_id=f"thread-{tag}-{digits}" if channel == "gmail" else None,
                escalation_reason=f"{s.name} asked for a person",
            )
            session.add(conv)
            await session.flush()
            s.conversation_ids.append(conv.id)
            trace = uuid.uuid4().hex
            asked = f"Hola, soy {s.name}, mi pedido {tag}-{n} no llega, llamadme al +{s.phone}"
            answered = f"Lo siento {s.name}, reviso el pedido {tag}-{n} ahora"
            s.texts += [asked, answered]
            inbound = Message(
                tenant_id=tenant_id,
                conversation_id=conv.id,
                channel=channel,
                direction="inbound",
                role="user",
                kind="image" if n == 0 else "text",
                text=asked,
                external_id=f"wamid.{tag}.{digits}.{n}",
                sender_external_id=s.phone if n == 0 else s.email,
                trace_id=trace,
                inbound_state="done",
                media=[
                    {
                        "ref": photo.ref,
                        "mime": "image/png",
                        "transcript": f"foto de {s.name}",
                        "description": f"a receipt for {s.email}",
                    }
                ]
                if n == 0
                else [],
                raw={"from": s.phone, "profile": {"name": s.name}, "text": {"body": asked}},
                created_at=at,
            )
            outbound = Message(
                tenant_id=tenant_id,
                conversation_id=conv.id,
                channel=channel,
                direction="outbound",
                role="assistant",
                text=answered,
                trace_id=trace,
                created_at=at + timedelta(seconds=2),
                tool_calls=[
                    {
                        "id": "c1",
                        "function": {"name": "lookup_order", "arguments": f'{{"phone": "{s.phone}"}}'},
                    }
                ],
            )
            session.add_all([inbound, outbound])
            await session.flush()
            s.message_ids += [inbound.id, outbound.id]
            session.add(
                Feedback(
                    tenant_id=tenant_id,
                    message_id=outbound.id,
                    conversation_id=conv.id,
                    rating="down",
                    source="console",
                    comment=f"{s.name} said it was wrong",
                    created_at=at,
                )
            )
            session.add(
                Outbox(
                    tenant_id=tenant_id,
                    conversation_id=conv.id,
                    inbound_message_id=inbound.id,
                    channel=channel,
                    recipient=s.phone if n == 0 else s.email,
                    payload={"type": "text", "text": answered},
                    status="delivered",
                    created_at=at,
                )
            )
            session.add(
                Turn(
                    tenant_id=tenant_id,
                    conversation_id=conv.id,
                    inbound_message_id=inbound.id,
                    trace_id=trace,
                    status="done",
                    outcome="answered",
                    created_at=at,
                    result={"reply": answered, "flags": []},
                    summary_text=f"{s.name} waits for {tag}",
                    guardrails={"input": {"text": asked, "verdict": "pass"}},
                    usage={"total_tokens": 120},
                    cost_usd=0.001,
                )
            )
            session.add(
                ToolReceipt(
                    tenant_id=tenant_id,
                    conversation_id=conv.id,
                    trace_id=trace,
                    tool_name="lookup_order",
                    args_hash="ab" * 32,
                    outcome="rejected",
                    rejection_reason=f"no order for {s.phone}",
                    created_at=at,
                )
            )
            session.add(
                ConversationEvent(
                    tenant_id=tenant_id,
                    conversation_id=conv.id,
                    to_status="ai",
                    actor_type="customer",
                    actor_id=str(s.customer_id),
                    reason=f"{s.name} wrote",
                    created_at=at,
                )
            )
            session.add(
                AuditLog(
                    tenant_id=tenant_id,
                    actor="model",
                    action="order_lookup",
                    trace_id=trace,
                    details={"arguments": {"phone": s.phone}},
                    created_at=at,
                )
            )
            session.add(
                SecurityAlert(
                    tenant_id=tenant_id,
                    kind="suspected_instructions",
                    trace_id=trace,
                    details={"excerpt": asked},
                    created_at=at,
                )
            )
            event = EventOutbox(
                tenant_id=tenant_id,
                event_type="message.created",
                dispatched_at=at,
                created_at=at,
                payload={
                    "type": "message.created",
                    "data": {"message_id": str(inbound.id), "conversation_id": str(conv.id), "text": asked},
                },
            )
            session.add(event)
            await session.flush()
            session.add(
                WebhookDelivery(
                    tenant_id=tenant_id,
                    event_id=event.id,
                    endpoint_id=endpoint.id,
                    event_type="message.created",
                    status="delivered",
                    created_at=at,
                    log=[{"status_code": 200, "excerpt": s.email}],
                )
            )
        session.add(
            UserMemory(
                tenant_id=tenant_id,
                customer_id=s.customer_id,
                created_at=at,
                updated_at=at,
                summary=f"{s.name} owns a blue kettle; writes from {s.email}",
                facts={"phone": s.phone},
            )
        )
        session.add(
            Lead(
                tenant_id=tenant_id,
                customer_id=s.customer_id,
                conversation_id=s.conversation_ids[0],
                interest="kettle",
                notes=f"call {s.name} on {s.phone}",
                summary=f"{s.name} wants a kettle",
                idempotency_key=f"intent:{s.conversation_ids[0]}",
                created_at=at,
            )
        )
        session.add(
            Order(
                tenant_id=tenant_id,
                order_number=f"{tag}-{digits}",
                customer_id=s.customer_id,
                customer_ref=s.email,
                status="shipped",
                total=Decimal("12.50"),
                currency="EUR",
                items=[{"sku": "KTL-1", "qty": 1}],
                created_at=at,
            )
        )
        session.add(
            PendingAction(
                tenant_id=tenant_id,
                tool_name="create_refund",
                customer_id=s.customer_id,
                conversation_id=s.conversation_ids[1],
                idempotency_key=f"refund-{tag}-{digits}",
                arguments={"email": s.email, "reason": s.texts[0]},
            )
        )
    return s
