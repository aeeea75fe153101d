"""The events a tenant's endpoints receive, one pydantic model per event's ``data`` (OpenAPI documents
them under ``webhooks``), and the envelope every delivery carries.

Envelope (the raw body that is signed, :mod:`switchboard.events.signing`)::

    {"id": "<event uuid>", "type": "lead.created", "created_at": "2026-12-01T15:50:00+00:00",
     "tenant_id": "<uuid>", "data": {...}}

``id`` is stable across retries: a receiver de-duplicates on it.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ApprovalRequested",
    "ConversationClosed",
    "ConversationCreated",
    "ConversationHandedOff",
    "EVENT_TYPES",
    "EventEnvelope",
    "EventType",
    "FeedbackCreated",
    "LeadCreated",
    "MessageCreated",
]


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ConversationCreated(_Data):
    """A customer's new conversation (AI mode)."""

    conversation_id: uuid.UUID
    customer_id: uuid.UUID
    channel: str


class ConversationHandedOff(_Data):
    """The conversation went to a person (an agent, or the waiting queue when ``agent_id`` is null)."""

    conversation_id: uuid.UUID
    channel: str
    agent_id: uuid.UUID | None = None
    reason: str | None = None
    actor_type: str
    """Who handed it over: ``ai``, ``customer``, ``agent``, ``system``."""


class ConversationClosed(_Data):
    """The conversation closed; the customer's next message opens a new one."""

    conversation_id: uuid.UUID
    channel: str
    reason: str | None = None
    actor_type: str


class MessageCreated(_Data):
    """A message stored: the customer's (``inbound``) or the assistant's reply (``outbound``)."""

    message_id: uuid.UUID
    conversation_id: uuid.UUID | None = None
    """Set for inbound messages too: emitted when the worker puts the message in its conversation
    (:mod:`switchboard.inbound.job`), only for a tenant with an endpoint that takes it."""
    channel: str
    direction: Literal["inbound", "outbound"]
    role: str
    kind: str
    text: str | None = None


class LeadCreated(_Data):
    """The intent check (or the ``create_lead`` tool) recorded a sales lead."""

    lead_id: uuid.UUID
    conversation_id: uuid.UUID | None = None
    customer_id: uuid.UUID | None = None
    interest: str
    summary: str
    consent: Literal["granted", "denied", "unknown"]
    source: Literal["tool", "intent"]
    detected_by: str | None = None


class ApprovalRequested(_Data):
    """A tool call waits for a person's approval (a pending action)."""

    pending_action_id: uuid.UUID
    tool_name: str
    conversation_id: uuid.UUID | None = None
    customer_id: uuid.UUID | None = None


class FeedbackCreated(_Data):
    """A rating of one assistant message (wired where feedback is recorded)."""

    feedback_id: uuid.UUID
    message_id: uuid.UUID
    rating: Literal["up", "down"]
    comment: str | None = None
    source: str


EventType = Literal[
    "conversation.created",
    "message.created",
    "conversation.handed_off",
    "conversation.closed",
    "lead.created",
    "approval.requested",
    "feedback.created",
]
EVENT_TYPES: dict[str, type[_Data]] = {
    "conversation.created": ConversationCreated,
    "message.created": MessageCreated,
    "conversation.handed_off": ConversationHandedOff,
    "conversation.closed": ConversationClosed,
    "lead.created": LeadCreated,
    "approval.requested": ApprovalRequested,
    "feedback.created": FeedbackCreated,
}
"""Every event type and the model of its ``data``."""

D = TypeVar("D", bound=BaseModel)


class EventEnvelope(BaseModel, Generic[D]):
    """What every delivery's body holds (the same bytes for every attempt)."""

    id: uuid.UUID = Field(description="Event id, the same on every retry: de-duplicate on it.")
    type: str = Field(description="The event type, e.g. lead.created.")
    created_at: datetime
    tenant_id: uuid.UUID
    data: D
