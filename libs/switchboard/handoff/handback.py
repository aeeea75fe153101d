"""A conversation handed back to the AI answers what the customer wrote since the last reply they got.

While a person has a conversation, the customer's messages are relayed or stored (no model call). When
the person hands it back (``/end`` on WhatsApp, the console's Hand back, closing a human conversation is
not a hand-back), the messages that came after the last reply the customer received (the person's, or
the AI's before the escalation) and that no turn answered get one AI turn:

* :func:`reopen_unanswered` — in the hand-back's transaction: the newest of them is ``pending`` again
  (tagged ``handed_back``), the older ones join its turn as coalesced messages (their media is read
  too). The durable part: a lost enqueue is picked up by the inbound sweeper.
* :func:`queue_handed_back` — after the commit: the normal inbound job for the reopened row.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import func, update
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import InboundState, Message, MessageDirection, MessageRole, Turn
from switchboard.observability import get_logger
from switchboard.queue import keys
from switchboard.queue.jobs import enqueue_process_inbound

__all__ = ["HANDED_BACK_REASON", "queue_handed_back", "reopen_unanswered"]

log = get_logger(__name__)

HANDED_BACK_REASON = "handed back to the AI: answering what the customer wrote meanwhile"
"""``last_error`` of a reopened row (read by operators; the turn clears it)."""


async def reopen_unanswered(session: AsyncSession, conversation_id: uuid.UUID) -> uuid.UUID | None:
    """Reopen the customer's unanswered messages of ``conversation_id`` for one AI turn (in ``session``'s
    transaction, with the conversation locked by the caller).

    Unanswered: inbound customer rows that wake the agent, finished (relayed or stored while a person had
    the conversation), with no turn of their own, written after the newest reply the customer got (a
    person's message, not a system note, or an AI answer).

    Returns:
        The id of the row whose turn answers them (the newest), or ``None`` when nothing waits.
    """
    replied_at = (
        await session.exec(
            select(func.max(Message.created_at)).where(
                Message.conversation_id == conversation_id,
                Message.direction == MessageDirection.outbound.value,
                col(Message.role).in_((MessageRole.human_agent.value, MessageRole.assistant.value)),
                Message.kind != "system",
            )
        )
    ).one()
    query = (
        select(Message.id)
        .where(
            Message.conversation_id == conversation_id,
            Message.direction == MessageDirection.inbound.value,
            Message.role == MessageRole.user.value,
            Message.inbound_state == InboundState.done.value,
            Message.raw["normalized"]["action"].astext == "process",  # type: ignore[index]
            ~select(Turn.id).where(col(Turn.inbound_message_id) == col(Message.id)).exists(),
        )
        .order_by(col(Message.created_at), col(Message.id))
    )
    if replied_at is not None:
        query = query.where(Message.created_at > replied_at)
    unanswered = list((await session.exec(query)).all())
    if not unanswered:
        return None
    *older, newest = unanswered
    if older:  # the newest one's turn answers them, their media read first (inbound media_to_text)
        await session.exec(
            update(Message)
            .where(col(Message.id).in_(older))
            .values(raw=Message.raw.op("||")({"coalesced": True}))  # type: ignore[union-attr]
        )
    await session.exec(
        update(Message)
        .where(col(Message.id) == newest)
        .values(
            inbound_state=InboundState.pending.value,
            last_error=HANDED_BACK_REASON,
            processed_at=None,
            raw=Message.raw.op("||")({"handed_back": True}),  # type: ignore[union-attr]
        )
    )
    log.info("handed_back_unanswered", conversation_id=str(conversation_id), messages=len(unanswered))
    return newest


async def queue_handed_back(sessions: Any, redis: Any, conversation_id: uuid.UUID) -> int:
    """Queue the inbound job of the conversation's reopened row (after the hand-back committed).

    Returns:
        Jobs queued (0 or 1; 0 also when the row is already answered or taken by a job).
    """
    async with sessions() as session:
        rows = list(
            (
                await session.exec(
                    select(Message.id).where(
                        Message.conversation_id == conversation_id,
                        Message.inbound_state == InboundState.pending.value,
                        Message.raw["handed_back"].astext == "true",  # type: ignore[index]
                    )
                )
            ).all()
        )
    for row_id in rows:
        await enqueue_process_inbound(redis, row_id, job_id=keys.inbound_handback_job_id(row_id))
    return len(rows)
