"""Web console users, their server-side sessions and API tokens, and what each user has read."""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum

from sqlalchemy import CheckConstraint, DateTime, Index, String, UniqueConstraint
from sqlmodel import Field, SQLModel

from switchboard.db.models.base import (
    created_at_field,
    id_field,
    jsonb_list_field,
    optional_time_field,
    updated_at_field,
)


class Role(StrEnum):
    """What a console user may do (``console_users.role``)."""

    platform_admin = "platform_admin"  # every tenant, the platform pages; no tenant of their own
    tenant_admin = "tenant_admin"  # everything of one tenant (settings, knowledge, tools, people, inbox)
    agent = "agent"  # the inbox of one tenant: read conversations, take over, reply, hand back


ROLE_CHECK = "role IN ('platform_admin', 'tenant_admin', 'agent')"


class ConsoleUser(SQLModel, table=True):
    """A person who logs in to the web console (e-mail + argon2 password hash).

    A platform admin has no tenant (``tenant_id`` null); every other role belongs to exactly one.
    """

    __tablename__ = "console_users"
    __table_args__ = (
        CheckConstraint(ROLE_CHECK, name="ck_console_users_role"),
        CheckConstraint(
            "(role = 'platform_admin') = (tenant_id IS NULL)", name="ck_console_users_tenant_by_role"
        ),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID | None = Field(
        default=None, foreign_key="tenants.id", index=True, ondelete="CASCADE"
    )
    """The user's tenant; null for a platform admin."""
    email: str = Field(max_length=320, sa_column_kwargs={"unique": True})
    """Lower-cased login e-mail, unique across the platform."""
    name: str = Field(default="", max_length=200)
    role: str = Field(sa_type=String(16))
    """A :class:`Role`."""
    password_hash: str = Field(max_length=512)
    """pwdlib argon2id hash (``$argon2id$...``)."""
    is_active: bool = Field(default=True)
    last_login_at: datetime | None = optional_time_field()
    created_at: datetime = created_at_field()
    updated_at: datetime = updated_at_field()


class ConsoleSession(SQLModel, table=True):
    """A logged-in browser: the cookie holds a random token, the row only its SHA-256."""

    __tablename__ = "console_sessions"
    __table_args__ = (Index("ix_console_sessions_expires", "expires_at"),)

    id: uuid.UUID = id_field()
    token_hash: str = Field(max_length=64, sa_column_kwargs={"unique": True})
    """SHA-256 hex of the cookie value (a stolen database dump holds no usable session)."""
    user_id: uuid.UUID = Field(foreign_key="console_users.id", index=True, ondelete="CASCADE")
    csrf_token: str = Field(max_length=64)
    """Sent back by every form (hidden field) and htmx request (``X-CSRF-Token``)."""
    created_at: datetime = created_at_field()
    expires_at: datetime = Field(sa_type=DateTime(timezone=True))
    last_seen_at: datetime = created_at_field()


class ApiToken(SQLModel, table=True):
    """A per-user bearer token for the admin API, acting with the user's role and tenant."""

    __tablename__ = "console_api_tokens"
    __table_args__ = (UniqueConstraint("token_hash", name="uq_console_api_tokens_hash"),)

    id: uuid.UUID = id_field()
    user_id: uuid.UUID = Field(foreign_key="console_users.id", index=True, ondelete="CASCADE")
    name: str = Field(default="", max_length=100)
    token_hash: str = Field(max_length=64)
    """SHA-256 hex of the token (shown once when created: ``sbu_...``)."""
    created_at: datetime = created_at_field()
    last_used_at: datetime | None = optional_time_field()
    revoked_at: datetime | None = optional_time_field()


class TenantApiKey(SQLModel, table=True):
    """A tenant's key for the public API (``/api/v1``): the tenant's own systems (a shop, a CRM) call with
    it, limited to its ``scopes``; no user acts through it.

    The key is shown once when created (``sbk_...``); the row keeps its first characters (``prefix``, to
    tell keys apart in lists) and the SHA-256 of the whole key. It works until ``expires_at`` (none: no
    expiry) and not after ``revoked_at``.
    """

    __tablename__ = "tenant_api_keys"
    __table_args__ = (UniqueConstraint("token_hash", name="uq_tenant_api_keys_hash"),)

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = Field(foreign_key="tenants.id", index=True, ondelete="CASCADE")
    name: str = Field(default="", max_length=100)
    prefix: str = Field(max_length=16)
    """The key's first characters (``sbk_`` and 8 more), shown in lists."""
    token_hash: str = Field(max_length=64)
    """SHA-256 hex of the whole key."""
    scopes: list[str] = jsonb_list_field()
    """What the key may do (:data:`switchboard.users.tokens.API_SCOPES`), e.g. ``["conversations:read"]``."""
    created_by_id: uuid.UUID | None = Field(default=None, foreign_key="console_users.id", ondelete="SET NULL")
    """Who created it; ``None`` when made from the command line or after that user is deleted."""
    created_at: datetime = created_at_field()
    expires_at: datetime | None = optional_time_field()
    last_used_at: datetime | None = optional_time_field()
    revoked_at: datetime | None = optional_time_field()


class ConversationRead(SQLModel, table=True):
    """Until when a user has read a conversation (the inbox's "unread" filter and bold rows)."""

    __tablename__ = "console_conversation_reads"
    __table_args__ = (
        UniqueConstraint("user_id", "conversation_id", name="uq_console_reads_user_conversation"),
        CheckConstraint("read_at IS NOT NULL", name="ck_console_reads_read_at"),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = Field(foreign_key="tenants.id", index=True, ondelete="CASCADE")
    user_id: uuid.UUID = Field(foreign_key="console_users.id", ondelete="CASCADE")
    conversation_id: uuid.UUID = Field(foreign_key="conversations.id", ondelete="CASCADE")
    read_at: datetime = created_at_field()


class ConsoleInvite(SQLModel, table=True):
    """An invitation to join a tenant's console: a link that sets the new user's password once.

    The link carries a random token; the row keeps only its SHA-256. It works until ``expires_at``,
    once (``accepted_at``), and not after ``revoked_at`` (withdrawn, or replaced by a newer link).
    """

    __tablename__ = "console_invites"
    __table_args__ = (
        CheckConstraint("role IN ('tenant_admin', 'agent')", name="ck_console_invites_role"),
        UniqueConstraint("token_hash", name="uq_console_invites_token_hash"),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = Field(foreign_key="tenants.id", index=True, ondelete="CASCADE")
    email: str = Field(max_length=320)
    """Lower-cased e-mail the account will sign in with."""
    name: str = Field(default="", max_length=200)
    role: str = Field(sa_type=String(16))
    """``tenant_admin`` or ``agent`` (a platform admin is never invited to a tenant)."""
    token_hash: str = Field(max_length=64)
    """SHA-256 hex of the link's token (the token itself is shown once, to the person inviting)."""
    invited_by_id: uuid.UUID | None = Field(default=None, foreign_key="console_users.id", ondelete="SET NULL")
    """Who sent it; ``None`` after that user is deleted, or when made from the command line."""
    created_at: datetime = created_at_field()
    expires_at: datetime = Field(sa_type=DateTime(timezone=True))
    accepted_at: datetime | None = optional_time_field()
    revoked_at: datetime | None = optional_time_field()
    user_id: uuid.UUID | None = Field(default=None, foreign_key="console_users.id", ondelete="SET NULL")
    """The account the link created, once accepted."""


class CannedReply(SQLModel, table=True):
    """A tenant's saved answer that people insert by its shortcut (``/`` in the console's reply box,
    ``/r shortcut`` on WhatsApp); ``{customer_name}`` and ``{agent_name}`` are filled when it is used."""

    __tablename__ = "canned_replies"
    __table_args__ = (UniqueConstraint("tenant_id", "shortcut", name="uq_canned_replies_tenant_shortcut"),)

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = Field(foreign_key="tenants.id", index=True, ondelete="CASCADE")
    shortcut: str = Field(max_length=32)
    """Lower-case letters, digits, ``-`` and ``_`` (what follows the ``/``)."""
    text: str = Field(max_length=4096)
    created_at: datetime = created_at_field()
    updated_at: datetime = updated_at_field()


class ConversationNote(SQLModel, table=True):
    """A private note a person keeps on a conversation: shown in the console's thread, never sent to the
    customer and never part of what the model reads (it is not a message)."""

    __tablename__ = "conversation_notes"
    __table_args__ = (Index("ix_conversation_notes_conversation_created", "conversation_id", "created_at"),)

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = Field(foreign_key="tenants.id", index=True, ondelete="CASCADE")
    conversation_id: uuid.UUID = Field(foreign_key="conversations.id", ondelete="CASCADE")
    text: str = Field(max_length=4096)
    author_name: str = Field(max_length=200)
    """Who wrote it, as shown (a console user's name or e-mail, a WhatsApp agent's name)."""
    user_id: uuid.UUID | None = Field(default=None, foreign_key="console_users.id", ondelete="SET NULL")
    agent_id: uuid.UUID | None = Field(default=None, foreign_key="human_agents.id", ondelete="SET NULL")
    created_at: datetime = created_at_field()


class CsatAnswer(SQLModel, table=True):
    """The customer-satisfaction question of one closed conversation: asked once (``asked_at``), answered
    at most once (``rating`` 1-5 and ``answered_at``), with the customer's optional comment. Who handled
    the conversation is kept with it: the AI (``handled_by = "ai"``), a WhatsApp agent (``agent_id``) or
    a console user (``user_id``)."""

    __tablename__ = "csat_answers"
    __table_args__ = (
        UniqueConstraint("conversation_id", name="uq_csat_answers_conversation"),
        CheckConstraint("rating IS NULL OR rating BETWEEN 1 AND 5", name="ck_csat_answers_rating"),
        CheckConstraint("handled_by IN ('ai', 'agent', 'console_user')", name="ck_csat_answers_handled_by"),
        Index("ix_csat_answers_tenant_answered", "tenant_id", "answered_at"),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = Field(foreign_key="tenants.id", index=True, ondelete="CASCADE")
    conversation_id: uuid.UUID = Field(foreign_key="conversations.id", ondelete="CASCADE")
    channel: str = Field(max_length=32)
    handled_by: str = Field(max_length=16)
    """``ai``, ``agent`` (a WhatsApp agent) or ``console_user``: who last handled the conversation."""
    agent_id: uuid.UUID | None = Field(default=None, foreign_key="human_agents.id", ondelete="SET NULL")
    user_id: uuid.UUID | None = Field(default=None, foreign_key="console_users.id", ondelete="SET NULL")
    rating: int | None = None
    """1 (bad) to 5 (good); ``None`` until the customer answers."""
    comment: str | None = Field(default=None, max_length=2000)
    asked_at: datetime = Field(sa_type=DateTime(timezone=True))  # type: ignore[call-overload]
    answered_at: datetime | None = Field(default=None, sa_type=DateTime(timezone=True))  # type: ignore[call-overload]
