"""Tenant business data the MCP tools read and write: catalog, orders, stores, meeting slots,
meetings, leads, and writes waiting for a person's approval.

Every table carries ``tenant_id`` (the :class:`~switchboard.db.models.base.TenantOwned` mixin); the
tools filter on it with the tenant the orchestrator injected, never one a model named.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any

from sqlalchemy import CheckConstraint, DateTime, Index, Numeric, String, Text, UniqueConstraint, text
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


class Product(TenantOwned, table=True):
    """One catalog item. ``sku`` is unique per tenant and matched exactly (case-insensitive)."""

    __tablename__ = "products"
    __table_args__ = (
        UniqueConstraint("tenant_id", "sku", name="uq_products_tenant_sku"),
        CheckConstraint("stock >= 0", name="ck_products_stock_non_negative"),
        CheckConstraint("price >= 0", name="ck_products_price_non_negative"),
    )

    id: uuid.UUID = id_field()
    sku: str = Field(max_length=64)
    """Stored upper-case and trimmed, e.g. ``FVAM-2050-B``."""
    name: str = Field(max_length=300)
    description: str = Field(default="", sa_type=Text)
    price: Decimal = Field(sa_type=Numeric(12, 2))
    currency: str = Field(default="USD", max_length=3)
    """ISO 4217 code."""
    stock: int = Field(default=0)
    attributes: dict[str, Any] = jsonb_dict_field()
    """Free-form attributes from the import (colour, size, voltage...)."""
    is_active: bool = Field(default=True)
    created_at: datetime = created_at_field()
    updated_at: datetime = updated_at_field()


class Order(TenantOwned, table=True):
    """A customer's order. Readable only by the customer it belongs to (``customer_id`` or ``customer_ref``)."""

    __tablename__ = "orders"
    __table_args__ = (UniqueConstraint("tenant_id", "order_number", name="uq_orders_tenant_number"),)

    id: uuid.UUID = id_field()
    order_number: str = Field(max_length=64)
    """The shop's reference as customers write it, stored upper-case, e.g. ``A-10293``."""
    customer_id: uuid.UUID | None = Field(
        default=None, foreign_key="customers.id", index=True, ondelete="SET NULL"
    )
    customer_ref: str | None = Field(default=None, max_length=320, index=True)
    """Phone digits, e-mail or channel user id from the import; matched against the conversation's customer."""
    status: str = Field(max_length=32)
    """``pending`` | ``paid`` | ``shipped`` | ``delivered`` | ``cancelled`` | ``returned``."""
    total: Decimal = Field(sa_type=Numeric(12, 2))
    currency: str = Field(default="USD", max_length=3)
    items: list[dict[str, Any]] = jsonb_list_field()
    """``[{"sku": "FVAM-2050-B", "quantity": 2}]``."""
    carrier: str | None = Field(default=None, max_length=64)
    tracking_number: str | None = Field(default=None, max_length=128)
    placed_at: datetime | None = optional_time_field()
    estimated_delivery: datetime | None = optional_time_field()
    created_at: datetime = created_at_field()
    updated_at: datetime = updated_at_field()


class Store(TenantOwned, table=True):
    """A physical location with its opening hours."""

    __tablename__ = "stores"
    __table_args__ = (
        CheckConstraint("lat BETWEEN -90 AND 90 AND lon BETWEEN -180 AND 180", name="ck_stores_coordinates"),
        Index("ix_stores_tenant_city", "tenant_id", "city"),
    )

    id: uuid.UUID = id_field()
    name: str = Field(max_length=200)
    address: str = Field(max_length=500)
    city: str = Field(max_length=120)
    country: str | None = Field(default=None, max_length=2)
    """ISO 3166-1 alpha-2."""
    phone: str | None = Field(default=None, max_length=32)
    lat: float
    """WGS84 latitude in degrees."""
    lon: float
    """WGS84 longitude in degrees."""
    opening_hours: dict[str, Any] = jsonb_dict_field()
    """``{"mon": "09:00-18:00", ..., "sun": "closed"}`` (local time of the store)."""
    created_at: datetime = created_at_field()


class MeetingSlot(TenantOwned, table=True):
    """A bookable time; ``is_booked`` flips when a meeting takes it."""

    __tablename__ = "meeting_slots"
    __table_args__ = (
        UniqueConstraint("tenant_id", "starts_at", "resource", name="uq_meeting_slots_tenant_start_resource"),
        CheckConstraint("duration_min > 0", name="ck_meeting_slots_duration_positive"),
    )

    id: uuid.UUID = id_field()
    starts_at: datetime = Field(sa_type=DateTime(timezone=True))
    """Start, UTC."""
    duration_min: int = Field(default=30)
    resource: str = Field(default="default", max_length=120)
    """Who or what is booked (an advisor, a room)."""
    is_booked: bool = Field(default=False)
    created_at: datetime = created_at_field()


