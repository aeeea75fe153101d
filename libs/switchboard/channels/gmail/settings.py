"""The Gmail section of a tenant's settings: ``settings_extensions["gmail"]``.

Registered with :func:`switchboard.tenant_settings.register_section` when imported (``switchboard.channels``
imports it).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from switchboard.tenant_settings import SettingText, register_section

__all__ = ["GmailSettings", "SECTION"]

SECTION = "gmail"
"""Key of this section in ``settings_extensions``."""


class GmailSettings(BaseModel):
    """Gmail-specific behaviour of one tenant."""

    model_config = ConfigDict(extra="forbid")

    auto_reply_cap: int = Field(3, ge=1, le=100)
    """Automatic replies one thread may get within :attr:`auto_reply_window_s`; the next mail of the
    thread is handed to a person instead (two robots answering each other stop here)."""
    auto_reply_window_s: float = Field(600.0, gt=0, le=7 * 86_400)
    """The window of :attr:`auto_reply_cap`, in seconds."""
    sender_name: SettingText | None = Field(None, max_length=200)
    """Display name on the ``From`` of replies (``"Example Support"``); the bare address when unset."""


register_section(SECTION, GmailSettings)
