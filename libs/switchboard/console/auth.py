"""Console users, passwords, server-side sessions, per-user API tokens and the login rate limit.

* Roles (:class:`~switchboard.db.models.Role`): ``platform_admin`` (every tenant, no tenant of their
  own), ``tenant_admin`` (everything of one tenant), ``agent`` (the inbox of one tenant).
* Passwords: argon2id through pwdlib (``PasswordHash.recommended()``); hashes that pwdlib says are
  outdated are re-hashed at the next successful login.
* Sessions live in Postgres (``console_sessions``); the browser holds a random 256-bit token in an
  HTTP-only ``SameSite=Lax`` cookie (:data:`SESSION_COOKIE`), the table only its SHA-256. Each session
  has a CSRF token that every form (hidden ``csrf_token`` field) and htmx request (``X-CSRF-Token``
  header) sends back.
* Login rate limit (:class:`LoginLimiter`): failed attempts are counted in Redis per e-mail and per
  client IP over a window; past the limit the login is refused with the wait in the message, before
  the password is even checked.
* API tokens (``sbu_...``): a per-user bearer for the admin API, with the user's role and tenant.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
import uuid
from dataclasses import dataclass
from datetime import timedelta

from pwdlib import PasswordHash
from redis.asyncio import Redis
from sqlalchemy import delete, func
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import ApiToken, ConsoleSession, ConsoleUser, Role, utcnow
from switchboard.errors import SwitchboardError
from switchboard.observability import get_logger

__all__ = [
    "ROLES",
    "Role",
    "SESSION_COOKIE",
    "CSRF_HEADER",
    "CSRF_FIELD",
    "API_TOKEN_PREFIX",
    "MIN_PASSWORD_CHARS",
    "UserExists",
    "UserNotFound",
    "LoginRefused",
    "LoginLimiter",
    "SessionInfo",
    "hash_password",
    "verify_password",
    "normalize_email",
    "create_user",
    "set_password",
    "find_user",
    "list_users",
    "authenticate",
    "start_session",
    "load_session",
    "end_session",
    "create_api_token",
    "user_for_api_token",
    "may_access_tenant",
    "csrf_matches",
    "generate_password",
]

log = get_logger(__name__)

ROLES = tuple(role.value for role in Role)
SESSION_COOKIE = "sb_console"
"""Name of the session cookie (HTTP-only, ``SameSite=Lax``, ``Secure`` with ``CONSOLE_COOKIE_SECURE``)."""
CSRF_HEADER = "X-CSRF-Token"
"""Header htmx requests carry the session's CSRF token in (set once on ``<body hx-headers=...>``)."""
CSRF_FIELD = "csrf_token"
"""Hidden form field carrying the session's CSRF token."""
API_TOKEN_PREFIX = "sbu_"
"""Per-user API tokens start with this (tells them apart from ``ADMIN_TOKEN`` in logs and errors)."""
MIN_PASSWORD_CHARS = 10
"""Shortest password accepted (NIST SP 800-63B asks for at least 8; we ask a little more)."""

_hasher = PasswordHash.recommended()


@functools.cache
def _dummy_hash() -> str:
    """Verified against when the e-mail is unknown, so a wrong e-mail takes as long as a wrong password.
    Made on the first such login, not at import: one Argon2 hash is ~0.3-0.9 s of CPU in every
    process that imports this module (the orchestrator and the console start-up, issue 17)."""
    return _hasher.hash("switchboard-dummy-password")


class UserExists(SwitchboardError):
    """A console user with that e-mail exists already (e-mails are unique across the platform)."""


class UserNotFound(SwitchboardError):
    """No console user with that e-mail (or id)."""


class LoginRefused(SwitchboardError):
    """Too many failed logins for this e-mail or from this address; ``retry_after_s`` says how long to wait."""

    def __init__(self, retry_after_s: int) -> None:
        self.retry_after_s = retry_after_s
        minutes = max(1, round(retry_after_s / 60))
        super().__init__(
            f"Too many failed sign-in attempts. Wait about {minutes} minute{'s' if minutes != 1 else ''} "
            "and try again."
        )


