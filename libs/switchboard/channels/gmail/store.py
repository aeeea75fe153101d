"""Mail made durable: one ``messages`` row per Gmail message, unique on (channel, account, Gmail id).

A mail fetched twice (a push and a poll racing, a resync after a stale cursor) inserts nothing the
second time. Rows are enqueued (``process_inbound``) only after the transaction commits; an enqueue
failure is left to the sweeper.
"""

from __future__ import annotations

import uuid
from typing import Any

from arq.connections import ArqRedis
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.contracts import InboundMessage
from switchboard.db.models import InboundState, Message, utcnow
from switchboard.observability import get_logger
from switchboard.queue.keys import inbound_job_id

__all__ = ["store_mail"]

log = get_logger(__name__)


def _row(msg: InboundMessage, *, tenant_id: uuid.UUID, account_id: uuid.UUID) -> dict[str, Any]:
    return {
        "id": uuid.uuid4(),
        "tenant_id": tenant_id,
        "conversation_id": None,
        "channel": "gmail",
        "channel_account_id": account_id,
        "direction": "outbound" if msg.echo else "inbound",
        "role": "human_agent" if msg.echo else "user",
        "kind": msg.kind[:32],
        "text": msg.text,
        "media": [m.model_dump(exclude_none=True) for m in msg.media],
        "external_id": msg.external_id[:512],
        "reply_to_external_id": (msg.reply_to or None) and msg.reply_to[:512],
        "sender_external_id": msg.sender_id[:255],
        "raw": {**msg.raw, "normalized": msg.stored_view()},
        "sent_at": msg.sent_at,
        "inbound_state": InboundState.pending.value,
        "processing_attempts": 0,
        "created_at": utcnow(),
    }


async def store_mail(
    *,
    sessions: async_sessionmaker[AsyncSession],
    redis: ArqRedis | None,
    tenant_id: uuid.UUID,
    account_id: uuid.UUID,
    messages: list[InboundMessage],
) -> tuple[list[uuid.UUID], int]:
    """Insert ``messages`` (one transaction), then enqueue a job per new row.

    Returns:
        ``(stored row ids, duplicates)``.

    Raises:
        sqlalchemy.exc.SQLAlchemyError / OSError: the database could not take the insert.
    """
    rows = [_row(m, tenant_id=tenant_id, account_id=account_id) for m in messages]
    if not rows:
        return [], 0
    async with sessions() as session, session.begin():
        inserted = set(
            (
                await session.execute(
                    insert(Message.__table__)  # type: ignore[arg-type]
                    .values(rows)
                    .on_conflict_do_nothing(constraint="uq_messages_channel_account_external")
                    .returning(Message.__table__.c.id)  # type: ignore[attr-defined]
                )
            )
            .scalars()
            .all()
        )
    stored = [row["id"] for row in rows if row["id"] in inserted]
    for row_id in stored:
        log.info("inbound_received", channel="gmail", tenant_id=str(tenant_id), inbound_message_id=str(row_id))
        if redis is None:
            continue
        try:
            await redis.enqueue_job("process_inbound", str(row_id), _job_id=inbound_job_id(row_id))
        except Exception as exc:  # noqa: BLE001 (the row is durable; the sweeper enqueues it)
            log.error("inbound_enqueue_failed", inbound_message_id=str(row_id), error=str(exc))
    return stored, len(rows) - len(stored)
