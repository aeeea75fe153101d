"""Gmail mailboxes: the sync cursor and health of each connected mailbox, the push notifications
received for it, and the ``Message-ID``\\ s of the mails we sent from it (loop protection)."""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum

from sqlalchemy import BigInteger, CheckConstraint, Column, String, Text, UniqueConstraint
from sqlmodel import Field

from switchboard.db.models.base import (
    TenantOwned,
    created_at_field,
    id_field,
    optional_time_field,
    updated_at_field,
)


class MailboxStatus(StrEnum):
    """Whether a mailbox is synced."""

    active = "active"  # synced by push and polling
    needs_reauth = "needs_reauth"  # the grant was revoked (``invalid_grant``): no sync until reconnected
    disabled = "disabled"  # switched off by an operator


class GmailMailbox(TenantOwned, table=True):
    """The sync state of one connected Gmail mailbox (one per ``channel_accounts`` row of channel gmail)."""

    __tablename__ = "gmail_mailboxes"
    __table_args__ = (
        UniqueConstraint("channel_account_id", name="uq_gmail_mailboxes_account"),
        CheckConstraint("status IN ('active', 'needs_reauth', 'disabled')", name="ck_gmail_mailboxes_status"),
    )

    id: uuid.UUID = id_field()
    channel_account_id: uuid.UUID = Field(foreign_key="channel_accounts.id", ondelete="CASCADE")
    email: str = Field(max_length=320)
    """The mailbox address, lower-cased (also ``channel_accounts.external_account_id``)."""
    status: str = Field(default=MailboxStatus.active.value, sa_type=String(16))
    history_id: str | None = Field(default=None, max_length=32)
    """The last ``historyId`` whose changes were all processed (Gmail's ids are decimal strings)."""
    last_internal_date_ms: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    """Newest ``internalDate`` (epoch ms) of a stored mail: where a resync after a stale cursor starts."""
    watch_expiration_ms: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    """When the ``users.watch`` registration ends (epoch ms; ``None``: no push, polling only)."""
    last_synced_at: datetime | None = optional_time_field()
    last_error: str | None = Field(default=None, sa_type=Text)
    created_at: datetime = created_at_field()
    updated_at: datetime = updated_at_field()


class GmailPushNotification(TenantOwned, table=True):
    """One Pub/Sub push received for a mailbox, stored before it is acknowledged (a hint to sync)."""

    __tablename__ = "gmail_push_notifications"
    __table_args__ = (UniqueConstraint("pubsub_message_id", name="uq_gmail_push_pubsub_message"),)

    id: uuid.UUID = id_field()
    channel_account_id: uuid.UUID = Field(foreign_key="channel_accounts.id", ondelete="CASCADE")
    pubsub_message_id: str = Field(max_length=255)
    """Pub/Sub ``message.messageId``: the de-duplication key (delivery is at least once)."""
    history_id: str | None = Field(default=None, max_length=32)
    """The mailbox's newest ``historyId`` at the time of the push (a hint; sync reads from our cursor)."""
    published_at: datetime | None = optional_time_field()
    processed_at: datetime | None = optional_time_field()
    """When a sync that started after this push finished (``None``: not yet)."""
    created_at: datetime = created_at_field()


class GmailSentMessage(TenantOwned, table=True):
    """A mail we sent from a mailbox: its ``Message-ID`` (ours), Gmail id and thread."""

    __tablename__ = "gmail_sent_messages"
    __table_args__ = (
        UniqueConstraint("channel_account_id", "rfc_message_id", name="uq_gmail_sent_account_message_id"),
    )

    id: uuid.UUID = id_field()
    channel_account_id: uuid.UUID = Field(foreign_key="channel_accounts.id", ondelete="CASCADE")
    rfc_message_id: str = Field(max_length=512)
    """The ``Message-ID`` header we generated, with its angle brackets."""
    gmail_message_id: str | None = Field(default=None, max_length=64)
    thread_id: str | None = Field(default=None, max_length=64)
    correlation_id: str | None = Field(default=None, max_length=64, index=True)
    """The outbox row's correlation id (``sb:<hex>``)."""
    created_at: datetime = created_at_field()