def _sha256(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def hash_password(password: str) -> str:
    """An argon2id hash of ``password`` (pwdlib's recommended parameters)."""
    return _hasher.hash(password)


def verify_password(password: str, password_hash: str) -> tuple[bool, str | None]:
    """``(matches, new_hash)``: ``new_hash`` is set when the stored hash should be upgraded."""
    return _hasher.verify_and_update(password, password_hash)


def normalize_email(email: str) -> str:
    """Trimmed and lower-cased (logins are case-insensitive).

    Raises:
        ValueError: not something@something.
    """
    value = email.strip().lower()
    local, _, domain = value.partition("@")
    if not local or not domain or " " in value:
        raise ValueError(f"not an e-mail address: {email!r}")
    return value


def generate_password() -> str:
    """A random password for a new user (16 URL-safe characters, about 96 bits)."""
    return secrets.token_urlsafe(12)


def _check_password(password: str) -> None:
    if len(password) < MIN_PASSWORD_CHARS:
        raise ValueError(f"the password needs at least {MIN_PASSWORD_CHARS} characters")


async def create_user(
    session: AsyncSession,
    *,
    email: str,
    password: str,
    role: Role | str,
    tenant_id: uuid.UUID | None,
    name: str = "",
) -> ConsoleUser:
    """Add a console user in the caller's transaction.

    Args:
        role: ``platform_admin`` (``tenant_id`` must be ``None``), ``tenant_admin`` or ``agent``.

    Raises:
        UserExists: the e-mail is taken.
        ValueError: bad e-mail, short password, unknown role, or a tenant given to a platform admin /
            missing for another role.
    """
    role = Role(role)
    address = normalize_email(email)
    _check_password(password)
    if (role == Role.platform_admin) != (tenant_id is None):
        raise ValueError(
            "a platform admin has no tenant"
            if tenant_id
            else f"a {role.value} belongs to a tenant: give --tenant"
        )
    if await find_user(session, address) is not None:
        raise UserExists(f"a console user with e-mail {address} exists already")
    user = ConsoleUser(
        tenant_id=tenant_id,
        email=address,
        name=name.strip(),
        role=role.value,
        password_hash=hash_password(password),
    )
    session.add(user)
    await session.flush()
    log.info(
        "console_user_created",
        user_id=str(user.id),
        role=role.value,
        tenant_id=str(tenant_id) if tenant_id else None,
    )
    return user


async def find_user(session: AsyncSession, email: str) -> ConsoleUser | None:
    """The user with that e-mail (any case), or ``None``."""
    return (await session.exec(select(ConsoleUser).where(ConsoleUser.email == email.strip().lower()))).first()


async def set_password(session: AsyncSession, *, email: str, password: str) -> ConsoleUser:
    """Change a user's password and end all their sessions (in the caller's transaction).

    Raises:
        UserNotFound: no such user.
        ValueError: the password is too short.
    """
    _check_password(password)
    user = await find_user(session, email)
    if user is None:
        raise UserNotFound(f"no console user with e-mail {email.strip().lower()}")
    user.password_hash = hash_password(password)
    user.updated_at = utcnow()
    session.add(user)
    await session.execute(delete(ConsoleSession).where(col(ConsoleSession.user_id) == user.id))
    log.info("console_password_changed", user_id=str(user.id))
    return user


async def list_users(session: AsyncSession, *, tenant_id: uuid.UUID | None = None) -> list[ConsoleUser]:
    """Users of one tenant (``tenant_id``), or every user, ordered by e-mail."""
    query = select(ConsoleUser).order_by(col(ConsoleUser.email))
    if tenant_id is not None:
        query = query.where(ConsoleUser.tenant_id == tenant_id)
    return list((await session.exec(query)).all())


async def authenticate(session: AsyncSession, *, email: str, password: str) -> ConsoleUser | None:
    """The active user whose e-mail and password match, or ``None`` (same work either way).

    Upgrades an outdated hash and sets ``last_login_at`` in the caller's transaction.
    """
    try:
        address = normalize_email(email)
    except ValueError:
        address = ""
    user = await find_user(session, address) if address else None
    ok, new_hash = verify_password(password, user.password_hash if user else _dummy_hash())
    if user is None or not ok or not user.is_active:
        return None
    if new_hash:
        user.password_hash = new_hash
    user.last_login_at = utcnow()
    session.add(user)
    return user


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
        token_hash=_sha256(token),
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
            .where(ConsoleSession.token_hash == _sha256(token), col(ConsoleSession.expires_at) > func.now())
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
        await session.execute(delete(ConsoleSession).where(col(ConsoleSession.token_hash) == _sha256(token)))


async def create_api_token(session: AsyncSession, *, user: ConsoleUser, name: str = "") -> str:
    """A new per-user admin API token (``sbu_...``), returned once; only its SHA-256 is stored."""
    token = API_TOKEN_PREFIX + secrets.token_urlsafe(32)
    session.add(ApiToken(user_id=user.id, name=name[:100], token_hash=_sha256(token)))
    await session.flush()
    log.info("console_api_token_created", user_id=str(user.id))
    return token


async def user_for_api_token(session: AsyncSession, token: str) -> ConsoleUser | None:
    """The active user owning the unrevoked API ``token``, or ``None``; marks it used."""
    if not token.startswith(API_TOKEN_PREFIX):
        return None
    row = (
        await session.exec(
            select(ApiToken, ConsoleUser)
            .join(ConsoleUser, col(ConsoleUser.id) == col(ApiToken.user_id))
            .where(ApiToken.token_hash == _sha256(token), col(ApiToken.revoked_at).is_(None))
        )
    ).first()
    if row is None or not row[1].is_active:
        return None
    api_token, user = row
    api_token.last_used_at = utcnow()
    session.add(api_token)
    return user


def may_access_tenant(user: ConsoleUser, tenant_id: uuid.UUID) -> bool:
    """Platform admins see every tenant; everyone else only their own."""
    return user.role == Role.platform_admin.value or user.tenant_id == tenant_id


def csrf_matches(expected: str, given: str | None) -> bool:
    """Constant-time comparison of a CSRF token."""
    return bool(given) and hmac.compare_digest(expected.encode(), str(given).encode())


class LoginLimiter:
    """Failed logins per e-mail and per client IP in Redis (``INCR`` + ``EXPIRE``), over a fixed window.

    Args:
        redis: any redis-py asyncio client (the service's ARQ pool).
        max_attempts: failures allowed per e-mail in the window; the next attempt is refused.
        max_attempts_per_ip: failures allowed per client IP (several people may share one address).
        window_s: how long a key counts (seconds) from its first failure.
    """

    def __init__(self, redis: Redis, *, max_attempts: int, max_attempts_per_ip: int, window_s: int) -> None:
        self.redis = redis
        self.max_attempts = max_attempts
        self.max_attempts_per_ip = max_attempts_per_ip
        self.window_s = window_s

    def _keys(self, email: str, ip: str) -> list[str]:
        return [
            f"console:login:email:{_sha256(email.strip().lower())}",
            f"console:login:ip:{ip or 'unknown'}",
        ]

    async def check(self, *, email: str, ip: str) -> None:
        """Raises :class:`LoginRefused` when either key is at the limit."""
        for key, limit in zip(
            self._keys(email, ip), (self.max_attempts, self.max_attempts_per_ip), strict=True
        ):
            count = int(await self.redis.get(key) or 0)
            if count >= limit:
                ttl = int(await self.redis.ttl(key))
                log.warning("console_login_rate_limited", key_kind=key.split(":")[2], attempts=count)
                raise LoginRefused(ttl if ttl > 0 else self.window_s)

    async def failed(self, *, email: str, ip: str) -> None:
        """Count one failure on both keys (the window starts at the first)."""
        for key in self._keys(email, ip):
            count = await self.redis.incr(key)
            if count == 1:
                await self.redis.expire(key, self.window_s)

    async def succeeded(self, *, email: str) -> None:
        """A correct login clears the e-mail's count (the IP's stays: one address guessing many accounts)."""
        await self.redis.delete(self._keys(email, "")[0])
