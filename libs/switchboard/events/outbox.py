"""Writing events: :func:`emit` puts one row in ``event_outbox`` inside the caller's transaction, so an
event exists exactly when what it reports was committed; the delivery job
(:mod:`switchboard.events.delivery`) sends it to the tenant's endpoints afterwards."""

from __future__ import annotations

import uuid
from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import EventOutbox, utcnow
from switchboard.events.schemas import EVENT_TYPES
from switchboard.observability import get_logger

__all__ = ["UnknownEventType", "emit", "stage_event"]

log = get_logger(__name__)


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


async def emit(session: AsyncSession, *, tenant_id: uuid.UUID, event_type: str, data: dict[str, Any]) -> None:
    """Write one event to the event outbox in ``session``'s transaction (committed with it).

    Args:
        tenant_id: the tenant whose endpoints receive it.
        event_type: one of :data:`~switchboard.events.schemas.EVENT_TYPES` (``lead.created``...).
        data: the event's fields, validated against its model (ids may be UUIDs or strings).

    Raises:
        UnknownEventType: not a known event type.
        pydantic.ValidationError: ``data`` does not match the event's model.
    """
    stage_event(session, tenant_id=tenant_id, event_type=event_type, data=data)
    await session.flush()
