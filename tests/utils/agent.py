"""Builders for agent tests: conversations, offline deployments, turn requests."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession
from switchboard.contracts import TurnRequest
from switchboard.conversations import start_conversation
from switchboard.db.models import Conversation, Customer, Message, Tenant


@dataclass
class ConversationHandle:
    tenant: Tenant
    customer: Customer
    conversation: Conversation

    def request(self, text: str, message_id: uuid.UUID | None = None) -> TurnRequest:
        return TurnRequest(
            tenant_id=self.tenant.id,
            conversation_id=self.conversation.id,
            inbound_message_id=message_id or uuid.uuid4(),
            channel="whatsapp",
            customer_id=self.customer.id,
            text=text,
        )


async def make_conversation(sessions: async_sessionmaker[AsyncSession], tenant: Tenant) -> ConversationHandle:
    async with sessions() as session, session.begin():
        customer = Customer(
            tenant_id=tenant.id, channel="whatsapp", external_user_id=f"u-{uuid.uuid4().hex[:10]}"
        )
        session.add(customer)
        await session.flush()
        conversation = await start_conversation(session, customer=customer, channel_account_id=None)
    return ConversationHandle(tenant, customer, conversation)


def unique_model(prefix: str = "m") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def deployment(base_url: str, model: str, *, priority: int = 1, **extra: Any) -> dict[str, Any]:
    """A deployment on the offline server answering as ``model`` (its id is the model name)."""
    return {
        "id": model,
        "provider": "offline",
        "model": model,
        "api_base": base_url + "/v1",
        "priority": priority,
        **extra,
    }


def llm_settings(*deployments: dict[str, Any], **policy: Any) -> dict[str, Any]:
    return {"deployments": list(deployments), "num_retries": 0, **policy}


async def conversation_messages(
    sessions: async_sessionmaker[AsyncSession], conversation_id: uuid.UUID
) -> list[Message]:
    from sqlmodel import col, select

    async with sessions() as session:
        rows = await session.exec(
            select(Message)
            .where(Message.conversation_id == conversation_id)
            .order_by(col(Message.created_at), col(Message.id))
        )
        return list(rows.all())
