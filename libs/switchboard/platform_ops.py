"""Platform operations (the platform console and its admin API): tenants, usage, queues, dead letters.

* :func:`set_suspended`: a suspended tenant's inbound messages are still stored (nothing is lost) but
  not answered (the inbound job's ``suspended`` step); lifting the suspension does not replay them.
* :func:`usage_per_tenant`: conversations, messages and model tokens per tenant over a period.
* :func:`queue_depths`: jobs waiting in each ARQ queue (the sorted set's size).
* :func:`dead_letters` / :func:`retry_dead_inbound`: inbound messages that reached the dead letter
  (``inbound_state = 'dead'``) and outbox parts that did (``error_code = 'dead_letter'``, shown, not retried here); an inbound one can be retried (state back to ``pending``, a fresh job).
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from sqlalchemy import text, update
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.channels.ingest import enqueue_inbound
from switchboard.db.models import InboundState, Message, Tenant, utcnow
from switchboard.observability import get_logger
from switchboard.queue.queues import Queue

__all__ = [
    "set_suspended",
    "usage_per_tenant",
    "queue_depths",
    "dead_letters",
    "retry_dead_inbound",
    "DeadLetterNotFound",
]

log = get_logger(__name__)


class DeadLetterNotFound(LookupError):
    """No dead inbound message with that id."""


async def set_suspended(session: AsyncSession, tenant: Tenant, *, suspended: bool, actor: str) -> Tenant:
    """Suspend (or lift the suspension of) ``tenant``; the caller commits."""
    tenant.suspended_at = utcnow() if suspended else None
    session.add(tenant)
    await session.flush()
    log.warning(
        "tenant_suspended" if suspended else "tenant_unsuspended", tenant_id=str(tenant.id), actor=actor
    )
    return tenant


async def usage_per_tenant(session: AsyncSession, *, days: int = 30) -> list[dict[str, Any]]:
    """``[{"tenant_id", "slug", "name", "suspended", "conversations", "messages", "tokens"}]`` over ``days``."""
    since = utcnow() - timedelta(days=days)
    rows = await session.execute(
        text(
            """
            SELECT t.id AS tenant_id, t.slug, t.name, t.suspended_at IS NOT NULL AS suspended, o.name AS organization,
                   (SELECT count(*) FROM conversations c WHERE c.tenant_id = t.id AND c.created_at >= :since) AS conversations,
                   (SELECT count(*) FROM messages m WHERE m.tenant_id = t.id AND m.created_at >= :since) AS messages,
                   (SELECT coalesce(sum((u.usage->>'total_tokens')::bigint), 0) FROM turns u
                        WHERE u.tenant_id = t.id AND u.created_at >= :since) AS tokens
            FROM tenants t JOIN organizations o ON o.id = t.organization_id
            ORDER BY t.slug
            """
        ),
        {"since": since},
    )
    return [dict(row) for row in rows.mappings()]


async def queue_depths(redis: Any) -> dict[str, int]:
    """Jobs waiting (queued or deferred) per queue: ``{"chat": n, "background": n}``."""
    return {queue.name: int(await redis.zcard(queue.value)) for queue in Queue}


async def dead_letters(session: AsyncSession, *, limit: int = 100) -> dict[str, list[dict[str, Any]]]:
    """The newest dead inbound messages and dead-lettered outbox parts of every tenant."""
    inbound = await session.execute(
        text(
            """
            SELECT m.id, t.slug AS tenant, m.channel, m.kind, m.last_error, m.processing_attempts, m.created_at
            FROM messages m JOIN tenants t ON t.id = m.tenant_id
            WHERE m.inbound_state = 'dead' ORDER BY m.created_at DESC LIMIT :limit
            """
        ),
        {"limit": limit},
    )
    outbox = await session.execute(
        text(
            """
            SELECT o.id, t.slug AS tenant, o.channel, o.status, o.error_message AS last_error, o.attempts,
                   o.created_at
            FROM outbox o JOIN tenants t ON t.id = o.tenant_id
            WHERE o.error_code = 'dead_letter' ORDER BY o.created_at DESC LIMIT :limit
            """
        ),
        {"limit": limit},
    )
    return {"inbound": [dict(r) for r in inbound.mappings()], "outbox": [dict(r) for r in outbox.mappings()]}


async def retry_dead_inbound(
    session: AsyncSession, redis: Any, message_id: uuid.UUID, *, actor: str
) -> Message:
    """Put a dead inbound message back to ``pending`` and enqueue a fresh job for it (commits).

    Raises:
        DeadLetterNotFound: no dead inbound message with that id.
    """
    row = (
        await session.exec(
            select(Message).where(
                col(Message.id) == message_id, col(Message.inbound_state) == InboundState.dead.value
            )
        )
    ).first()
    if row is None:
        raise DeadLetterNotFound(str(message_id))
    raw = dict(row.raw) if isinstance(row.raw, dict) else {}
    raw.pop("sweeps", None)
    await session.execute(
        update(Message)
        .where(col(Message.id) == message_id)
        .values(inbound_state=InboundState.pending.value, processing_attempts=0, last_error=None, raw=raw)
    )
    await session.commit()
    await enqueue_inbound(redis, message_id, job_id=f"inbound:{message_id}:retry:{uuid.uuid4().hex[:12]}")
    log.warning(
        "inbound_dead_letter_retried",
        inbound_message_id=str(message_id),
        tenant_id=str(row.tenant_id),
        actor=actor,
    )
    return row
