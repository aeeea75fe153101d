"""Console users, passwords, server-side sessions, per-user API tokens and the login rate limit.

* Roles (:class:`~switchboard.db.models.Role`): ``platform_admin`` (every tenant, no tenant of their
  own), ``tenant_admin`` (everything of one tenant), ``agent`` (the inbox of one tenant).
* Passwords: argon2id through pwdlib (``PasswordHash.recommended()``); hashes that pwdlib says are
  outdated are re-hashed at the next successful login.
* Sessions live in Postgres (``console_sessions``); the browser holds a random 256-bit token in an
  HTTP-only ``SameSite=Lax`` cookie (:data:`SESSION_COOKIE`), the table only its SHA-256. Each session
  has a CSRF token that every form (hidden ``csrf_token`` field) and htmx request (``X-CSRF-Token``
  header) sends back.
* Login rate limit (:class:`LoginLimiter`): attempts are counted in Redis per e-mail (before the
  password is checked) and failures per client address over a window; past the limit the login is
  refused with the wait in the message, unchecked. A busy address never refuses an account that is
  not itself under attack.
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
from sqlalchemy import delete, func, update
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import ApiToken, ConsoleSession, ConsoleUser, Role, utcnow
from switchboard.errors import SwitchboardError
from switchboard.observability import get_logger
from switchboard.password_policy import MIN_PASSWORD_CHARS, WeakPassword, check_password

__all__ = [
    "ROLES",
    "Role",
    "SESSION_COOKIE",
    "CSRF_HEADER",
    "CSRF_FIELD",
    "API_TOKEN_PREFIX",
    "MIN_PASSWORD_CHARS",
    "WeakPassword",
    "UserExists",
    "UserNotFound",
    "LoginRefused",
    "LoginLimiter",
    "FLAGGED_ADDRESS_ATTEMPTS",
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
    "active_api_tokens",
    "revoke_api_tokens",
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

FLAGGED_ADDRESS_ATTEMPTS = 2
"""Attempts per e-mail and window still checked from an address past its failure limit (a typo and
its retry); further attempts on that e-mail from that address are refused unchecked."""

_hasher = PasswordHash.recommended()


@functools.cache
def _dummy_hash() -> str:
    """Verified against when the e-mail is unknown, so a wrong e-mail takes as long as a wrong password.
    Made on the first such login, not at import: one Argon2 hash is ~0.3-0.9 s of CPU in every
    process that imports this module (the orchestrator and the console start-up)."""
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
        WeakPassword: the password breaks :func:`~switchboard.password_policy.check_password`.
        ValueError: bad e-mail, unknown role, or a tenant given to a platform admin /
            missing for another role.
    """
    role = Role(role)
    address = normalize_email(email)
    check_password(password, email=address)
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

    The user's API tokens stay valid: :func:`revoke_api_tokens` ends them.

    Raises:
        UserNotFound: no such user.
        WeakPassword: the password breaks :func:`~switchboard.password_policy.check_password`.
    """
    user = await find_user(session, email)
    if user is None:
        raise UserNotFound(f"no console user with e-mail {email.strip().lower()}")
    check_password(password, email=user.email)
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
    """Login attempts per e-mail and failures per client address in Redis, over a fixed window.

    * Per e-mail (``max_attempts``): every attempt is counted atomically (``INCR`` in a transaction
      with the window's ``EXPIRE``) BEFORE its password is checked, so concurrent guesses cannot all
      be checked: of any number sent at once, at most ``max_attempts`` reach the password check. A
      correct password clears the count.
    * Per address (``max_attempts_per_ip``): failures only. An address past its limit does not refuse
      everyone behind it (a proxy, an office): from it, an e-mail with no attempt in the window still
      gets its password checked, but one that already has attempts in the window (an account under attack)
      is refused once it has :data:`FLAGGED_ADDRESS_ATTEMPTS` attempts (a typo and a retry still
      pass). A flood from one address therefore never locks out other users, while spraying guesses
      across accounts from it gets that many guesses per account per window.

    The address is ``request.client.host`` after the trusted-proxy rewrite
    (:func:`switchboard.console.app.install_console`, setting ``forwarded_allow_ips``).

    Args:
        redis: any redis-py asyncio client (the service's ARQ pool).
        max_attempts: attempts allowed per e-mail in the window; more are refused unchecked.
        max_attempts_per_ip: failures per client address after which that address's attempts on
            accounts under attack are refused (several people may share one address).
        window_s: how long a key counts (seconds) from its first count.
    """

    def __init__(self, redis: Redis, *, max_attempts: int, max_attempts_per_ip: int, window_s: int) -> None:
        self.redis = redis
        self.max_attempts = max_attempts
        self.max_attempts_per_ip = max_attempts_per_ip
        self.window_s = window_s

    @staticmethod
    def _email_key(email: str) -> str:
        return f"console:login:email:{_sha256(email.strip().lower())}"

    @staticmethod
    def _ip_key(ip: str) -> str:
        return f"console:login:ip:{ip or 'unknown'}"

    async def _count(self, key: str) -> tuple[int, int]:
        """``INCR`` the key, starting its window when new; ``(count, ttl_s)`` in one transaction."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.set(key, 0, ex=self.window_s, nx=True)
            pipe.incr(key)
            pipe.ttl(key)
            _created, count, ttl = await pipe.execute()
        return int(count), int(ttl)

    async def attempt(self, *, email: str, ip: str) -> None:
        """Count this attempt for ``email`` before its password is checked.

        Raises:
            LoginRefused: the e-mail is past ``max_attempts`` in the window, or the address is past
                ``max_attempts_per_ip`` failures and the e-mail is past :data:`FLAGGED_ADDRESS_ATTEMPTS`.
        """
        ip_failures = int(await self.redis.get(self._ip_key(ip)) or 0)
        address_flagged = ip_failures >= self.max_attempts_per_ip
        count, ttl = await self._count(self._email_key(email))
        limit = min(FLAGGED_ADDRESS_ATTEMPTS, self.max_attempts) if address_flagged else self.max_attempts
        if count > limit:
            if address_flagged and count <= self.max_attempts:
                # refused for the address's sake: wait as long as the address's window lasts
                ttl = int(await self.redis.ttl(self._ip_key(ip)))
            log.warning(
                "console_login_rate_limited",
                key_kind="ip" if address_flagged and count <= self.max_attempts else "email",
                attempts=count,
                ip_failures=ip_failures,
            )
            raise LoginRefused(ttl if ttl > 0 else self.window_s)

    async def failed(self, *, ip: str) -> None:
        """Count one failure on the client address (the e-mail's attempt was counted already)."""
        await self._count(self._ip_key(ip))

    async def succeeded(self, *, email: str) -> None:
        """A correct login clears the e-mail's count (the address's stays: one address guessing many
        accounts)."""
        await self.redis.delete(self._email_key(email))
