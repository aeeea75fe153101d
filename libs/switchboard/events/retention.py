"""Event retention: the background cron job ``prune_events`` (hourly) deletes old events and their
delivery log, so ``event_outbox`` and ``webhook_deliveries`` stop growing.

What goes (counted from the event's ``created_at``):

* an event older than ``EVENT_RETENTION_DELIVERED_DAYS`` (14) whose deliveries are all ``delivered``,
  or that no endpoint wanted (dispatched with no delivery);
* an event older than ``EVENT_RETENTION_FAILED_DAYS`` (60) whose deliveries are all finished,
  ``failed`` ones included (kept longer: the tenant may still be looking into them).

What stays, whatever its age: an event not yet dispatched, and an event with a delivery still
``pending`` (its endpoint may be disabled; the delivery goes out when it is enabled again).

Deletion runs in batches of :data:`PRUNE_BATCH` events, one transaction each (``SKIP LOCKED``: a
delivery run holding a row is never waited for), at most :data:`PRUNE_BATCHES` batches per run; a
bigger backlog drains over the next runs. Each run that deleted something logs ``events_pruned`` with
the counts; a run with nothing to do logs at debug.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, exists, select
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import DeliveryState, EventOutbox, WebhookDelivery, utcnow
from switchboard.observability import get_logger, metrics
from switchboard.settings import Settings

__all__ = ["PruneReport", "prune_events", "run_event_retention"]

log = get_logger(__name__)

PRUNE_BATCH = 500
"""Events deleted per transaction (with their deliveries: a few thousand rows at most)."""
PRUNE_BATCHES = 20
"""Batches per run: at most 10,000 events per run (hourly: 240,000 a day)."""


@dataclass
class PruneReport:
    """What one run deleted."""

    events: int = 0
    deliveries: int = 0
    batches: int = 0


async def _prune_batch(
    sessions: async_sessionmaker[AsyncSession], *, cutoff: datetime, blocking: tuple[str, ...], batch: int
) -> tuple[int, int]:
    """Delete up to ``batch`` dispatched events created before ``cutoff`` with no delivery in one of
    the ``blocking`` states. Returns ``(events, deliveries)`` deleted."""
    blocked = exists().where(
        col(WebhookDelivery.event_id) == EventOutbox.id, col(WebhookDelivery.status).in_(blocking)
    )
    async with sessions() as session, session.begin():
        connection = await session.connection()
        ids: list[uuid.UUID] = list(
            (
                await connection.execute(
                    select(EventOutbox.id)
                    .where(
                        col(EventOutbox.created_at) < cutoff,
                        col(EventOutbox.dispatched_at).is_not(None),
                        ~blocked,
                    )
                    .order_by(col(EventOutbox.created_at))
                    .limit(batch)
                    .with_for_update(skip_locked=True)
                )
            ).scalars()
        )
        if not ids:
            return 0, 0
        # the deliveries first, counted (the foreign key's ON DELETE CASCADE would remove them uncounted)
        deliveries = (
            await connection.execute(delete(WebhookDelivery).where(col(WebhookDelivery.event_id).in_(ids)))
        ).rowcount
        events = (await connection.execute(delete(EventOutbox).where(col(EventOutbox.id).in_(ids)))).rowcount
    return int(events or 0), int(deliveries or 0)


async def run_event_retention(
    sessions: async_sessionmaker[AsyncSession],
    settings: Settings,
    *,
    now: datetime | None = None,
    batch: int = PRUNE_BATCH,
    max_batches: int = PRUNE_BATCHES,
) -> PruneReport:
    """One retention run (the module docstring): delivered events past their retention, then finished
    events (failed included) past the longer one. ``now`` defaults to the current UTC time."""
    now = now or utcnow()
    passes = (
        (
            now - timedelta(days=settings.event_retention_delivered_days),
            (DeliveryState.pending.value, DeliveryState.failed.value),
        ),
        (now - timedelta(days=settings.event_retention_failed_days), (DeliveryState.pending.value,)),
    )
    report = PruneReport()
    for cutoff, blocking in passes:
        while report.batches < max_batches:
            events, deliveries = await _prune_batch(sessions, cutoff=cutoff, blocking=blocking, batch=batch)
            if events:
                report.batches += 1
                report.events += events
                report.deliveries += deliveries
            if events < batch:
                break
    if report.events:
        metrics.EVENTS_PRUNED.labels("event_outbox").inc(report.events)
        metrics.EVENTS_PRUNED.labels("webhook_deliveries").inc(report.deliveries)
        log.info(
            "events_pruned",
            events=report.events,
            deliveries=report.deliveries,
            batches=report.batches,
            delivered_days=settings.event_retention_delivered_days,
            failed_days=settings.event_retention_failed_days,
            backlog_left=report.batches >= max_batches,
        )
    else:
        log.debug("events_pruned", events=0, deliveries=0)
    return report


async def prune_events(ctx: dict[str, Any]) -> dict[str, int]:
    """ARQ cron job (background queue): :func:`run_event_retention` with the worker's resources."""
    report = await run_event_retention(ctx["resources"].sessions, ctx["deps"].settings)
    return {"events": report.events, "deliveries": report.deliveries, "batches": report.batches}
