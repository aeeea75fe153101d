"""Event webhooks for the tenant's own systems (docs/integrations.md#event-webhooks): :func:`emit` writes an event
in the caller's transaction; the background job :func:`~switchboard.events.delivery.deliver_events`
sends it, signed, to every endpoint that wants it."""

from switchboard.events.outbox import UnknownEventType, emit, forget_subscribers, has_subscriber, stage_event
from switchboard.events.schemas import EVENT_TYPES, EventEnvelope, EventType

__all__ = [
    "EVENT_TYPES",
    "EventEnvelope",
    "EventType",
    "UnknownEventType",
    "emit",
    "forget_subscribers",
    "has_subscriber",
    "stage_event",
]
