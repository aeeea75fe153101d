"""Builders for handoff tests: agents and customer conversations with phones and names."""

from __future__ import annotations

import secrets
import uuid

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession
from switchboard.db.models import Conversation, Customer, HumanAgent, Message, Outbox, Tenant
from switchboard.handoff import add_agent


def random_phone() -> str:
    """A phone number no other test uses (``secrets``: pytest-randomly reseeds ``random`` per test)."""
    return "1555" + "".join(secrets.choice("0123456789") for _ in range(7))


async def make_agent(
    sessions: async_sessionmaker[AsyncSession],
    tenant: Tenant,
    name: str,
    *,
    online: bool = True,
    total: int = 0,
    load: int = 0,
) -> HumanAgent:
    async with sessions() as session, session.begin():
        agent = await add_agent(session, tenant_id=tenant.id, name=name, phone=random_phone(), online=online)
        agent.total_conversations, agent.current_load = total, load
    return agent


async def make_customer_conversation(
    sessions: async_sessionmaker[AsyncSession],
    tenant: Tenant,
    *,
    name: str | None = "Ana Lima",
    texts: tuple[str, ...] = ("My order never arrived",),
) -> tuple[Customer, Conversation]:
    phone = random_phone()
    async with sessions() as session, session.begin():
        customer = Customer(
            tenant_id=tenant.id, channel="whatsapp", external_user_id=phone, phone=phone, display_name=name
        )
        session.add(customer)
        await session.flush()
        conversation = Conversation(tenant_id=tenant.id, customer_id=customer.id, channel="whatsapp")
        session.add(conversation)
        await session.flush()
        for text in texts:
            session.add(
                Message(
                    tenant_id=tenant.id,
                    conversation_id=conversation.id,
                    channel="whatsapp",
                    direction="inbound",
                    role="user",
                    text=text,
                )
            )
    return customer, conversation


async def reload(sessions: async_sessionmaker[AsyncSession], model: type, id_: uuid.UUID):  # type: ignore[no-untyped-def]
    async with sessions() as session:
        return await session.get(model, id_)


async def outbox_rows(sessions: async_sessionmaker[AsyncSession], tenant_id: uuid.UUID) -> list[Outbox]:
    async with sessions() as session:
        rows = await session.exec(
            select(Outbox)
            .where(Outbox.tenant_id == tenant_id)
            .order_by(col(Outbox.created_at), col(Outbox.part_index))
        )
        return list(rows.all())
