"""The delivery loop's test scene and helpers: write parts with the real writer, read rows back, move a
row's clock, script the Graph sandbox and read what it recorded, capture log events."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import httpx
import structlog
from sqlalchemy import update
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession
from switchboard.channels.base import OutboundPart
from switchboard.channels.whatsapp.channel import CAPABILITIES, WhatsAppChannel
from switchboard.db.models import (
    ChannelAccount,
    Conversation,
    Customer,
    HumanAgent,
    Message,
    Outbox,
    OutboxPurpose,
    Tenant,
    utcnow,
)
from switchboard.handoff import add_agent
from switchboard.outbox import OutboxItem, write_outbox

from tests.utils.handoff import random_phone


class NoEchoWhatsApp(WhatsAppChannel):
    """The WhatsApp adapter declared without correlation echo (a channel whose provider never echoes
    our id back): what the loop does for such channels, against the same sandbox."""

    capabilities = replace(CAPABILITIES, correlation_echo=False)


@dataclass
class Scene:
    """A tenant with a WhatsApp number, one customer conversation and the customer's latest message."""

    tenant: Tenant
    account: ChannelAccount
    customer: Customer
    conversation: Conversation
    inbound: Message

    @property
    def phone_number_id(self) -> str:
        return self.account.external_account_id


async def new_scene(
    sessions: async_sessionmaker[AsyncSession],
    tenant: Tenant,
    account: ChannelAccount,
    *,
    last_message_age: timedelta = timedelta(minutes=5),
) -> Scene:
    """A customer of ``tenant`` writing to ``account`` (a WhatsApp number), their conversation and their
    latest message (answered), ``last_message_age`` ago."""
    wa_id = random_phone()
    last = utcnow() - last_message_age
    async with sessions() as session, session.begin():
        customer = Customer(
            tenant_id=tenant.id, channel="whatsapp", external_user_id=wa_id, phone=wa_id, display_name="Ana"
        )
        session.add(customer)
        await session.flush()
        conversation = Conversation(
            tenant_id=tenant.id,
            customer_id=customer.id,
            channel="whatsapp",
            channel_account_id=account.id,
            last_customer_message_at=last,
        )
        session.add(conversation)
        await session.flush()
        inbound = Message(
            tenant_id=tenant.id,
            conversation_id=conversation.id,
            channel="whatsapp",
            channel_account_id=account.id,
            direction="inbound",
            role="user",
            text="hello?",
            external_id=f"wamid.IN{uuid.uuid4().hex}",
            sender_external_id=wa_id,
            sent_at=last,
            raw={},
            inbound_state="done",  # answered: never picked up by the inbound sweeper
        )
        session.add(inbound)
    return Scene(
        tenant=tenant, account=account, customer=customer, conversation=conversation, inbound=inbound
    )


async def dead_letter_parts(
    sessions: async_sessionmaker[AsyncSession], scene: Scene, texts: list[str]
) -> list[Outbox]:
    """``texts`` written as one reply with the real writer, then left as the delivery loop leaves a
    reply whose first part ran out of attempts (part 0 ``dead_letter``, later parts failed with it)."""
    rows = await write_parts(sessions, scene, texts)
    for row in rows:
        first = row.part_index == 0
        await set_row(
            sessions,
            row.id,
            status="failed",
            error_code="dead_letter",
            attempts=4 if first else 0,
            error_message="gave up after 4 attempts: (#131000) Something went wrong"
            if first
            else "not sent: part 0 failed: gave up after 4 attempts",
        )
    return await rows_of(sessions, scene)


