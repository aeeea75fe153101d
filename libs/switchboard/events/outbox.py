"""Writing events: :func:`emit` puts one row in ``event_outbox`` inside the caller's transaction, so an
event exists exactly when what it reports was committed; the delivery job
(:mod:`switchboard.events.delivery`) sends it to the tenant's endpoints afterwards."""

from __future__ import annotations

import time
import uuid
from typing import Any

from sqlmodel import select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import EventOutbox, WebhookEndpoint, utcnow
from switchboard.events.schemas import EVENT_TYPES
from switchboard.observability import get_logger

__all__ = [
    "SUBSCRIBERS_TTL_S",
    "UnknownEventType",
    "emit",
    "forget_subscribers",
    "has_subscriber",
    "stage_event",
]

log = get_logger(__name__)

SUBSCRIBERS_TTL_S = 5.0
"""How long a process trusts what it read of a tenant's active endpoints (seconds): an endpoint created
or enabled in another process receives ``if_subscribed`` events from at most this long after."""
_ALL = "*"
_subscribers: dict[uuid.UUID, tuple[float, frozenset[str]]] = {}
"""tenant id → (expires at, monotonic; the event types its active endpoints take, ``*`` for every one)."""


class UnknownEventType(ValueError):
    """``event_type`` is not one of :data:`~switchboard.events.schemas.EVENT_TYPES` (the developer erred)."""


def stage_event(session: Any, *, tenant_id: uuid.UUID, event_type: str, data: dict[str, Any]) -> EventOutbox:
    """Add the event's row to ``session`` (no I/O; for synchronous code inside a transaction).

    Raises:
        UnknownEventType: not a known event type.
        pydantic.ValidationError: ``data`` does not match the event's model.
    """
    model = EVENT_TYPES.get(event_type)
    if model is None:
        raise UnknownEventType(f"unknown event type {event_type!r}")
    event_id = uuid.uuid4()
    now = utcnow()
    payload = {
        "id": str(event_id),
        "type": event_type,
        "created_at": now.isoformat(),
        "tenant_id": str(tenant_id),
        "data": model.model_validate(data).model_dump(mode="json"),
    }
    row = EventOutbox(
        id=event_id, tenant_id=tenant_id, event_type=event_type, payload=payload, created_at=now
    )
    session.add(row)
    log.info("event_emitted", tenant_id=str(tenant_id), event_type=event_type, event_id=str(event_id))
    return row


def forget_subscribers(tenant_id: uuid.UUID | None = None) -> None:
    """Drop this process's cached view of ``tenant_id``'s endpoints (or of every tenant's); called
    when an endpoint is created or enabled/disabled here."""
    if tenant_id is None:
        _subscribers.clear()
    else:
        _subscribers.pop(tenant_id, None)


async def has_subscriber(session: AsyncSession, *, tenant_id: uuid.UUID, event_type: str) -> bool:
    """Whether an endpoint of the tenant (enabled or disabled: a disabled one's events wait for it) takes
    ``event_type`` (cached :data:`SUBSCRIBERS_TTL_S`).

    Raises:
        sqlalchemy.exc.SQLAlchemyError: the database failed on a cache miss.
    """
    now = time.monotonic()
    hit = _subscribers.get(tenant_id)
    if hit is None or hit[0] <= now:
        lists = (
            await session.exec(
                # disabled endpoints count: their events wait for them (events.delivery)
                select(WebhookEndpoint.event_types).where(WebhookEndpoint.tenant_id == tenant_id)
            )
        ).all()
        # an endpoint with no list takes every event (WebhookEndpoint.event_types)
        types = frozenset(t for types in lists for t in (types or [_ALL]))
        hit = _subscribers[tenant_id] = (now + SUBSCRIBERS_TTL_S, types)
    return _ALL in hit[1] or event_type in hit[1]


async def emit(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    event_type: str,
    data: dict[str, Any],
    if_subscribed: bool = False,
) -> bool:
    """Write one event to the event outbox in ``session``'s transaction (committed with it).

    Args:
        tenant_id: the tenant whose endpoints receive it.
        event_type: one of :data:`~switchboard.events.schemas.EVENT_TYPES` (``lead.created``...).
        data: the event's fields, validated against its model (ids may be UUIDs or strings).
        if_subscribed: write it only when an endpoint of the tenant takes this type
            (:func:`has_subscriber`): for high-volume events (``message.created``) nobody may want.

    Returns:
        Whether the event was written.

    Raises:
        UnknownEventType: not a known event type.
        pydantic.ValidationError: ``data`` does not match the event's model.
    """
    if event_type not in EVENT_TYPES:
        raise UnknownEventType(f"unknown event type {event_type!r}")
    if if_subscribed and not await has_subscriber(session, tenant_id=tenant_id, event_type=event_type):
        return False
    stage_event(session, tenant_id=tenant_id, event_type=event_type, data=data)
    await session.flush()
    return True
