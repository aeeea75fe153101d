"""Customers and their channel identities, conversations and their lifecycle events, messages, the outbox."""

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
    jsonb_optional_field,
    optional_time_field,
    updated_at_field,
)
from switchboard.db.models.tenancy import CHANNEL_CHECK


class ConversationStatus(StrEnum):
    """Who answers the conversation now."""

    ai = "ai"  # the agent (model) answers
    human = "human"  # a human agent answers through the WhatsApp proxy; no model is called
    closed = "closed"  # ended; the next inbound message opens a new conversation


class ActorType(StrEnum):
    """Who caused a conversation's lifecycle event (``conversation_events.actor_type``)."""

    customer = "customer"  # the customer's own message or button
    ai = "ai"  # the model, through a built-in tool
    agent = "agent"  # a human agent (slash command, their own console)
    business_app = "business_app"  # a person replying from the WhatsApp Business app on the phone
    system = "system"  # a sweep or job (idle close)
    api = "api"  # the admin API or the CLI
    console_user = "console_user"  # a person logged in to the web console (``actor_id``: their user id)


class IdentityKind(StrEnum):
    """What a customer identity's ``value`` is."""

    wa_id = "wa_id"  # WhatsApp phone number, E.164 digits without ``+``
    bsuid = "bsuid"  # WhatsApp business-scoped user id (``contacts[].user_id``), e.g. ``US.1000...``
    igsid = "igsid"  # Instagram-scoped user id
    email = "email"  # an e-mail address (Gmail), lower-cased
    visitor = "visitor"  # a website chat visitor: the random id their browser keeps
    web_user = "web_user"  # a website chat user whose id the business's backend signed (verified)


class MessageDirection(StrEnum):
    inbound = "inbound"  # from the customer (or a human agent's phone) to us
    outbound = "outbound"  # from us to the customer


class MessageRole(StrEnum):
    """Role in the model's history (OpenAI chat roles plus ``human_agent``)."""

    user = "user"
    assistant = "assistant"
    tool = "tool"
    system = "system"
    human_agent = "human_agent"


class InboundState(StrEnum):
    """Processing state of an inbound message row (the durable queue: docs/decisions/queue-between-webhook-and-model.md)."""

    pending = "pending"  # stored, job enqueued or about to be
    processing = "processing"  # a worker picked it up
    done = "done"  # answered, relayed, or recorded without a turn
    dead = "dead"  # gave up after the bounded number of attempts; logged as an error
    waiting_model = "waiting_model"  # every model failed: answered when the provider answers again


class OutboxStatus(StrEnum):
    """Delivery state of one outbound part; moves forward only (a late ``delivered`` never undoes ``read``).

    ``sending`` is written (and committed) right before the provider call, so a worker that dies
    between the provider's acceptance and our record leaves a row the delivery loop reconciles
    (by the correlation id the provider echoes back) instead of sending again.
    """

    pending = "pending"
    sending = "sending"
    sent = "sent"
    delivered = "delivered"
    read = "read"
    played = "played"  # WhatsApp: a voice message was played (outranks read)
    failed = "failed"


class OutboxPurpose(StrEnum):
    """Why a row is in the outbox (one writer, :func:`switchboard.outbox.write_outbox`)."""

    reply = "reply"  # the AI's answer to an inbound message (and the slow-down / opt-out confirmations)
    notice = "notice"  # a system message to a customer or an agent (assignment notice, command answer)
    relay = "relay"  # a customer's message relayed to their human agent
    human_reply = "human_reply"  # a reply typed by a person (agent console, web console) to a customer
    holding = "holding"  # "one moment": the answer is not ready by the tenant's first-reply deadline


class Customer(TenantOwned, table=True):
    """A person who writes to a tenant on one channel.

    Who a message is from is decided by :class:`CustomerIdentity` rows
    (:mod:`switchboard.conversations.identities`). ``external_user_id`` is the key the customer was
    created with, kept for readers: WhatsApp business-scoped user id (BSUID) when present, else the
    phone number (``wa_id``); Instagram IGSID; an e-mail address for Gmail. It follows a number change,
    and a retired number that another person now writes from is renamed ``retired:<value>:<id>``.
    """

    __tablename__ = "customers"
    __table_args__ = (
        UniqueConstraint("tenant_id", "channel", "external_user_id", name="uq_customers_tenant_channel_user"),
        CheckConstraint(CHANNEL_CHECK, name="ck_customers_channel"),
        CheckConstraint("external_user_id <> ''", name="ck_customers_external_user_id_not_empty"),
    )

    id: uuid.UUID = id_field()
    channel: str = Field(sa_type=String(16))
    external_user_id: str = Field(max_length=255)
    phone: str | None = Field(default=None, max_length=32)
    """E.164 digits without ``+`` (WhatsApp ``wa_id``) when known; kept for readers, lookups use
    :class:`CustomerIdentity`."""
    display_name: str | None = Field(default=None, max_length=200)
    email: str | None = Field(default=None, max_length=320)
    profile: dict[str, Any] = jsonb_dict_field()
    """Validated fields saved by the ``save_customer_profile`` tool."""
    created_at: datetime = created_at_field()
    updated_at: datetime = updated_at_field()


