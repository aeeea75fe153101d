"""The inbound sweeper: stored inbound rows whose job was lost are queued again, or dead-lettered."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import case, func, literal, update
from sqlalchemy.dialects.postgresql import JSONB
from sqlmodel import select

from switchboard.db.models import InboundState, Message, utcnow
from switchboard.observability import get_logger
from switchboard.queue.jobs import enqueue_process_inbound
from switchboard.queue.keys import inbound_job_id, inbound_sweep_job_id

__all__ = ["SWEEP_BATCH", "sweep_inbound"]

log = get_logger(__name__)

SWEEP_BATCH = 500
"""Rows looked at per sweeper run (oldest first)."""


def _sweeps_of(raw: Any) -> int:
    count = raw.get("sweeps", 0) if isinstance(raw, dict) else 0
    return count if isinstance(count, int) else 0


def _as_object(raw: Any) -> Any:
    """``raw`` as a JSON object in SQL: SQL NULL and JSON ``null`` become ``{}``, any other non-object is
    kept under ``"original"``. Why: ``NULL || {...}`` is NULL and ``'null' || {...}`` an array, so the sweep
    count would never grow and the row would be re-enqueued forever instead of reaching the dead letter."""
    return case(
        (func.jsonb_typeof(raw) == "object", raw),
        (func.coalesce(func.jsonb_typeof(raw), "null") == "null", literal({}, JSONB)),
        else_=func.jsonb_build_object("original", raw),
    )


async def _has_live_job(redis: Any, row_id: Any, max_sweeps: int) -> bool:
    ids = [inbound_job_id(row_id)] + [inbound_sweep_job_id(row_id, n) for n in range(1, max_sweeps + 1)]
    pipe = redis.pipeline(transaction=False)
    for job_id in ids:
        pipe.exists(f"arq:job:{job_id}")
        pipe.exists(f"arq:in-progress:{job_id}")
    return any(await pipe.execute())


async def sweep_inbound(ctx: dict[str, Any]) -> dict[str, int]:
    """ARQ cron job: re-enqueue inbound rows stored but not finished within ``INBOUND_SWEEP_AFTER_S``.

    A row with a queued, deferred or running job is left alone. A row already swept
    ``INBOUND_MAX_SWEEPS`` times goes to the dead-letter state with an error log (never dropped
    silently). Returns counts ``{"requeued", "dead", "live"}``.
    """
    deps = ctx["deps"]
    settings = deps.settings
    cutoff = utcnow() - timedelta(seconds=settings.inbound_sweep_after_s)
    counts = {"requeued": 0, "dead": 0, "live": 0}
    async with deps.resources.sessions() as session:
        rows = list(
            (
                await session.exec(
                    select(Message.id, Message.raw, Message.tenant_id)
                    .where(
                        Message.inbound_state.in_(
                            (InboundState.pending.value, InboundState.processing.value)
                        ),  # type: ignore[union-attr]
                        Message.created_at < cutoff,
                    )
                    .order_by(Message.created_at)  # type: ignore[arg-type]
                    .limit(SWEEP_BATCH)
                )
            ).all()
        )
    for row_id, raw, tenant_id in rows:
        if await _has_live_job(deps.redis, row_id, settings.inbound_max_sweeps):
            counts["live"] += 1
            continue
        sweeps = _sweeps_of(raw)
        async with deps.resources.sessions() as session, session.begin():
            if sweeps >= settings.inbound_max_sweeps:
                await session.exec(
                    update(Message)
                    .where(Message.id == row_id, Message.inbound_state.in_(("pending", "processing")))  # type: ignore[union-attr]
                    .values(
                        inbound_state=InboundState.dead.value,
                        last_error=f"dead letter after {sweeps} sweeps",
                        processed_at=utcnow(),
                    )
                )
                counts["dead"] += 1
                log.error(
                    "inbound_dead_letter",
                    inbound_message_id=str(row_id),
                    tenant_id=str(tenant_id),
                    sweeps=sweeps,
                )
                continue
            await session.exec(
                update(Message)
                .where(Message.id == row_id)
                .values(raw=_as_object(Message.raw).op("||")(literal({"sweeps": sweeps + 1}, JSONB)))
            )
        await enqueue_process_inbound(deps.redis, row_id, job_id=inbound_sweep_job_id(row_id, sweeps + 1))
        counts["requeued"] += 1
        log.warning(
            "inbound_requeued_by_sweeper",
            inbound_message_id=str(row_id),
            tenant_id=str(tenant_id),
            sweep=sweeps + 1,
        )
    if any(counts.values()):
        log.info("inbound_sweep", **counts)
    return counts
