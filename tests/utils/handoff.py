"""Builders for handoff tests: agents and customer conversations with phones and names."""

from __future__ import annotations

import secrets
import uuid

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession
from switchboard.conversations import Identity, resolve_customer, start_conversation
from switchboard.db.models import Conversation, Customer, HumanAgent, Message, Tenant
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
        customer = (
            await resolve_customer(
                session,
                tenant_id=tenant.id,
                identities=[Identity("whatsapp", "wa_id", phone)],
                display_name=name,
            )
        ).customer
        conversation = await start_conversation(session, customer=customer, channel_account_id=None)
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