class Meeting(TenantOwned, table=True):
    """A booked slot. Idempotent on the turn's idempotency key: a retried write books nothing twice."""

    __tablename__ = "meetings"
    __table_args__ = (
        UniqueConstraint("tenant_id", "idempotency_key", name="uq_meetings_tenant_idempotency"),
        UniqueConstraint("slot_id", name="uq_meetings_slot"),
    )

    id: uuid.UUID = id_field()
    slot_id: uuid.UUID = Field(foreign_key="meeting_slots.id", ondelete="CASCADE")
    customer_id: uuid.UUID | None = Field(
        default=None, foreign_key="customers.id", index=True, ondelete="SET NULL"
    )
    conversation_id: uuid.UUID | None = Field(
        default=None, foreign_key="conversations.id", ondelete="SET NULL"
    )
    topic: str = Field(max_length=500)
    idempotency_key: str = Field(max_length=128)
    created_at: datetime = created_at_field()


class Lead(TenantOwned, table=True):
    """A sales lead the agent recorded. Idempotent on the idempotency key."""

    __tablename__ = "leads"
    __table_args__ = (UniqueConstraint("tenant_id", "idempotency_key", name="uq_leads_tenant_idempotency"),)

    id: uuid.UUID = id_field()
    customer_id: uuid.UUID | None = Field(
        default=None, foreign_key="customers.id", index=True, ondelete="SET NULL"
    )
    conversation_id: uuid.UUID | None = Field(
        default=None, foreign_key="conversations.id", ondelete="SET NULL"
    )
    interest: str = Field(max_length=500)
    """The product or service of interest (``""`` when the intent check could not tell)."""
    notes: str = Field(default="", sa_type=Text)
    status: str = Field(default="new", max_length=16)
    idempotency_key: str = Field(max_length=128)
    """``intent:<conversation id>`` for leads the intent check records (one per conversation)."""
    source: str = Field(default="tool", max_length=16)
    """``tool`` (the ``create_lead`` tool) or ``intent`` (the after-turn intent check)."""
    summary: str = Field(default="", sa_type=Text)
    """A short summary of what the customer wants."""
    consent: str = Field(default="unknown", max_length=16)
    """The customer's consent to be contacted: ``granted``, ``denied`` (opted out) or ``unknown``."""
    detected_by: str | None = Field(default=None, max_length=32)
    """``model:<deployment>`` or ``offline_heuristic`` (no provider model: a keyword heuristic stood in)."""
    created_at: datetime = created_at_field()


class PendingActionStatus(StrEnum):
    pending = "pending"  # waiting for a person
    approved = "approved"  # a person said yes (executed by the approval flow)
    rejected = "rejected"  # a person said no
    expired = "expired"  # nobody decided within handoff.approval_timeout_s; the customer was told


class PendingAction(TenantOwned, table=True):
    """A write a tool's policy sends to a person first: the call as it would have run."""

    __tablename__ = "pending_actions"
    __table_args__ = (
        UniqueConstraint("tenant_id", "idempotency_key", name="uq_pending_actions_tenant_idempotency"),
        CheckConstraint(
            "status IN ('pending', 'approved', 'rejected', 'expired')", name="ck_pending_actions_status"
        ),
        Index("ix_pending_actions_pending", "created_at", postgresql_where=text("status = 'pending'")),
    )

    id: uuid.UUID = id_field()
    tool_name: str = Field(max_length=128)
    arguments: dict[str, Any] = jsonb_dict_field()
    """The model-visible arguments, validated."""
    customer_id: uuid.UUID | None = Field(default=None, foreign_key="customers.id", ondelete="SET NULL")
    conversation_id: uuid.UUID | None = Field(
        default=None, foreign_key="conversations.id", ondelete="SET NULL"
    )
    trace_id: str | None = Field(default=None, max_length=64)
    idempotency_key: str = Field(max_length=128)
    status: str = Field(default=PendingActionStatus.pending.value, sa_type=String(16))
    decided_by: str | None = Field(default=None, max_length=128)
    decided_at: datetime | None = optional_time_field()
    notified_at: datetime | None = optional_time_field()
    """When the approval notice was written for an agent (``None``: nobody was told yet)."""
    created_at: datetime = created_at_field()
