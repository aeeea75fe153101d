"""Organizations, tenants and the channel accounts that route inbound traffic to a tenant."""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import CheckConstraint, String, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from switchboard.db.models.base import (
    TenantOwned,
    created_at_field,
    id_field,
    jsonb_dict_field,
    jsonb_list_field,
    optional_time_field,
    updated_at_field,
)


class Channel(StrEnum):
    """A messaging channel a tenant connects."""

    whatsapp = "whatsapp"
    instagram = "instagram"
    gmail = "gmail"
    web = "web"


CHANNEL_CHECK = "channel IN ('whatsapp', 'instagram', 'gmail', 'web')"


class Organization(SQLModel, table=True):
    """The top tenancy level: a company that may run several tenants (brands, shops)."""

    __tablename__ = "organizations"

    id: uuid.UUID = id_field()
    name: str = Field(max_length=200)
    created_at: datetime = created_at_field()


class Tenant(SQLModel, table=True):
    """A business whose customers Switchboard answers. Everything else carries its ``tenant_id``."""

    __tablename__ = "tenants"

    id: uuid.UUID = id_field()
    organization_id: uuid.UUID = Field(foreign_key="organizations.id", index=True, ondelete="CASCADE")
    slug: str = Field(max_length=64, unique=True, index=True)
    """URL- and CLI-friendly unique name, e.g. ``demo``."""
    name: str = Field(max_length=200)
    settings_extensions: dict[str, Any] = jsonb_dict_field()
    """Per-tenant overrides of the defaults (loop limits, models, prompts); see ``TenantSettings``."""
    suspended_at: datetime | None = optional_time_field()
    """Set by a platform admin: a suspended tenant's inbound messages are stored but not answered."""
    created_at: datetime = created_at_field()
    updated_at: datetime = updated_at_field()


class ChannelAccount(TenantOwned, table=True):
    """One connected account of a channel: a WhatsApp number, an Instagram account, a mailbox.

    Inbound webhooks are routed to a tenant by ``(channel, external_account_id)``.
    """

    __tablename__ = "channel_accounts"
    __table_args__ = (
        UniqueConstraint("channel", "external_account_id", name="uq_channel_accounts_channel_external"),
        CheckConstraint(CHANNEL_CHECK, name="ck_channel_accounts_channel"),
    )

    id: uuid.UUID = id_field()
    channel: str = Field(sa_type=String(16))
    external_account_id: str = Field(max_length=255)
    """WhatsApp ``phone_number_id``, Instagram professional account id, mailbox address, or a website
    chat widget's public key."""
    display_name: str | None = Field(default=None, max_length=200)
    credentials_encrypted: str | None = Field(default=None)
    """Fernet token of the JSON credentials (access token, refresh token...); see ``switchboard.crypto``."""
    api_base_url: str | None = Field(default=None, max_length=500)
    """Provider API root this account talks to (WhatsApp/Instagram Graph): ``NULL`` the real API (or
    the process default, ``WHATSAPP_GRAPH_BASE_URL``), ``sandbox`` this deployment's sandbox, or a URL
    (:meth:`~switchboard.settings.Settings.channel_api_base_url`). Migration ``0018_account_api_base``."""
    is_active: bool = Field(default=True)
    created_at: datetime = created_at_field()
    updated_at: datetime = updated_at_field()


class WhatsAppTemplate(TenantOwned, table=True):
    """One message template of a WhatsApp number's business account, as the Graph API last listed it
    (``GET /{waba_id}/message_templates``); replaced as a whole at every refresh."""

    __tablename__ = "whatsapp_templates"
    __table_args__ = (
        UniqueConstraint(
            "channel_account_id", "name", "language", name="uq_whatsapp_templates_account_name_lang"
        ),
    )

    id: uuid.UUID = id_field()
    channel_account_id: uuid.UUID = Field(foreign_key="channel_accounts.id", index=True, ondelete="CASCADE")
    waba_id: str = Field(max_length=64)
    """The WhatsApp Business Account the template belongs to (digits)."""
    name: str = Field(max_length=512)
    language: str = Field(max_length=16)
    """Meta's language code, e.g. ``en_US``, ``es``."""
    status: str = Field(max_length=32)
    """``APPROVED``, ``PENDING``, ``REJECTED``, ``PAUSED``, ``DISABLED``...: only ``APPROVED`` ones are sent."""
    category: str = Field(default="", max_length=32)
    """``UTILITY``, ``MARKETING`` or ``AUTHENTICATION``."""
    parameter_format: str = Field(default="POSITIONAL", max_length=16)
    """``POSITIONAL`` (``{{1}}``) or ``NAMED`` (``{{order_id}}``)."""
    components: list[dict[str, Any]] = jsonb_list_field()
    """Meta's ``components`` (``HEADER``, ``BODY``, ``FOOTER``, ``BUTTONS``) as listed."""
    external_id: str = Field(default="", sa_type=Text)
    created_at: datetime = created_at_field()
    """When this row was stored: the refresh that listed it."""
