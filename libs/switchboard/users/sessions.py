"""Console sessions: server-side, in Postgres (``console_sessions``), with a CSRF token each.

The browser holds a random 256-bit token in an HTTP-only ``SameSite=Lax`` cookie
(:data:`SESSION_COOKIE`), the table only its SHA-256. Each session has a CSRF token that every form
(hidden ``csrf_token`` field) and htmx request (``X-CSRF-Token`` header) sends back.
"""

from __future__ import annotations

import hmac
import secrets
import uuid
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import delete, func
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import ConsoleSession, ConsoleUser, utcnow
from switchboard.observability import get_logger
from switchboard.users.accounts import sha256_hex

__all__ = [
    "SESSION_COOKIE",
    "CSRF_HEADER",
    "CSRF_FIELD",
    "SessionInfo",
    "start_session",
    "load_session",
    "end_session",
    "csrf_matches",
]

log = get_logger(__name__)

SESSION_COOKIE = "sb_console"
"""Name of the session cookie (HTTP-only, ``SameSite=Lax``, ``Secure`` with ``CONSOLE_COOKIE_SECURE``)."""
CSRF_HEADER = "X-CSRF-Token"
"""Header htmx requests carry the session's CSRF token in (set once on ``<body hx-headers=...>``)."""
CSRF_FIELD = "csrf_token"
"""Hidden form field carrying the session's CSRF token."""


@dataclass(frozen=True)
class SessionInfo:
    """A logged-in browser: who, the session row's id and its CSRF token."""

    user: ConsoleUser
    session_id: uuid.UUID
    csrf_token: str


async def start_session(session: AsyncSession, *, user: ConsoleUser, ttl_s: int) -> tuple[str, SessionInfo]:
    """A new server-side session for ``user`` (caller's transaction); returns ``(cookie token, info)``."""
    token = secrets.token_urlsafe(32)
    now = utcnow()
    row = ConsoleSession(
        token_hash=sha256_hex(token),
        user_id=user.id,
        csrf_token=secrets.token_urlsafe(32),
        created_at=now,
        last_seen_at=now,
        expires_at=now + timedelta(seconds=ttl_s),
    )
    session.add(row)
    # expired sessions of anyone go as new ones come (no sweeper needed)
    await session.execute(delete(ConsoleSession).where(col(ConsoleSession.expires_at) < now))
    await session.flush()
    log.info("console_login", user_id=str(user.id), role=user.role)
    return token, SessionInfo(user=user, session_id=row.id, csrf_token=row.csrf_token)


async def load_session(session: AsyncSession, token: str | None) -> SessionInfo | None:
    """The live session of the cookie ``token`` with its active user, or ``None`` (unknown, expired,
    user deactivated)."""
    if not token:
        return None
    row = (
        await session.exec(
            select(ConsoleSession, ConsoleUser)
            .join(ConsoleUser, col(ConsoleUser.id) == col(ConsoleSession.user_id))
            .where(
                ConsoleSession.token_hash == sha256_hex(token), col(ConsoleSession.expires_at) > func.now()
            )
        )
    ).first()
    if row is None:
        return None
    console_session, user = row
    if not user.is_active:
        return None
    return SessionInfo(user=user, session_id=console_session.id, csrf_token=console_session.csrf_token)


async def end_session(session: AsyncSession, token: str | None) -> None:
    """Log out: delete the session of the cookie ``token`` (caller's transaction); nothing if unknown."""
    if token:
        await session.execute(
            delete(ConsoleSession).where(col(ConsoleSession.token_hash) == sha256_hex(token))
        )


def csrf_matches(expected: str, given: str | None) -> bool:
    """Constant-time comparison of a CSRF token."""
    return bool(given) and hmac.compare_digest(expected.encode(), str(given).encode())
