"""Checks made when a Meta account is connected from the console: the token works, the account exists,
the app is subscribed. Each is one Graph call; a refusal is raised in plain words for the page.

* WhatsApp: ``GET /{version}/{phone_number_id}?fields=verified_name,display_phone_number,quality_rating``
  (the number as Meta knows it), then ``POST /{version}/{waba_id}/subscribed_apps`` with
  ``override_callback_uri`` and ``verify_token`` (subscribes the app to the WhatsApp Business Account;
  Meta verifies the callback with a handshake before answering, error 2200 when it fails).
* Instagram: ``GET /{version}/{ig_id}?fields=user_id,username,name,account_type`` (the professional
  account).

Graph errors and what the person connecting is told (:func:`refusal_words`): 190 the token is invalid or
expired; 10 and 200-299 a permission is missing; 100 the id is unknown to Meta or not visible to this
token; 2200 the callback could not be verified; anything else Meta's own message with its code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from switchboard.i18n import N_
from switchboard.observability import get_logger

__all__ = [
    "ConnectRefused",
    "InstagramCheck",
    "NumberCheck",
    "INSTAGRAM_WEBHOOK_FIELDS",
    "WHATSAPP_WEBHOOK_FIELDS",
    "check_instagram_account",
    "check_whatsapp_number",
    "refusal_words",
    "subscribe_whatsapp_app",
]

log = get_logger(__name__)

WHATSAPP_WEBHOOK_FIELDS = ("messages", "smb_message_echoes")
"""The WhatsApp Business Account webhook fields the app subscribes to (the dashboard's Webhook fields)."""
INSTAGRAM_WEBHOOK_FIELDS = ("messages", "messaging_postbacks", "messaging_seen", "message_reactions")
"""The Instagram webhook fields to subscribe to in the App Dashboard (Instagram → Webhooks)."""

_PERMISSIONS = {
    "whatsapp": "whatsapp_business_management and whatsapp_business_messaging",
    "instagram": "instagram_business_basic and instagram_business_manage_messages",
}


class ConnectRefused(ValueError):
    """Meta refused a check, or could not be reached; ``str()`` is the plain-words reason in English.

    Attributes:
        words: the reason as an English msgid with ``%(name)s`` places (the console translates it).
        params: the values of those places.
        code: Meta's error code (``None``: no answer, or not a Graph error).
    """

    def __init__(self, words: str, params: dict[str, Any] | None = None, *, code: int | None = None) -> None:
        self.words, self.params, self.code = words, params or {}, code
        super().__init__(words % self.params)


@dataclass(frozen=True)
class NumberCheck:
    """A WhatsApp business number as Meta knows it."""

    display_name: str
    """``verified_name``: the name customers see."""
    phone_number: str
    """``display_phone_number``, e.g. ``+1 555-010-0042``."""
    quality_rating: str
    """``GREEN``, ``YELLOW``, ``RED`` or ``UNKNOWN``."""


@dataclass(frozen=True)
class InstagramCheck:
    """An Instagram professional account as Meta knows it."""

    username: str
    name: str


def refusal_words(
    channel: str, code: int | None, message: str, *, account_id: str = ""
) -> tuple[str, dict[str, Any]]:
    """What to tell the person connecting ``channel`` when Graph answered error ``code``: an English
    msgid and its parameters (``msgid % params`` is the English text)."""
    if code == 190:
        return N_(
            "Meta refused the access token: it is invalid or has expired. Create a permanent token "
            "(a system user's token in Business Settings) and paste it again."
        ), {}
    if code == 10 or (code is not None and 200 <= code <= 299):
        return N_(
            "The access token is missing a permission this needs (%(permissions)s). Give the system user "
            "those permissions on this account and try again."
        ), {"permissions": _PERMISSIONS.get(channel, channel)}
    if code == 100:
        return N_(
            "Meta does not know the account %(account)s, or this token cannot see it. Check the id in the "
            "App Dashboard and that the token belongs to the same business."
        ), {"account": account_id}
    if code == 2200:
        return N_(
            "Meta could not verify the callback URL: it must be reachable over HTTPS and answer the verify "
            "token shown on this page."
        ), {}
    return N_("Meta refused the request: %(message)s (error %(code)s)."), {
        "message": message[:200],
        "code": code,
    }


async def _graph(
    method: str,
    url: str,
    token: str,
    *,
    channel: str,
    account_id: str,
    timeout_s: float,
    params: dict[str, str] | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> dict[str, Any]:
    try:
        async with httpx.AsyncClient(timeout=timeout_s, transport=transport) as client:
            response = await client.request(
                method, url, params=params, headers={"Authorization": f"Bearer {token}"}
            )
    except httpx.HTTPError as exc:
        log.warning("meta_connect_unreachable", channel=channel, url=url, error=type(exc).__name__)
        raise ConnectRefused(
            N_("Could not reach Meta at %(url)s (%(error)s). Try again in a moment."),
            {"url": url, "error": type(exc).__name__},
        ) from None
    try:
        data = response.json()
    except ValueError:
        data = None
    if response.status_code < 400 and isinstance(data, dict) and "error" not in data:
        return data
    error = data.get("error") if isinstance(data, dict) and isinstance(data.get("error"), dict) else {}
    code = error.get("code") if isinstance(error.get("code"), int) else None
    message = str(error.get("message") or f"HTTP {response.status_code}")
    log.warning("meta_connect_refused", channel=channel, code=code, http_status=response.status_code)
    words, params = refusal_words(channel, code, message, account_id=account_id)
    raise ConnectRefused(words, params, code=code)


async def check_whatsapp_number(
    base_url: str,
    api_version: str,
    token: str,
    phone_number_id: str,
    *,
    timeout_s: float = 15.0,
    transport: httpx.AsyncBaseTransport | None = None,
) -> NumberCheck:
    """One Graph call: the number ``phone_number_id`` with ``token``.

    Raises:
        ConnectRefused: Meta refused (invalid token 190, missing permission 10/200, unknown id 100) or
            did not answer.
    """
    data = await _graph(
        "GET",
        f"{base_url.rstrip('/')}/{api_version}/{phone_number_id}",
        token,
        channel="whatsapp",
        account_id=phone_number_id,
        timeout_s=timeout_s,
        transport=transport,
        params={"fields": "verified_name,display_phone_number,quality_rating"},
    )
    return NumberCheck(
        display_name=str(data.get("verified_name") or ""),
        phone_number=str(data.get("display_phone_number") or ""),
        quality_rating=str(data.get("quality_rating") or "UNKNOWN"),
    )


async def subscribe_whatsapp_app(
    base_url: str,
    api_version: str,
    token: str,
    waba_id: str,
    *,
    callback_url: str,
    verify_token: str,
    timeout_s: float = 30.0,
    transport: httpx.AsyncBaseTransport | None = None,
) -> None:
    """Subscribe the app to the WhatsApp Business Account ``waba_id``, with its callback for this
    account (Meta verifies it with a handshake using ``verify_token`` before answering).

    Raises:
        ConnectRefused: as :func:`check_whatsapp_number`, and 2200 when the callback did not verify.
    """
    await _graph(
        "POST",
        f"{base_url.rstrip('/')}/{api_version}/{waba_id}/subscribed_apps",
        token,
        channel="whatsapp",
        account_id=waba_id,
        timeout_s=timeout_s,
        transport=transport,
        params={"override_callback_uri": callback_url, "verify_token": verify_token},
    )


async def check_instagram_account(
    base_url: str,
    api_version: str,
    token: str,
    account_id: str,
    *,
    timeout_s: float = 15.0,
    transport: httpx.AsyncBaseTransport | None = None,
) -> InstagramCheck:
    """One Graph call: the professional account ``account_id`` with ``token``.

    Raises:
        ConnectRefused: as :func:`check_whatsapp_number`.
    """
    data = await _graph(
        "GET",
        f"{base_url.rstrip('/')}/{api_version}/{account_id}",
        token,
        channel="instagram",
        account_id=account_id,
        timeout_s=timeout_s,
        transport=transport,
        params={"fields": "user_id,username,name,account_type"},
    )
    return InstagramCheck(username=str(data.get("username") or ""), name=str(data.get("name") or ""))
