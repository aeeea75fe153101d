"""A tenant's website chat widgets: public key, secret, identity verification, origins, rate limits.

A widget is a ``channel_accounts`` row of channel ``web``: its ``external_account_id`` is the public
widget key that goes in the script tag (``wk_`` + 24 random characters); its credentials (encrypted) hold
the widget secret, which only the business's backend knows. Who may do what:

* **anonymous** by default: a visitor is the random id their browser keeps (:func:`valid_visitor_id`,
  at least 128 bits from the browser's CSPRNG); it is unguessable, so it is the visitor's only key;
* **verified** when the page passes ``user_id`` and ``user_hash`` =
  ``hex(HMAC-SHA256(widget secret, user_id))``, computed by the business's backend
  (:func:`user_hash`); a missing or wrong hash never links (:func:`verified_user`, constant time);
* a request's ``Origin`` must be one of the tenant's ``web.allowed_origins`` (:func:`origin_allowed`);
* each visitor and each network address may send so many messages a minute (:func:`over_rate`).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
import uuid
from dataclasses import dataclass

import regex
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.channels.accounts import CACHE_TTL_S
from switchboard.channels.web.settings import WebSettings, normalize_origin
from switchboard.crypto import CredentialCipher
from switchboard.db.models import ChannelAccount, Tenant
from switchboard.tenant_settings import TenantSettings, cached_tenant_settings
from switchboard.tenants import add_channel_account

__all__ = [
    "CHANNEL",
    "Widget",
    "WidgetDirectory",
    "create_widget",
    "new_widget_key",
    "origin_allowed",
    "over_rate",
    "rotate_secret",
    "user_address",
    "user_hash",
    "valid_visitor_id",
    "verified_user",
    "widget_secret_of",
]

CHANNEL = "web"
_VISITOR_ID = regex.compile(r"^[A-Za-z0-9_-]{22,64}$")
_KEY = regex.compile(r"^wk_[A-Za-z0-9_-]{16,64}$")
USER_PREFIX = "user:"
"""Stream address of a verified user (``user:<id>``); a visitor id never contains ``:``."""
MAX_USER_ID = 200


def new_widget_key() -> str:
    """A fresh public widget key (``wk_`` + 24 URL-safe characters)."""
    return "wk_" + secrets.token_urlsafe(18)


def valid_widget_key(key: str) -> bool:
    return bool(_KEY.match(key))


def valid_visitor_id(value: str) -> bool:
    """Whether ``value`` is a visitor id the widget makes: 22-64 URL-safe base64 characters (≥ 128 bits)."""
    return bool(_VISITOR_ID.match(value))


def user_hash(secret: str, user_id: str) -> str:
    """``hex(HMAC-SHA256(secret, user_id))``: what the business's backend puts beside ``user_id``."""
    return hmac.new(secret.encode(), user_id.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def verified_user(secret: str | None, user_id: str | None, given_hash: str | None) -> str | None:
    """``user_id`` when ``given_hash`` is its :func:`user_hash` under ``secret`` (compared in constant
    time); ``None`` for anything else (no secret, no id, an id too long, no hash, a wrong hash)."""
    if not secret or not user_id or not given_hash or len(user_id) > MAX_USER_ID:
        return None
    if not user_id.isprintable():
        return None
    expected = user_hash(secret, user_id)
    given = given_hash.strip().lower().encode("utf-8", "surrogatepass")  # bytes: any text compares
    return user_id if hmac.compare_digest(expected.encode(), given) else None


def user_address(user_id: str) -> str:
    """The stream address (and ``web_user`` identity's reply address) of a verified user."""
    return USER_PREFIX + user_id


def widget_secret_of(account: ChannelAccount, cipher: CredentialCipher) -> str | None:
    if not account.credentials_encrypted:
        return None
    secret = cipher.decrypt(account.credentials_encrypted).get("widget_secret")
    return str(secret) if secret else None


async def create_widget(
    session: AsyncSession, *, tenant: Tenant, cipher: CredentialCipher, display_name: str | None = None
) -> tuple[ChannelAccount, str]:
    """A new widget of ``tenant`` with a fresh key and secret (the caller commits).

    Returns:
        ``(account, secret)``.
    """
    secret = secrets.token_urlsafe(32)
    account = await add_channel_account(
        session,
        tenant=tenant,
        channel=CHANNEL,
        external_account_id=new_widget_key(),
        display_name=display_name or "Website chat",
        credentials={"widget_secret": secret},
        cipher=cipher,
    )
    return account, secret


async def rotate_secret(session: AsyncSession, account: ChannelAccount, cipher: CredentialCipher) -> str:
    """A new secret for ``account`` (the old one stops verifying at once); the caller commits."""
    secret = secrets.token_urlsafe(32)
    account.credentials_encrypted = cipher.encrypt({"widget_secret": secret})
    session.add(account)
    await session.flush()
    return secret


def origin_allowed(origin: str | None, allowed: frozenset[str]) -> bool:
    """Whether a request's ``Origin`` header names one of ``allowed`` (normalized origins)."""
    if not origin:
        return False
    try:
        return normalize_origin(origin) in allowed
    except ValueError:
        return False


@dataclass(frozen=True)
class Widget:
    """What the web service needs to know about one widget key."""

    account_id: uuid.UUID
    tenant_id: uuid.UUID
    key: str
    secret: str | None
    origins: frozenset[str]
    settings: WebSettings
    tenant_name: str
    tenant_settings: TenantSettings


class WidgetDirectory:
    """Widget key → :class:`Widget` (active widgets only), cached for a few seconds per process."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession], cipher: CredentialCipher) -> None:
        self._sessions = sessions
        self._cipher = cipher
        self._cache: dict[str, tuple[float, Widget | None]] = {}

    def invalidate(self) -> None:
        self._cache.clear()

    async def resolve(self, key: str) -> Widget | None:
        """The active widget of ``key``, or ``None`` (a malformed key is never looked up)."""
        if not valid_widget_key(key):
            return None
        now = time.monotonic()
        hit = self._cache.get(key)
        if hit is not None and hit[0] > now:
            return hit[1]
        async with self._sessions() as session:
            row = (
                await session.exec(
                    select(ChannelAccount, Tenant)
                    .join(Tenant, Tenant.id == ChannelAccount.tenant_id)  # type: ignore[arg-type]
                    .where(
                        ChannelAccount.channel == CHANNEL,
                        ChannelAccount.external_account_id == key,
                        ChannelAccount.is_active.is_(True),  # type: ignore[attr-defined]
                    )
                )
            ).first()
        widget = None
        if row is not None:
            account, tenant = row
            tenant_settings = cached_tenant_settings(tenant.settings_extensions, tenant_id=str(tenant.id))
            section = tenant_settings.channel(WebSettings)
            widget = Widget(
                account_id=account.id,
                tenant_id=tenant.id,
                key=key,
                secret=widget_secret_of(account, self._cipher),
                origins=frozenset(section.allowed_origins),
                settings=section,
                tenant_name=tenant.name,
                tenant_settings=tenant_settings,
            )
        self._cache[key] = (now + min(CACHE_TTL_S, 5.0), widget)
        return widget


async def over_rate(redis: Redis, key: str, limit: int, *, amount: int = 1, window_s: int = 60) -> bool:
    """Count ``amount`` events under ``key`` in the current ``window_s`` window (seconds); ``True`` once
    the window's count is over ``limit``."""
    slot = int(time.time()) // window_s
    name = f"web:rate:{key}:{slot}"
    pipe = redis.pipeline(transaction=False)
    pipe.incrby(name, amount)
    pipe.expire(name, window_s * 2)
    count, _ = await pipe.execute()
    return int(count) > limit
