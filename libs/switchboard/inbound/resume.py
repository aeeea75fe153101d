"""Questions that waited for the model are answered when the provider answers again.

A turn whose every deployment failed leaves its inbound row ``waiting_model`` (the inbound ``turn``
step). The cron job :func:`resume_waiting_turns` (background worker, every 15 s) probes each tenant with
waiting rows, at most as often as :data:`~switchboard.llm.health.PROBE_BACKOFF` allows after failed
probes: one short completion through the tenant's Router. When it answers, the tenant's deployments are
healthy again and its waiting rows are queued again, oldest first: the failed turn stays on record,
detached from the row, which runs the inbound job as new (the customer's words are never dropped).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from sqlalchemy import func, update
from sqlmodel import col, select

from switchboard.crypto import CredentialDecryptError
from switchboard.db.models import InboundState, Message, Tenant, Turn
from switchboard.llm.health import mark_healthy, mark_probe, tenant_health
from switchboard.llm.router import ModelCallFailed, ModelGateway
from switchboard.observability import get_logger
from switchboard.queue import keys
from switchboard.queue.jobs import enqueue_process_inbound
from switchboard.tenant_settings import cached_tenant_settings

__all__ = [
    "PROBE_TIMEOUT_S",
    "probe_tenant",
    "resume_tenant",
    "resume_waiting_turns",
    "waiting_conversations",
    "waiting_per_tenant",
]

log = get_logger(__name__)

PROBE_TIMEOUT_S = 10.0
"""Longest wait for one probe of a tenant's deployments, seconds."""
PROBE_CONCURRENCY = 8
"""Tenants probed at once."""
PROBE_MESSAGES = [{"role": "user", "content": "Reply with the word ok."}]


async def waiting_conversations(session: Any, tenant_id: uuid.UUID) -> set[uuid.UUID]:
    """The tenant's conversations with a question waiting for the model (the inbox marks them)."""
    found = await session.exec(
        select(Message.conversation_id)
        .where(Message.tenant_id == tenant_id, Message.inbound_state == InboundState.waiting_model.value)
        .distinct()
    )
    return {c for c in found.all() if c is not None}


async def waiting_per_tenant(session: Any) -> dict[uuid.UUID, int]:
    """Questions waiting for the model, per tenant (tenants with none are left out)."""
    found = await session.exec(
        select(Message.tenant_id, func.count())
        .where(Message.inbound_state == InboundState.waiting_model.value)
        .group_by(Message.tenant_id)
    )
    return {tenant_id: int(n) for tenant_id, n in found.all()}


async def probe_tenant(sessions: Any, redis: Any, gateway: ModelGateway, tenant_id: uuid.UUID) -> bool:
    """One short completion through the tenant's Router. Returns whether a deployment answered; the
    health readout follows (healthy, or failing with the next probe backed off)."""
    async with sessions() as session:
        tenant = await session.get(Tenant, tenant_id)
    if tenant is None:
        return False
    settings = cached_tenant_settings(tenant.settings_extensions, tenant_id=str(tenant_id))
    await mark_probe(redis, tenant_id, failed=False)
    try:
        router = gateway.router_for(tenant_id, settings.llm)
        await gateway.complete(
            router,
            PROBE_MESSAGES,
            tools=None,
            llm=settings.llm,
            trace_id=f"probe-{tenant_id}",
            deadline=time.monotonic() + PROBE_TIMEOUT_S,
        )
    except (ModelCallFailed, CredentialDecryptError) as exc:
        await mark_probe(redis, tenant_id, failed=True)
        log.warning("model_probe_failed", tenant_id=str(tenant_id), error=str(exc)[:300])
        return False
    await mark_healthy(redis, tenant_id)
    log.info("model_probe_answered", tenant_id=str(tenant_id))
    return True


async def resume_tenant(sessions: Any, redis: Any, tenant_id: uuid.UUID) -> int:
    """Queue the tenant's waiting rows again, oldest first: each one's failed turn is deleted (so the
    turn runs anew) and the row is ``pending``. Returns the rows queued."""
    async with sessions() as session:
        rows = list(
            (
                await session.exec(
                    select(Message.id)
                    .where(
                        Message.tenant_id == tenant_id,
                        Message.inbound_state == InboundState.waiting_model.value,
                    )
                    .order_by(col(Message.created_at), col(Message.id))
                )
            ).all()
        )
    queued = 0
    for row_id in rows:
        async with sessions() as session, session.begin():
            taken = await session.exec(
                update(Message)
                .where(col(Message.id) == row_id, Message.inbound_state == InboundState.waiting_model.value)
                .values(
                    inbound_state=InboundState.pending.value, last_error="resumed: the model answers again"
                )
            )
            if not taken.rowcount:
                continue  # resumed by another run meanwhile
            # the failed turn stays on record (Analytics counts it), detached from the row: the row's
            # next turn is claimed anew instead of returning the stored failure
            await session.exec(
                update(Turn)
                .where(col(Turn.inbound_message_id) == row_id)
                .values(inbound_message_id=uuid.uuid4())
            )
        await enqueue_process_inbound(redis, row_id, job_id=keys.inbound_resume_job_id(row_id))
        queued += 1
    if queued:
        log.info("waiting_turns_resumed", tenant_id=str(tenant_id), rows=queued)
    return queued


async def resume_waiting_turns(ctx: dict[str, Any]) -> dict[str, int]:
    """Cron job: probe every tenant with waiting rows (when its back-off allows) and resume the rows of
    those that answer.

    Returns:
        ``{"tenants": probed, "resumed": rows queued again}``.
    """
    sessions, redis = ctx["resources"].sessions, ctx["resources"].redis
    async with sessions() as session:
        tenants = list(
            (
                await session.exec(
                    select(Message.tenant_id)
                    .where(Message.inbound_state == InboundState.waiting_model.value)
                    .distinct()
                )
            ).all()
        )
    now = time.time()
    due = []
    for tenant_id in tenants:
        health = await tenant_health(redis, tenant_id)
        if not health or min(h.next_probe_at for h in health) <= now:
            due.append(tenant_id)
    limit = asyncio.Semaphore(PROBE_CONCURRENCY)

    async def one(tenant_id: uuid.UUID) -> int:
        async with limit:
            if not await probe_tenant(sessions, redis, ctx["model_gateway"], tenant_id):
                return 0
            return await resume_tenant(sessions, redis, tenant_id)

    resumed = sum(await asyncio.gather(*(one(t) for t in due)))
    return {"tenants": len(due), "resumed": resumed}
