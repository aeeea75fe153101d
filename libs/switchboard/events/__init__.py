"""Event webhooks for the tenant's own systems (README, "Event webhooks"): :func:`emit` writes an event
in the caller's transaction; the background job :func:`~switchboard.events.delivery.deliver_events`
sends it, signed, to every endpoint that wants it."""

from switchboard.events.outbox import UnknownEventType, emit, stage_event
from switchboard.events.schemas import EVENT_TYPES, EventEnvelope, EventType

__all__ = ["EVENT_TYPES", "EventEnvelope", "EventType", "UnknownEventType", "emit", "stage_event"]
