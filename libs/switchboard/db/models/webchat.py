"""The website chat channel's reply stream: every event a visitor's widget shows, in order."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Column, Index, String, UniqueConstraint
from sqlmodel import Field

from switchboard.db.models.base import TenantOwned, created_at_field, jsonb_dict_field


class WebChatEvent(TenantOwned, table=True):
    """One event of a website chat stream (a reply, a visitor's own message, a file).

    A stream is one ``(channel_account_id, address)``: the visitor id of an anonymous visitor, or
    ``user:<id>`` of a verified one. ``seq`` counts 1, 2, 3... per stream and is the Server-Sent-Events
    id, so a widget that reconnects with ``Last-Event-ID`` gets exactly the events after it.
    """

    __tablename__ = "web_chat_events"
    __table_args__ = (
        UniqueConstraint("channel_account_id", "address", "seq", name="uq_web_chat_events_stream_seq"),
        Index("ix_web_chat_events_external_id", "external_id"),
    )

    id: int | None = Field(default=None, sa_column=Column(BigInteger, primary_key=True, autoincrement=True))
    channel_account_id: uuid.UUID = Field(foreign_key="channel_accounts.id", ondelete="CASCADE")
    address: str = Field(max_length=320)
    seq: int = Field(sa_type=BigInteger)
    kind: str = Field(sa_type=String(16))
    """``reply`` (the AI or a person), ``visitor`` (the visitor's own message, for their other tabs)."""
    external_id: str = Field(max_length=64)
    """The id the outbox records as the provider's message id (``web.<uuid>``)."""
    payload: dict[str, Any] = jsonb_dict_field()
    """``{"text", "media": [...], "interactive": {...}, "role"}``: what the widget draws."""
    created_at: datetime = created_at_field()
