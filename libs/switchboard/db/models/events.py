"""Event webhooks: the tenant's endpoints, the event outbox and the delivery log (docs/integrations.md#event-webhooks)."""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import CheckConstraint, Index, String, Text, UniqueConstraint, text
from sqlmodel import Field

from switchboard.db.models.base import (
    TenantOwned,
    created_at_field,
    id_field,
    jsonb_dict_field,
    jsonb_list_field,
    optional_time_field,
    updated_at_field,
)


class WebhookEndpoint(TenantOwned, table=True):
    """An HTTPS endpoint of the tenant's own systems that receives signed events."""

    __tablename__ = "webhook_endpoints"
    __table_args__ = (
        CheckConstraint(
            "signature_scheme IN ('switchboard', 'standard')", name="ck_webhook_endpoints_signature_scheme"
        ),
    )

    id: uuid.UUID = id_field()
    url: str = Field(sa_type=Text)
    """``https://...`` (loopback ``http://`` only with ``EGRESS_ALLOW_LOOPBACK``, for tests; :mod:`switchboard.egress`)."""
    description: str = Field(default="", max_length=500)
    event_types: list[str] = jsonb_list_field()
    """The events it receives; empty: every event."""
    secret_encrypted: str = Field(sa_type=Text)
    """The signing secret, encrypted with the credential cipher (shown once, when created); during a
    rotation also the previous secret and when it stops signing (:mod:`switchboard.events.endpoints`)."""
    signature_scheme: str = Field(
        default="switchboard", sa_type=String(16), sa_column_kwargs={"server_default": "switchboard"}
    )
    """``switchboard`` (``X-Switchboard-Signature``) or ``standard`` (Standard Webhooks: ``webhook-id``,
    ``webhook-timestamp``, ``webhook-signature``); :mod:`switchboard.events.signing`."""
    is_active: bool = Field(default=True)
    consecutive_failures: int = Field(default=0)
    """Failed attempts since the last success; at ``WEBHOOK_DISABLE_AFTER_FAILURES`` the endpoint is disabled."""
    disabled_at: datetime | None = optional_time_field()
    disabled_reason: str | None = Field(default=None, sa_type=Text)
    created_at: datetime = created_at_field()
    updated_at: datetime = updated_at_field()


class EventOutbox(TenantOwned, table=True):
    """One event, written in the transaction of what it reports (:func:`switchboard.events.emit`)."""

    __tablename__ = "event_outbox"
    __table_args__ = (
        Index("ix_event_outbox_undispatched", "created_at", postgresql_where=text("dispatched_at IS NULL")),
        Index("ix_event_outbox_created_at", "created_at"),  # the retention job's cutoff (0023_events)
    )

    id: uuid.UUID = id_field()
    event_type: str = Field(max_length=64)
    payload: dict[str, Any] = jsonb_dict_field()
    """The envelope sent: ``{"id", "type", "created_at", "tenant_id", "data"}``."""
    created_at: datetime = created_at_field()
    dispatched_at: datetime | None = optional_time_field()
    """When a delivery row was made for every endpoint that wants it."""


class DeliveryState(StrEnum):
    pending = "pending"  # waiting for its (next) attempt
    delivered = "delivered"  # the endpoint answered 2xx
    failed = "failed"  # attempts exhausted, or the endpoint was disabled


class WebhookDelivery(TenantOwned, table=True):
    """One event to one endpoint: its attempts, the last answer and a log of every attempt."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        UniqueConstraint("event_id", "endpoint_id", name="uq_webhook_deliveries_event_endpoint"),
        CheckConstraint("status IN ('pending', 'delivered', 'failed')", name="ck_webhook_deliveries_status"),
        Index("ix_webhook_deliveries_due", "next_attempt_at", postgresql_where=text("status = 'pending'")),
    )

    id: uuid.UUID = id_field()
    event_id: uuid.UUID = Field(foreign_key="event_outbox.id", ondelete="CASCADE")
    endpoint_id: uuid.UUID = Field(foreign_key="webhook_endpoints.id", ondelete="CASCADE", index=True)
    event_type: str = Field(max_length=64)
    status: str = Field(default=DeliveryState.pending.value, max_length=16)
    attempts: int = Field(default=0)
    next_attempt_at: datetime | None = optional_time_field()
    last_status_code: int | None = Field(default=None)
    last_error: str | None = Field(default=None, sa_type=Text)
    delivered_at: datetime | None = optional_time_field()
    log: list[dict[str, Any]] = jsonb_list_field()
    """One entry per attempt: ``{"at", "status_code", "error", "duration_ms"}`` (the newest 20)."""
    created_at: datetime = created_at_field()
    updated_at: datetime = updated_at_field()
