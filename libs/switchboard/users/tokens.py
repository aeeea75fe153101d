"""Per-user API tokens (``sbu_...``): a bearer for the admin API, acting with the user's role and tenant.

Returned once when created; the database keeps only their SHA-256.
"""

from __future__ import annotations

import secrets
import uuid

from sqlalchemy import func, update
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import ApiToken, ConsoleUser, utcnow
from switchboard.observability import get_logger
from switchboard.users.accounts import sha256_hex

__all__ = [
    "API_TOKEN_PREFIX",
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