class CustomerIdentity(TenantOwned, table=True):
    """One way a customer is reached on a channel: a phone (``wa_id``), a BSUID, an IGSID, an e-mail.

    A person may hold several; an *active* identity (``retired_at`` null) belongs to one customer of
    the tenant (partial unique index). A number change or a recycled number retires the old row,
    which stays as history.
    """

    __tablename__ = "customer_identities"
    __table_args__ = (
        CheckConstraint(CHANNEL_CHECK, name="ck_customer_identities_channel"),
        CheckConstraint(
            "kind IN ('wa_id', 'bsuid', 'igsid', 'email', 'visitor', 'web_user')",
            name="ck_customer_identities_kind",
        ),
        CheckConstraint("value <> ''", name="ck_customer_identities_value_not_empty"),
        Index(
            "uq_customer_identities_active",
            "tenant_id",
            "channel",
            "kind",
            "value",
            unique=True,
            postgresql_where=text("retired_at IS NULL"),
        ),
    )

    id: uuid.UUID = id_field()
    customer_id: uuid.UUID = Field(foreign_key="customers.id", index=True, ondelete="CASCADE")
    channel: str = Field(sa_type=String(16))
    kind: str = Field(sa_type=String(16))
    """An :class:`IdentityKind`."""
    value: str = Field(max_length=320)
    created_at: datetime = created_at_field()
    last_seen_at: datetime = created_at_field()
    """When a message last arrived under this identity."""
    retired_at: datetime | None = optional_time_field()
    """Set when the identity stopped being the customer's (number changed, number recycled)."""


HUMAN_MODE_HAS_OWNER_CHECK = (
    "status <> 'human' OR assigned_agent_id IS NOT NULL OR assigned_user_id IS NOT NULL "
    "OR queued_at IS NOT NULL OR is_agent_console"
)
"""A conversation in human mode always has an agent (on WhatsApp or in the web console), a place in the
queue, or is an agent's console."""


class Conversation(TenantOwned, table=True):
    """A run of messages between one customer and the tenant, answered by the AI or a human.

    ``status``, ``assigned_agent_id``, ``queued_at``, ``assigned_at`` and ``closed_at`` change only in
    :mod:`switchboard.conversations.lifecycle`, which records each change as a :class:`ConversationEvent`.
    """

    __tablename__ = "conversations"
    __table_args__ = (
        CheckConstraint("status IN ('ai', 'human', 'closed')", name="ck_conversations_status"),
        CheckConstraint(HUMAN_MODE_HAS_OWNER_CHECK, name="ck_conversations_human_has_owner"),
        CheckConstraint(CHANNEL_CHECK, name="ck_conversations_channel"),
        Index("ix_conversations_tenant_customer_status", "tenant_id", "customer_id", "status"),
        Index(
            "ix_conversations_account_thread",
            "channel_account_id",
            "external_thread_id",
            postgresql_where=text("external_thread_id IS NOT NULL"),
        ),
        Index(
            "ix_conversations_tenant_queued",
            "tenant_id",
            "queued_at",
            postgresql_where=text("queued_at IS NOT NULL"),
        ),
    )

    id: uuid.UUID = id_field()
    customer_id: uuid.UUID = Field(foreign_key="customers.id", index=True, ondelete="CASCADE")
    channel_account_id: uuid.UUID | None = Field(
        default=None, foreign_key="channel_accounts.id", index=True, ondelete="SET NULL"
    )
    channel: str = Field(sa_type=String(16))
    status: str = Field(default=ConversationStatus.ai.value, sa_type=String(16))
    assigned_agent_id: uuid.UUID | None = Field(
        default=None, foreign_key="human_agents.id", index=True, ondelete="SET NULL"
    )
    """Human agent handling it while ``status == 'human'``."""
    assigned_user_id: uuid.UUID | None = Field(
        default=None, foreign_key="console_users.id", index=True, ondelete="SET NULL"
    )
    """Web console user who took it over (human mode without a WhatsApp agent); see
    :func:`switchboard.conversations.lifecycle.to_console_user`."""
    team_id: uuid.UUID | None = Field(default=None, foreign_key="teams.id", index=True, ondelete="SET NULL")
    """The team it was given to: its automatic assignment picks among that team's online agents (null:
    any agent); see :mod:`switchboard.handoff.teams`."""
    escalation_reason: str | None = Field(default=None, sa_type=Text)
    last_customer_message_at: datetime | None = optional_time_field()
    """Start of the 24-hour customer-service window (WhatsApp / Instagram)."""
    created_at: datetime = created_at_field()
    updated_at: datetime = updated_at_field()
    closed_at: datetime | None = optional_time_field()
    queued_at: datetime | None = optional_time_field()
    """Set while the conversation waits for a human agent (no agent was online); the queue's order."""
    assigned_at: datetime | None = optional_time_field()
    """When the current human agent took it (``/status`` shows "since")."""
    memory_summarized_at: datetime | None = optional_time_field()
    """When the memory job folded this closed conversation into ``user_memories`` (null: not yet)."""
    is_agent_console: bool = Field(default=False, sa_column_kwargs={"server_default": text("false")})
    """A human agent's own chat with the business number: in human mode, never answered by the AI."""
    external_thread_id: str | None = Field(default=None, max_length=255)
    """The provider's thread the conversation follows (Gmail ``threadId``: one conversation per
    thread); null on channels whose conversation is the whole chat with the customer."""
    review_flags: list[dict[str, Any]] = jsonb_list_field()
    """Reasons a person should look at the conversation, e.g. ``{"kind": "suspected_instructions",
    "message_id", "at"}`` for a mail that reads like instructions to the agent."""
    status_actor_type: str | None = Field(default=None, sa_type=String(16))
    """Who made the newest lifecycle transition (its ``conversation_events.actor_type``), written with
    ``status`` by :mod:`switchboard.conversations.lifecycle`: the worker's "did a person take over during
    the turn" check reads it from the conversation row instead of querying the events."""


