"""Feedback on one assistant message: a rating joined to the exact turn and trace (docs/agent.md#feedback)."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import CheckConstraint, Index, String, Text, UniqueConstraint
from sqlmodel import Field

from switchboard.db.models.base import (
    TenantOwned,
    created_at_field,
    id_field,
    optional_time_field,
    updated_at_field,
)


class Feedback(TenantOwned, table=True):
    """A thumbs up or down (and an optional comment) on one message, one row per (message, source).

    A second rating from the same source replaces the first (``updated_at`` moves): the latest
    opinion of each source counts.
    """

    __tablename__ = "feedback"
    __table_args__ = (
        UniqueConstraint("message_id", "source", name="uq_feedback_message_source"),
        CheckConstraint("rating IN ('up', 'down')", name="ck_feedback_rating"),
        Index("ix_feedback_tenant_created", "tenant_id", "created_at"),
    )

    id: uuid.UUID = id_field()
    message_id: uuid.UUID = Field(foreign_key="messages.id", ondelete="CASCADE")
    """The rated message (normally the assistant's reply)."""
    conversation_id: uuid.UUID | None = Field(
        default=None, foreign_key="conversations.id", ondelete="CASCADE"
    )
    turn_id: uuid.UUID | None = Field(default=None, foreign_key="turns.id", ondelete="SET NULL")
    """The turn that wrote the message (by its trace id); ``None`` for a message no turn wrote."""
    trace_id: str | None = Field(default=None, max_length=64, index=True)
    rating: str = Field(sa_type=String(8))
    """``up`` | ``down``."""
    comment: str | None = Field(default=None, sa_type=Text)
    source: str = Field(sa_type=String(64))
    """Who rated: ``admin_api``, ``tenant_app``, ``console:<user>``..."""
    exported_at: datetime | None = optional_time_field()
    """When the score reached Langfuse (``None``: not exported, or no Langfuse keys)."""
    created_at: datetime = created_at_field()
    updated_at: datetime = updated_at_field()
