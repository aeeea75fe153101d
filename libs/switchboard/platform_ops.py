"""Platform operations (the platform console and its admin API): tenants, usage, queues, dead letters.

* :func:`set_suspended`: a suspended tenant's inbound messages are still stored (nothing is lost) but
  not answered (the inbound job's ``suspended`` step); lifting the suspension does not replay them.
* :func:`usage_per_tenant`: conversations, messages and model tokens per tenant over a period.
* :func:`queue_depths`: jobs waiting to run now in each ARQ queue (neither deferred nor running).
* :func:`dead_letters` / :func:`retry_dead_inbound`: inbound messages that reached the dead letter
  (``inbound_state = 'dead'``), retried by putting the state back to ``pending`` with a fresh job.
* :func:`dead_letters` / :func:`retry_failed_outbox`: failed outbox parts (dead letters and every other
  failure, :func:`switchboard.outbox.retry.failed_parts`), retried through the one delivery loop
  (:func:`switchboard.outbox.retry.requeue_failed`: idempotent, a part is never sent twice).
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from sqlalchemy import text, update
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import InboundState, Message, Tenant, utcnow
from switchboard.observability import get_logger
from switchboard.outbox.jobs import deliver_soon
from switchboard.outbox.retry import NotRetryable, failed_parts, requeue_failed
from switchboard.queue.depth import queue_depths as waiting_jobs
from switchboard.queue.jobs import enqueue_process_inbound
from switchboard.queue.keys import inbound_retry_job_id
from switchboard.queue.queues import Queue

__all__ = [
    "set_suspended",
    "usage_per_tenant",
    "queue_depths",
    "dead_letters",
    "retry_dead_inbound",
    "retry_failed_outbox",
    "DeadLetterNotFound",
    "NotRetryable",
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
    """Jobs waiting to run now per queue, ``{"chat": n, "background": n}``
    (:func:`switchboard.queue.depth.queue_depths`: neither deferred nor running)."""
    depths = await waiting_jobs(redis, [queue.value for queue in Queue])
    return {queue.name: depths[queue.value] for queue in Queue}


async def dead_letters(
    session: AsyncSession, *, limit: int = 100, tenant_id: uuid.UUID | None = None
) -> dict[str, list[dict[str, Any]]]:
    """The newest dead inbound messages and failed outbox parts (of ``tenant_id``, else of every tenant).

    Returns:
        ``{"inbound": [{"id", "tenant", "channel", "kind", "last_error", "processing_attempts",
        "created_at"}], "outbox": [failed_parts rows]}``.
    """
    inbound = await session.execute(
        text(
            """
            SELECT m.id, t.slug AS tenant, m.channel, m.kind, m.last_error, m.processing_attempts, m.created_at
            FROM messages m JOIN tenants t ON t.id = m.tenant_id
            WHERE m.inbound_state = 'dead' AND (CAST(:tenant AS uuid) IS NULL OR m.tenant_id = CAST(:tenant AS uuid))
            ORDER BY m.created_at DESC LIMIT :limit
            """
        ),
        {"limit": limit, "tenant": str(tenant_id) if tenant_id else None},
    )
    outbox = await failed_parts(session, tenant_id=tenant_id, limit=limit)
    return {"inbound": [dict(r) for r in inbound.mappings()], "outbox": outbox}


async def retry_failed_outbox(
    session: AsyncSession, redis: Any, outbox_id: uuid.UUID, *, actor: str
) -> list[uuid.UUID]:
    """Requeue a failed outbox part's group (commits) and ask the chat worker to deliver it now.

    Returns:
        The ids of the requeued parts, by part index.

    Raises:
        NotRetryable: no failed, never-accepted outbox part with that id.
    """
    rows = await requeue_failed(session, outbox_id, actor=actor)
    ids, conversation_id = [row.id for row in rows], rows[0].conversation_id
    await session.commit()
    await deliver_soon(redis, conversation_id, source="retry")
    return ids


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
    await enqueue_process_inbound(redis, message_id, job_id=inbound_retry_job_id(message_id))
    log.warning(
        "inbound_dead_letter_retried",
        inbound_message_id=str(message_id),
        tenant_id=str(row.tenant_id),
        actor=actor,
    )
    return row
