"""API credentials, both kinds, returned once when created; the database keeps only their SHA-256.

* Per-user API tokens (``sbu_...``): a bearer for the admin API, acting with the user's role and tenant.
* Tenant API keys (``sbk_...``): a bearer for the public API (``/api/v1``), for the tenant's own systems,
  limited to its scopes (:data:`API_SCOPES`), optionally expiring; no user acts through it.

A tenant admin lists both kinds of the tenant (:func:`list_credentials`) and revokes either at once
(:func:`revoke_credential`): every request looks the credential up again, nothing is cached.
"""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, update
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import ApiToken, ConsoleUser, TenantApiKey, utcnow
from switchboard.i18n import N_
from switchboard.observability import get_logger
from switchboard.users.accounts import sha256_hex

__all__ = [
    "API_KEY_PREFIX",
    "API_SCOPES",
    "API_TOKEN_PREFIX",
    "Credential",
    "CredentialNotFound",
    "UnknownScope",
    "create_tenant_key",
    "key_for_token",
    "list_credentials",
    "revoke_credential",
    "create_api_token",
    "active_api_tokens",
    "revoke_api_tokens",
    "user_for_api_token",
]

log = get_logger(__name__)

API_TOKEN_PREFIX = "sbu_"
"""Per-user API tokens start with this (tells them apart from ``ADMIN_TOKEN`` in logs and errors)."""


async def create_api_token(session: AsyncSession, *, user: ConsoleUser, name: str = "") -> str:
    """A new per-user admin API token (``sbu_...``), returned once; only its SHA-256 is stored."""
    token = API_TOKEN_PREFIX + secrets.token_urlsafe(32)
    session.add(ApiToken(user_id=user.id, name=name[:100], token_hash=sha256_hex(token)))
    await session.flush()
    log.info("console_api_token_created", user_id=str(user.id))
    return token


async def active_api_tokens(session: AsyncSession, *, user_id: uuid.UUID) -> int:
    """How many unrevoked API tokens the user has."""
    query = (
        select(func.count())
        .select_from(ApiToken)
        .where(ApiToken.user_id == user_id, col(ApiToken.revoked_at).is_(None))
    )
    return int((await session.exec(query)).one())


async def revoke_api_tokens(session: AsyncSession, *, user_id: uuid.UUID) -> int:
    """Revoke every unrevoked API token of the user (caller's transaction); returns how many."""
    result = await session.execute(
        update(ApiToken)
        .where(col(ApiToken.user_id) == user_id, col(ApiToken.revoked_at).is_(None))
        .values(revoked_at=utcnow())
    )
    count = int(getattr(result, "rowcount", 0) or 0)
    log.info("console_api_tokens_revoked", user_id=str(user_id), count=count)
    return count


async def user_for_api_token(session: AsyncSession, token: str) -> ConsoleUser | None:
    """The active user owning the unrevoked API ``token``, or ``None``; marks it used."""
    if not token.startswith(API_TOKEN_PREFIX):
        return None
    row = (
        await session.exec(
            select(ApiToken, ConsoleUser)
            .join(ConsoleUser, col(ConsoleUser.id) == col(ApiToken.user_id))
            .where(ApiToken.token_hash == sha256_hex(token), col(ApiToken.revoked_at).is_(None))
        )
    ).first()
    if row is None or not row[1].is_active:
        return None
    api_token, user = row
    api_token.last_used_at = utcnow()
    session.add(api_token)
    return user


API_KEY_PREFIX = "sbk_"
"""Tenant API keys start with this."""

API_SCOPES: dict[str, str] = {
    "conversations:read": N_("List and read conversations and their messages"),
    "conversations:write": N_("Assign, hand back, close and reopen conversations; keep private notes"),
    "messages:write": N_("Send messages and start conversations"),
    "customers:read": N_("Read customers and export one's data"),
    "customers:write": N_("Update customers' names and attributes; erase a customer"),
    "knowledge:read": N_("List and search knowledge documents"),
    "knowledge:write": N_("Upload, delete and re-index knowledge documents"),
    "leads:read": N_("List leads"),
    "webhooks:manage": N_("List, create and delete event webhook endpoints"),
    "feedback:write": N_("Rate the assistant's answers"),
}
"""Every scope a tenant API key may carry → what it allows, in words (the console, the CLI, the docs)."""

_SHOWN_CHARS = 12
"""How much of a key lists show: ``sbk_`` and 8 random characters."""
_TOUCH_EVERY_S = 60
"""``last_used_at`` is written at most this often per key (not one write per request)."""


class UnknownScope(ValueError):
    """A scope not in :data:`API_SCOPES` (``scope``: the unknown one)."""

    def __init__(self, scope: str) -> None:
        self.scope = scope
        super().__init__(f"unknown scope {scope!r}; known: {', '.join(API_SCOPES)}")


class CredentialNotFound(LookupError):
    """No API key or user token with that id in the tenant."""


@dataclass(frozen=True)
class Credential:
    """One API credential of a tenant, as lists show it (never the secret itself)."""

    id: uuid.UUID
    kind: str
    """``key`` (a tenant API key) or ``user_token`` (a console user's token, acting as that user)."""
    name: str
    prefix: str
    scopes: list[str]
    """The key's scopes; a user token's is ``["role:<role>"]`` (it has the user's rights)."""
    created_by: str | None
    """E-mail of the user who created it (for a user token: its user), if known."""
    created_at: datetime
    expires_at: datetime | None
    last_used_at: datetime | None
    revoked_at: datetime | None

    @property
    def active(self) -> bool:
        """Neither revoked nor expired."""
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > utcnow())