async def write_parts(
    sessions: async_sessionmaker[AsyncSession],
    scene: Scene,
    texts: list[str],
    *,
    purpose: OutboxPurpose = OutboxPurpose.reply,
    keyed: bool = True,
) -> list[Outbox]:
    """Write ``texts`` as parts for the customer with the real outbox writer; returns the rows in order."""
    items = [
        OutboxItem(
            conversation_id=scene.conversation.id,
            channel="whatsapp",
            channel_account_id=scene.account.id,
            recipient=scene.customer.phone or "",
            part=OutboundPart(text=text),
            purpose=purpose,
        )
        for text in texts
    ]
    async with sessions() as session, session.begin():
        await write_outbox(
            session,
            tenant_id=scene.tenant.id,
            items=items,
            inbound_message_id=scene.inbound.id if keyed else None,
            trace_id=f"trace-{uuid.uuid4().hex[:12]}",
        )
    return await rows_of(sessions, scene)


async def write_agent_notice(
    sessions: async_sessionmaker[AsyncSession], scene: Scene, agent: HumanAgent, text: str
) -> Outbox:
    """A notice to ``agent`` about the scene's conversation (audience agent, no inbound message)."""
    item = OutboxItem(
        conversation_id=scene.conversation.id,
        channel="whatsapp",
        channel_account_id=scene.account.id,
        recipient=agent.phone,
        part=OutboundPart(text=text),
        purpose=OutboxPurpose.notice,
        audience="agent",
        agent_id=agent.id,
    )
    async with sessions() as session, session.begin():
        await write_outbox(session, tenant_id=scene.tenant.id, items=[item], trace_id="trace-agent")
    (row,) = [r for r in await rows_of(sessions, scene) if r.recipient == agent.phone]
    return row


async def make_human_agent(
    sessions: async_sessionmaker[AsyncSession], scene: Scene, *, last_inbound_age: timedelta | None
) -> HumanAgent:
    async with sessions() as session, session.begin():
        agent = await add_agent(
            session, tenant_id=scene.tenant.id, name="Nia", phone=random_phone(), online=True
        )
        agent.last_inbound_at = utcnow() - last_inbound_age if last_inbound_age is not None else None
    return agent


async def rows_of(sessions: async_sessionmaker[AsyncSession], scene: Scene) -> list[Outbox]:
    """The outbox rows sent from the scene's number, oldest first, then by purpose and part."""
    async with sessions() as session:
        return list(
            (
                await session.exec(
                    select(Outbox)
                    .where(Outbox.tenant_id == scene.tenant.id, Outbox.channel_account_id == scene.account.id)
                    .order_by(col(Outbox.created_at), col(Outbox.purpose), col(Outbox.part_index))
                )
            ).all()
        )


async def set_row(sessions: async_sessionmaker[AsyncSession], row_id: uuid.UUID, **values: Any) -> None:
    """Move a row's clock (``next_attempt_at`` / ``sending_at`` into the past) instead of sleeping."""
    async with sessions() as session, session.begin():
        await session.exec(update(Outbox).where(col(Outbox.id) == row_id).values(**values))


async def script(base_url: str, **spec: Any) -> None:
    """Queue a scripted answer in the sandbox (``POST /_control/failures``)."""
    async with httpx.AsyncClient() as http:
        response = await http.post(f"{base_url}/_control/failures", json=spec)
        response.raise_for_status()


async def sent_by(base_url: str, phone_number_id: str) -> list[dict[str, Any]]:
    """What the sandbox recorded for one business number (``GET /_control/sent?phone_number_id=``)."""
    async with httpx.AsyncClient() as http:
        response = await http.get(f"{base_url}/_control/sent", params={"phone_number_id": phone_number_id})
        response.raise_for_status()
        return response.json()["messages"]


@contextmanager
def captured_logs() -> Iterator[list[dict[str, Any]]]:
    """Log events as dicts, with the bound context variables merged in (what a JSON line carries)."""
    capture = structlog.testing.LogCapture()
    previous = structlog.get_config()
    structlog.configure(
        processors=[structlog.contextvars.merge_contextvars, capture],
        # every level: a service started by an earlier test may have left a WARNING filter configured
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
    )
    try:
        yield capture.entries
    finally:
        structlog.configure(**previous)


def past(seconds: float) -> datetime:
    return utcnow() - timedelta(seconds=seconds)