class ConversationEvent(TenantOwned, table=True):
    """One lifecycle transition of a conversation (opened, to a human, back to the AI, closed, reassigned)."""

    __tablename__ = "conversation_events"
    __table_args__ = (
        CheckConstraint(
            "from_status IS NULL OR from_status IN ('ai', 'human', 'closed')",
            name="ck_conversation_events_from_status",
        ),
        CheckConstraint("to_status IN ('ai', 'human', 'closed')", name="ck_conversation_events_to_status"),
        CheckConstraint(
            "actor_type IN ('customer', 'ai', 'agent', 'business_app', 'system', 'api', 'console_user')",
            name="ck_conversation_events_actor_type",
        ),
        Index("ix_conversation_events_conversation_created", "conversation_id", "created_at"),
    )

    id: uuid.UUID = id_field()
    conversation_id: uuid.UUID = Field(foreign_key="conversations.id", ondelete="CASCADE")
    from_status: str | None = Field(default=None, sa_type=String(16))
    """Status before the event; null when the conversation was opened."""
    to_status: str = Field(sa_type=String(16))
    agent_id: uuid.UUID | None = Field(default=None, foreign_key="human_agents.id", ondelete="SET NULL")
    """The human agent handling the conversation after the event (null: the AI, the queue, nobody)."""
    actor_type: str = Field(sa_type=String(16))
    """An :class:`ActorType`."""
    actor_id: str | None = Field(default=None, max_length=64)
    """The agent's or customer's id when the actor is one (null for the AI, the system...)."""
    reason: str | None = Field(default=None, sa_type=Text)
    trace_id: str | None = Field(default=None, max_length=64)
    created_at: datetime = created_at_field()


