"""Per-account verify tokens of the Meta webhook handshake, and when each handshake last succeeded.

Meta checks a callback URL with ``GET ?hub.mode=subscribe&hub.verify_token=T&hub.challenge=C`` and
expects ``C`` back. Besides the app-wide ``META_VERIFY_TOKEN``, each connected account gets a verify
token of its own, ``<account id>.<32 hex>`` (HMAC-SHA256 of ``<channel>:<account id>`` under
``META_VERIFY_TOKEN``): nothing is stored, the webhook recomputes it, and a handshake made with it says
which account's subscription Meta just verified. The console's Channels page shows it with the
callback URL, and when the handshake last succeeded (kept in Redis, one key per account).
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime
from typing import Any

from switchboard.observability import get_logger

__all__ = [
    "APP_WIDE",
    "account_of_verify_token",
    "account_verify_token",
    "last_handshake",
    "record_handshake",
]

log = get_logger(__name__)

APP_WIDE = "app"
"""The account part of the Redis key of a handshake made with the app-wide verify token."""
_KEY = "switchboard:meta_handshake:{channel}:{account}"


def account_verify_token(secret: str, channel: str, account_id: str) -> str:
    """The verify token of one account: ``<account_id>.<32 hex chars>``, derived from ``secret``
    (``META_VERIFY_TOKEN``), so changing that secret changes every account's token."""
    mac = hmac.new(secret.encode(), f"{channel}:{account_id}".encode(), hashlib.sha256).hexdigest()
    return f"{account_id}.{mac[:32]}"


def account_of_verify_token(secret: str, channel: str, token: str | None) -> str | None:
    """The account id ``token`` is the verify token of (constant-time check), or ``None``."""
    if not token or not secret or "." not in token:
        return None
    account_id = token.split(".", 1)[0]
    if not account_id.isdigit() or len(account_id) > 64:
        return None
    expected = account_verify_token(secret, channel, account_id)
    return account_id if hmac.compare_digest(expected.encode(), token.encode()) else None


async def record_handshake(redis: Any, channel: str, account_id: str | None) -> None:
    """Remember now as the last successful handshake of ``account_id`` (``None``: the app-wide token).

    Redis trouble is logged and swallowed: the handshake itself has already succeeded."""
    if redis is None:
        return
    key = _KEY.format(channel=channel, account=account_id or APP_WIDE)
    try:
        await redis.set(key, datetime.now(UTC).isoformat())
    except Exception as exc:  # noqa: BLE001 (a lost record must not fail Meta's handshake)
        log.warning("webhook_handshake_not_recorded", channel=channel, error=type(exc).__name__)


async def last_handshake(redis: Any, channel: str, account_id: str) -> datetime | None:
    """When Meta last completed the handshake for ``account_id`` with its own verify token, or ``None``
    (never, or Redis unavailable: logged)."""
    if redis is None:
        return None
    try:
        value = await redis.get(_KEY.format(channel=channel, account=account_id))
    except Exception as exc:  # noqa: BLE001 (the page shows "never" rather than failing)
        log.warning("webhook_handshake_unreadable", channel=channel, error=type(exc).__name__)
        return None
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.decode() if isinstance(value, bytes) else str(value))
    except ValueError:
        return None
