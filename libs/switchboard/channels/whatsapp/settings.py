"""The WhatsApp section of a tenant's settings: ``settings_extensions["whatsapp"]``.

Registered with :func:`switchboard.tenant_settings.register_section` when this module is imported
(``switchboard.channels`` imports it), so the loader validates it in every process and
``tenant_settings.whatsapp`` / ``tenant_settings.channel(WhatsAppSettings)`` read it.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from switchboard.i18n import N_
from switchboard.tenant_settings import TRANSLATABLE, SettingText, register_section

__all__ = ["WhatsAppSettings", "SECTION"]

SECTION = "whatsapp"
"""Key of this section in ``settings_extensions``."""


class WhatsAppSettings(BaseModel):
    """WhatsApp-specific behaviour of one tenant."""

    model_config = ConfigDict(extra="forbid")

    opt_out_payloads: list[Annotated[SettingText, Field(min_length=1, max_length=256)]] = Field(
        default_factory=lambda: ["Unsubscribe", "STOP"], max_length=50
    )
    """Button payloads (template quick reply ``button.payload`` or an interactive reply id, compared
    case-insensitively) that opt the customer out of marketing/template messages."""
    opt_out_reply: SettingText = Field(
        N_(
            "You're unsubscribed: we won't send you marketing messages any more. "
            "You can still write to us here whenever you need help."
        ),
        min_length=1,
        max_length=1_000,
        json_schema_extra=TRANSLATABLE,
    )
    """The one confirmation sent after an opt-out button."""


register_section(SECTION, WhatsAppSettings)
