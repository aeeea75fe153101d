"""Builders for agent tests: conversations, scripted offline deployments and their responses, turn requests."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession
from switchboard.contracts import TurnRequest
from switchboard.conversations import start_conversation
from switchboard.db.models import Conversation, Customer, Message, Tenant
from switchboard.standins.offline_server import DeploymentScript, OfflineModelState, ScriptedResponse


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


# --- scripted responses ---------------------------------------------------------------------------


def text(content: str, **options: Any) -> ScriptedResponse:
    """The model answers ``content`` (``latency_s=...`` and other :class:`ScriptedResponse` fields)."""
    return ScriptedResponse(content=content, **options)


def call(name: str, arguments: Any = None, call_id: str | None = None) -> dict[str, Any]:
    """One tool call of :func:`tool_calls`."""
    return {
        "name": name,
        "arguments": {} if arguments is None else arguments,
        **({"id": call_id} if call_id else {}),
    }


def tool_calls(*calls: dict[str, Any] | tuple[str, Any]) -> ScriptedResponse:
    """The model calls these tools: :func:`call` dicts or ``(name, arguments)`` pairs."""
    return ScriptedResponse(
        kind="tool_calls", tool_calls=[c if isinstance(c, dict) else call(c[0], c[1]) for c in calls]
    )


def offered(request: dict[str, Any]) -> list[str]:
    """Names of the tools a recorded model request offered."""
    return [tool["function"]["name"] for tool in request.get("tools") or []]


# --- scripted tenants -----------------------------------------------------------------------------


async def answer_with_script(
    sessions: async_sessionmaker[AsyncSession],
    tenant_id: uuid.UUID,
    offline_model: tuple[OfflineModelState, str],
    *,
    name: str | None = None,
    policy: dict[str, Any] | None = None,
    **sections: Any,
) -> DeploymentScript:
    """The one scripted-tenant builder: the tenant answers through a deployment of its own on the offline
    model server (``name``, unique by default), with these other settings sections.

    Returns:
        The deployment's script: ``push``/``default`` its answers, read its ``requests``.
    """
    state, url = offline_model
    name = name or unique_model()
    async with sessions() as session, session.begin():
        tenant = await session.get(Tenant, tenant_id)
        assert tenant is not None
        tenant.settings_extensions = {
            **tenant.settings_extensions,
            "llm": llm_settings(deployment(url, name), **(policy or {})),
            **sections,
        }
        session.add(tenant)
    return state.script(name)


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
