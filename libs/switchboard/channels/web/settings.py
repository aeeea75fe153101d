"""The website chat section of a tenant's settings: ``settings_extensions["web"]``.

Registered with :func:`switchboard.tenant_settings.register_section` when this module is imported
(``switchboard.channels`` imports it).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from switchboard.tenant_settings import SettingText, register_section

__all__ = ["SECTION", "WebSettings", "normalize_origin"]

SECTION = "web"


def normalize_origin(value: str) -> str:
    """``scheme://host[:port]`` of ``value``, lower-cased, as browsers send it in ``Origin``.

    Raises:
        ValueError: not an ``http(s)://`` origin (a path, a query, credentials or a wildcard are refused).
    """
    text = value.strip().rstrip("/")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not a website origin: {value[:100]!r} (write https://shop.example.com)")
    if parts.path or parts.query or parts.fragment or parts.username or parts.password or "*" in text:
        raise ValueError(f"an origin is scheme, host and port only: {value[:100]!r}")
    try:
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"not a website origin: {value[:100]!r}") from exc
    default = {"http": 80, "https": 443}[parts.scheme]
    host = parts.hostname.lower()
    return f"{parts.scheme}://{host}" + (f":{port}" if port and port != default else "")


class WebSettings(BaseModel):
    """How the tenant's website chat widget looks and where it may run."""

    model_config = ConfigDict(extra="forbid")

    allowed_origins: list[SettingText] = Field(default_factory=list, max_length=50)
    """Websites the widget may run on (``https://shop.example.com``); a request from any other ``Origin``
    is refused with 403 and gets no CORS headers. Empty: the widget works nowhere yet."""
    colour: str = Field("#1f6feb", pattern=r"^#[0-9a-fA-F]{6}$")
    """The widget's colour (launcher, header, the visitor's bubbles), ``#rrggbb``."""
    greeting_en: SettingText = Field("Hi! How can we help you?", max_length=300)
    """The first line a visitor reads when the page is in English."""
    greeting_es: SettingText = Field("¡Hola! ¿En qué podemos ayudarle?", max_length=300)
    """The first line a visitor reads when the page is in Spanish."""
    title: SettingText = Field("", max_length=80)
    """The panel's title (empty: the tenant's name)."""

    @field_validator("allowed_origins")
    @classmethod
    def _origins(cls, values: list[str]) -> list[str]:
        return list(dict.fromkeys(normalize_origin(v) for v in values if v.strip()))


register_section(SECTION, WebSettings)