async def create_tenant_key(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    scopes: list[str],
    name: str = "",
    created_by: ConsoleUser | None = None,
    expires_at: datetime | None = None,
) -> tuple[str, TenantApiKey]:
    """A new tenant API key (``sbk_...``) and its row (flushed, not committed); the key is returned once.

    Raises :class:`UnknownScope` for a scope not in :data:`API_SCOPES`, ``ValueError`` for no scope
    or an expiry in the past.
    """
    for scope in scopes:
        if scope not in API_SCOPES:
            raise UnknownScope(scope)
    if not scopes:
        raise ValueError("a key needs at least one scope")
    if expires_at is not None and expires_at <= utcnow():
        raise ValueError("the expiry must be in the future")
    token = API_KEY_PREFIX + secrets.token_urlsafe(32)
    row = TenantApiKey(
        tenant_id=tenant_id,
        name=name.strip()[:100],
        prefix=token[:_SHOWN_CHARS],
        token_hash=sha256_hex(token),
        scopes=sorted(set(scopes)),
        created_by_id=created_by.id if created_by else None,
        expires_at=expires_at,
    )
    session.add(row)
    await session.flush()
    log.info("tenant_api_key_created", tenant_id=str(tenant_id), key_id=str(row.id), scopes=row.scopes)
    return token, row


async def key_for_token(session: AsyncSession, token: str) -> TenantApiKey | None:
    """The unrevoked, unexpired tenant API key ``token``, or ``None``; notes when it was used (at most
    once a minute, in ``session``: the caller commits)."""
    if not token.startswith(API_KEY_PREFIX):
        return None
    row = (
        await session.exec(
            select(TenantApiKey).where(
                TenantApiKey.token_hash == sha256_hex(token), col(TenantApiKey.revoked_at).is_(None)
            )
        )
    ).first()
    now = utcnow()
    if row is None or (row.expires_at is not None and row.expires_at <= now):
        return None
    if row.last_used_at is None or (now - row.last_used_at).total_seconds() >= _TOUCH_EVERY_S:
        row.last_used_at = now
        session.add(row)
    return row


async def list_credentials(session: AsyncSession, *, tenant_id: uuid.UUID) -> list[Credential]:
    """The tenant's API keys and its users' API tokens, revoked ones too, newest first."""
    creator = ConsoleUser.__table__.alias("creator")  # type: ignore[attr-defined]
    keys = (
        await session.exec(
            select(TenantApiKey, creator.c.email)
            .outerjoin(creator, creator.c.id == col(TenantApiKey.created_by_id))
            .where(TenantApiKey.tenant_id == tenant_id)
        )
    ).all()
    tokens = (
        await session.exec(
            select(ApiToken, ConsoleUser)
            .join(ConsoleUser, col(ConsoleUser.id) == col(ApiToken.user_id))
            .where(ConsoleUser.tenant_id == tenant_id)
        )
    ).all()
    found = [
        Credential(
            id=key.id,
            kind="key",
            name=key.name,
            prefix=key.prefix,
            scopes=list(key.scopes),
            created_by=email,
            created_at=key.created_at,
            expires_at=key.expires_at,
            last_used_at=key.last_used_at,
            revoked_at=key.revoked_at,
        )
        for key, email in keys
    ] + [
        Credential(
            id=token.id,
            kind="user_token",
            name=token.name,
            prefix=API_TOKEN_PREFIX,
            scopes=[f"role:{user.role}"],
            created_by=user.email,
            created_at=token.created_at,
            expires_at=None,
            last_used_at=token.last_used_at,
            revoked_at=token.revoked_at,
        )
        for token, user in tokens
    ]
    return sorted(found, key=lambda c: (c.created_at, c.id), reverse=True)


async def revoke_credential(session: AsyncSession, *, tenant_id: uuid.UUID, credential_id: uuid.UUID) -> str:
    """Revoke the tenant's API key or user token ``credential_id`` at once (caller commits); returns its
    kind (``key`` or ``user_token``). Revoking a revoked one changes nothing. Raises
    :class:`CredentialNotFound` when the tenant has none with that id."""
    key = (
        await session.exec(
            select(TenantApiKey).where(TenantApiKey.id == credential_id, TenantApiKey.tenant_id == tenant_id)
        )
    ).first()
    if key is not None:
        if key.revoked_at is None:
            key.revoked_at = utcnow()
            session.add(key)
        log.info("tenant_api_key_revoked", tenant_id=str(tenant_id), key_id=str(credential_id))
        return "key"
    token = (
        await session.exec(
            select(ApiToken)
            .join(ConsoleUser, col(ConsoleUser.id) == col(ApiToken.user_id))
            .where(ApiToken.id == credential_id, ConsoleUser.tenant_id == tenant_id)
        )
    ).first()
    if token is None:
        raise CredentialNotFound(str(credential_id))
    if token.revoked_at is None:
        token.revoked_at = utcnow()
        session.add(token)
    log.info("console_api_token_revoked", tenant_id=str(tenant_id), token_id=str(credential_id))
    return "user_token"
