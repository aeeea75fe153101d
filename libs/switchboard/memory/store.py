"""What earlier conversations taught about a customer: written when a conversation closes, read by the prompt.

* :func:`summarize_into_memory` folds one closed conversation into the customer's ``user_memories`` row
  (one model call through the tenant's Router; the previous memory is part of the prompt, so the
  result is a merge), bounded to ``memory.max_chars``, once per conversation
  (``conversations.memory_summarized_at``).
* :func:`close_idle_conversations` closes AI-mode conversations silent for ``memory.inactivity_close_s``
  (this is also how a conversation handed back with ``/end`` closes).
* :func:`is_returning_customer` is one SQL query, never the model's guess.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from sqlalchemy import exists, func
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.conversations import Actor, close, transcript
from switchboard.crypto import CredentialDecryptError
from switchboard.db.engine import session_scope
from switchboard.db.models import (
    Conversation,
    ConversationStatus,
    Message,
    Tenant,
    UserMemory,
    utcnow,
)
from switchboard.llm.router import ModelCallFailed, ModelGateway
from switchboard.llm.trimming import strip_reasoning
from switchboard.observability import get_logger
from switchboard.tenant_settings import tenant_settings_from

__all__ = [
    "MEMORY_INSTRUCTION",
    "is_returning_customer",
    "summarize_into_memory",
    "close_idle_conversations",
    "conversations_to_summarize",
]

log = get_logger(__name__)

MEMORY_INSTRUCTION = (
    "You keep a support team's notes about one customer. Merge what the new conversation below teaches "
    "about the customer (preferences, products they own, past problems and how they were solved, "
    "promises made) into the existing notes. Keep lasting facts only, drop small talk, at most {max_chars} "
    "characters of plain text. Write only the updated notes."
)
"""System message of the memory call (``{max_chars}`` is filled from the tenant's ``memory.max_chars``)."""
MEMORY_TRANSCRIPT_MESSAGES = 60
"""Newest messages of the closed conversation shown to the memory model."""
SUMMARIZE_LOOKBACK = timedelta(days=7)
"""Closed conversations older than this are no longer picked up by the sweep."""


async def is_returning_customer(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    customer_id: uuid.UUID,
    window_days: int,
    now: datetime,
    exclude_conversation_id: uuid.UUID | None = None,
) -> bool:
    """Whether the customer has a conversation with this tenant closed within ``window_days`` of ``now``."""
    condition = (
        (Conversation.tenant_id == tenant_id)
        & (Conversation.customer_id == customer_id)
        & (Conversation.status == ConversationStatus.closed.value)
        & (col(Conversation.closed_at) >= now - timedelta(days=window_days))
    )
    if exclude_conversation_id is not None:
        condition = condition & (Conversation.id != exclude_conversation_id)
    return bool((await session.exec(select(exists().where(condition)))).one())


async def summarize_into_memory(
    sessions: async_sessionmaker[AsyncSession],
    gateway: ModelGateway,
    *,
    tenant_id: uuid.UUID,
    conversation_id: uuid.UUID,
    trace_id: str,
) -> str | None:
    """Fold a closed conversation into the customer's memory. Safe to run twice (the second does nothing).

    Returns:
        The new memory text, or ``None`` when nothing was written (not closed, already summarized, no
        customer messages, or the model failed: logged as ``memory_summary_failed`` and left for the
        next sweep).
    """
    async with sessions() as session:
        conversation = await session.get(Conversation, conversation_id)
        if (
            conversation is None
            or conversation.tenant_id != tenant_id
            or conversation.status != ConversationStatus.closed.value
            or conversation.memory_summarized_at is not None
        ):
            return None
        tenant = await session.get(Tenant, tenant_id)
        memory = (
            await session.exec(
                select(UserMemory).where(
                    UserMemory.tenant_id == tenant_id, UserMemory.customer_id == conversation.customer_id
                )
            )
        ).first()
        lines = await transcript(
            session,
            tenant_id=tenant_id,
            conversation_id=conversation_id,
            limit=MEMORY_TRANSCRIPT_MESSAGES,
            max_chars=500,
        )
    settings = tenant_settings_from(tenant.settings_extensions if tenant else None, tenant_id=str(tenant_id))
    customer_id = conversation.customer_id
    if not any(line.startswith("Customer:") for line in lines):
        await _mark_summarized(sessions, conversation_id)
        return None
    previous = memory.summary if memory is not None else ""
    prompt = [
        {"role": "system", "content": MEMORY_INSTRUCTION.format(max_chars=settings.memory.max_chars)},
        {
            "role": "user",
            "content": f"Existing notes:\n{previous or '(none)'}\n\nNew conversation:\n" + "\n".join(lines),
        },
    ]
    try:
        router = gateway.router_for(tenant_id, settings.llm)
        reply = await gateway.complete(router, prompt, tools=None, llm=settings.llm, trace_id=trace_id)
    except (ModelCallFailed, CredentialDecryptError) as exc:
        log.warning("memory_summary_failed", conversation_id=str(conversation_id), error=str(exc)[:300])
        return None
    text = (strip_reasoning(reply.content) or "").strip()[: settings.memory.max_chars]
    if not text:
        log.warning("memory_summary_empty", conversation_id=str(conversation_id))
        return None
    async with session_scope(sessions) as session:
        locked = (
            await session.exec(
                select(Conversation).where(Conversation.id == conversation_id).with_for_update()
            )
        ).one()
        if locked.memory_summarized_at is not None:
            return None
        locked.memory_summarized_at = utcnow()
        session.add(locked)
        connection = await session.connection()
        await connection.execute(
            insert(UserMemory.__table__)  # type: ignore[arg-type]
            .values(
                id=uuid.uuid4(),
                tenant_id=tenant_id,
                customer_id=customer_id,
                summary=text,
                facts={},
                created_at=utcnow(),
                updated_at=utcnow(),
            )
            .on_conflict_do_update(
                constraint="uq_user_memories_tenant_customer", set_={"summary": text, "updated_at": utcnow()}
            )
        )
    log.info("memory_updated", conversation_id=str(conversation_id), chars=len(text))
    return text


async def _mark_summarized(sessions: async_sessionmaker[AsyncSession], conversation_id: uuid.UUID) -> None:
    async with session_scope(sessions) as session:
        conversation = await session.get(Conversation, conversation_id)
        if conversation is not None and conversation.memory_summarized_at is None:
            conversation.memory_summarized_at = utcnow()
            session.add(conversation)


async def close_idle_conversations(
    sessions: async_sessionmaker[AsyncSession], *, now: datetime, limit: int = 500
) -> list[uuid.UUID]:
    """Close AI-mode conversations whose last message is older than their tenant's ``inactivity_close_s``.

    Returns:
        Ids of the conversations closed now (at most ``limit`` per call).
    """
    last_activity = (
        select(Message.conversation_id, func.max(Message.created_at).label("last_at"))
        .group_by(col(Message.conversation_id))
        .subquery()
    )
    async with sessions() as session:
        rows = (
            await session.exec(
                select(
                    Conversation.id,
                    Conversation.tenant_id,
                    Tenant.settings_extensions,
                    last_activity.c.last_at,
                )
                .join(Tenant, col(Tenant.id) == Conversation.tenant_id)
                .join(last_activity, last_activity.c.conversation_id == Conversation.id, isouter=True)
                .where(Conversation.status == ConversationStatus.ai.value)
                .limit(limit * 4)
            )
        ).all()
    due: dict[uuid.UUID, float] = {}
    for conversation_id, tenant_id, extensions, last_at in rows:
        window_s = tenant_settings_from(extensions, tenant_id=str(tenant_id)).memory.inactivity_close_s
        if last_at is not None and (now - last_at).total_seconds() >= window_s and len(due) < limit:
            due[conversation_id] = window_s
    if not due:
        return []
    async with session_scope(sessions) as session:
        closed = (
            await session.exec(
                select(Conversation)
                .where(col(Conversation.id).in_(due), Conversation.status == ConversationStatus.ai.value)
                .with_for_update(skip_locked=True)
            )
        ).all()
        for conversation in closed:
            await close(
                session,
                conversation,
                actor=Actor.system(),
                reason=f"no messages for {due[conversation.id]:g} s",
                now=now,
            )
        ids = [c.id for c in closed]
    if ids:
        log.info("conversations_closed_idle", count=len(ids))
    return ids


async def conversations_to_summarize(
    sessions: async_sessionmaker[AsyncSession], *, now: datetime, limit: int = 100
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """``(tenant_id, conversation_id)`` of closed conversations whose memory is not written yet."""
    async with sessions() as session:
        rows = await session.exec(
            select(Conversation.tenant_id, Conversation.id)
            .where(
                Conversation.status == ConversationStatus.closed.value,
                col(Conversation.memory_summarized_at).is_(None),
                col(Conversation.closed_at) >= now - SUMMARIZE_LOOKBACK,
            )
            .order_by(col(Conversation.closed_at))
            .limit(limit)
        )
        return [(t, c) for t, c in rows.all()]