class Message(TenantOwned, table=True):
    """One inbound or outbound message, or a tool message of the model's history.

    Inbound rows double as the durable queue: the channel service inserts them (unique on
    ``(channel, channel_account_id, external_id)``) before answering the webhook, and the worker
    moves ``inbound_state`` forward.
    """

    __tablename__ = "messages"
    __table_args__ = (
        UniqueConstraint(
            "channel", "channel_account_id", "external_id", name="uq_messages_channel_account_external"
        ),
        CheckConstraint("direction IN ('inbound', 'outbound')", name="ck_messages_direction"),
        CheckConstraint(
            "role IN ('user', 'assistant', 'tool', 'system', 'human_agent')", name="ck_messages_role"
        ),
        Index("ix_messages_conversation_created", "conversation_id", "created_at"),
        Index(
            "ix_messages_inbound_unfinished",
            "inbound_state",
            "created_at",
            postgresql_where=text("inbound_state IN ('pending', 'processing')"),
        ),
        Index(
            "ix_messages_waiting_model",
            "tenant_id",
            "created_at",
            postgresql_where=text("inbound_state = 'waiting_model'"),
        ),
    )

    id: uuid.UUID = id_field()
    conversation_id: uuid.UUID | None = Field(
        default=None, foreign_key="conversations.id", index=True, ondelete="CASCADE"
    )
    """Null only while an inbound row waits for the worker to resolve its conversation."""
    channel: str = Field(sa_type=String(16))
    channel_account_id: uuid.UUID | None = Field(
        default=None, foreign_key="channel_accounts.id", ondelete="SET NULL"
    )
    direction: str = Field(sa_type=String(16))
    role: str = Field(sa_type=String(16))
    kind: str = Field(default="text", max_length=32)
    """Normalized kind: text, image, audio, video, document, sticker, location, contacts, interactive,
    reaction, system, unsupported, tool_result..."""
    text: str | None = Field(default=None, sa_type=Text)
    media: list[dict[str, Any]] = jsonb_list_field()
    """Media references ``{ref, mime, filename?, caption?, voice?}``; ``ref`` is a provider handle."""
    external_id: str | None = Field(default=None, max_length=512)
    """Provider message id (WhatsApp ``wamid``, Instagram ``mid``, Gmail id): the de-duplication key."""
    reply_to_external_id: str | None = Field(default=None, max_length=512)
    sender_external_id: str | None = Field(default=None, max_length=255)
    raw: dict[str, Any] | None = jsonb_optional_field()
    """The provider's payload for this message (for replays and audits)."""
    tool_calls: list[dict[str, Any]] | None = jsonb_optional_field()
    """Assistant tool calls in OpenAI shape, for the model's history."""
    tool_call_id: str | None = Field(default=None, max_length=128)
    proxy_metadata: dict[str, Any] | None = jsonb_optional_field()
    """Set on relayed messages: who sent it, relayed from/to, original message id."""
    trace_id: str | None = Field(default=None, max_length=64, index=True)
    sent_at: datetime | None = optional_time_field()
    """Provider timestamp (UTC), not the time we processed it."""
    inbound_state: str | None = Field(default=None, sa_type=String(16))
    """``InboundState`` for inbound rows; null for outbound and history rows."""
    processing_attempts: int = Field(default=0)
    last_error: str | None = Field(default=None, sa_type=Text)
    processed_at: datetime | None = optional_time_field()
    created_at: datetime = created_at_field()


class Outbox(TenantOwned, table=True):
    """One part to send (a reply, notice, relay or a person's reply), written before any send.

    Unique on ``(inbound_message_id, purpose, part_index)`` so a retried job never writes or sends a
    part twice: a reply longer than the channel's limit is split into numbered parts.
    """

    __tablename__ = "outbox"
    __table_args__ = (
        UniqueConstraint(
            "inbound_message_id", "purpose", "part_index", name="uq_outbox_inbound_purpose_part"
        ),
        CheckConstraint(
            "status IN ('pending', 'sending', 'sent', 'delivered', 'read', 'played', 'failed')",
            name="ck_outbox_status",
        ),
        CheckConstraint(
            "purpose IN ('reply', 'notice', 'relay', 'human_reply', 'holding')", name="ck_outbox_purpose"
        ),
        Index("ix_outbox_channel_external", "channel", "external_id"),
        Index("ix_outbox_correlation", "correlation_id"),
        Index(
            "ix_outbox_due",
            "next_attempt_at",
            postgresql_where=text("status IN ('pending', 'sending')"),
        ),
    )

    id: uuid.UUID = id_field()
    conversation_id: uuid.UUID = Field(foreign_key="conversations.id", index=True, ondelete="CASCADE")
    inbound_message_id: uuid.UUID | None = Field(default=None, foreign_key="messages.id", ondelete="SET NULL")
    purpose: str = Field(default=OutboxPurpose.reply.value, sa_type=String(16))
    part_index: int = Field(default=0)
    channel: str = Field(sa_type=String(16))
    channel_account_id: uuid.UUID | None = Field(
        default=None, foreign_key="channel_accounts.id", ondelete="SET NULL"
    )
    """The account it is sent from (a relay to an agent goes out from the tenant's WhatsApp number)."""
    recipient: str = Field(max_length=255)
    payload: dict[str, Any] = jsonb_dict_field()
    """What to send: ``{"type": "text", "text": ...}`` or a template / media description."""
    status: str = Field(default=OutboxStatus.pending.value, sa_type=String(16))
    external_id: str | None = Field(default=None, max_length=512)
    """Provider id of the sent message (``wamid``), matched by status webhooks."""
    error_code: str | None = Field(default=None, max_length=32)
    error_message: str | None = Field(default=None, sa_type=Text)
    attempts: int = Field(default=0)
    correlation_id: str | None = Field(default=None, max_length=64)
    """Our id passed to the provider and echoed back on statuses (WhatsApp ``biz_opaque_callback_data``)."""
    next_attempt_at: datetime | None = optional_time_field()
    """Earliest next send attempt (back-off after a transient error); null: now."""
    sending_at: datetime | None = optional_time_field()
    """When the row was marked ``sending`` (a row stuck there is reconciled, then retried)."""
    trace_id: str | None = Field(default=None, max_length=64)
    created_at: datetime = created_at_field()
    updated_at: datetime = updated_at_field()
    sent_at: datetime | None = optional_time_field()
