"""The Instagram section of a tenant's settings: ``settings_extensions["instagram"]``.

Registered with :func:`switchboard.tenant_settings.register_section` when this module is imported
(``switchboard.channels`` imports it).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from switchboard.tenant_settings import register_section

__all__ = ["InstagramSettings", "SECTION"]

SECTION = "instagram"


class InstagramSettings(BaseModel):
    """Instagram-specific behaviour of one tenant (buttons that hand over to a person are the tenant's
    ``handoff.button_payloads``, the same on every channel)."""

    model_config = ConfigDict(extra="forbid")

    fetch_profiles: bool = True
    """Ask ``GET /{igsid}`` for the customer's name and username (cached; a failure never blocks)."""


register_section(SECTION, InstagramSettings)
