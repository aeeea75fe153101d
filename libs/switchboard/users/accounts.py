"""Console users: roles, argon2 passwords, creating users, signing in, who may see which tenant.

* Roles (:class:`~switchboard.db.models.Role`): ``platform_admin`` (every tenant, no tenant of their
  own), ``tenant_admin`` (everything of one tenant), ``agent`` (the inbox of one tenant).
* Passwords: argon2id through pwdlib (``PasswordHash.recommended()``); hashes that pwdlib says are
  outdated are re-hashed at the next successful login.
"""

from __future__ import annotations

import functools
import hashlib
import secrets
import uuid

from pwdlib import PasswordHash
from sqlalchemy import delete
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import ConsoleSession, ConsoleUser, Role, utcnow
from switchboard.errors import SwitchboardError
from switchboard.i18n import N_
from switchboard.observability import get_logger
from switchboard.password_policy import check_password

__all__ = [
    "ROLES",
    "UserExists",
    "UserNotFound",
    "hash_password",
    "verify_password",
    "normalize_email",
    "generate_password",
    "create_user",
    "find_user",
    "set_password",
    "list_users",
    "authenticate",
    "may_access_tenant",
    "sha256_hex",
]

log = get_logger(__name__)

ROLES = tuple(role.value for role in Role)

ROLE_WORDS = {
    Role.platform_admin.value: N_("Platform admin"),
    Role.tenant_admin.value: N_("Admin"),
    Role.agent.value: N_("Agent"),
}
"""How each role is named to people (gettext ids: the console's templates translate them)."""

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


def sha256_hex(value: str) -> str:
    """SHA-256 hex of ``value``: what the database keeps of a session, API token or invite token."""
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

    The user's API tokens stay valid: :func:`~switchboard.users.tokens.revoke_api_tokens` ends them.

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


def may_access_tenant(user: ConsoleUser, tenant_id: uuid.UUID) -> bool:
    """Platform admins see every tenant; everyone else only their own."""
    return user.role == Role.platform_admin.value or user.tenant_id == tenant_id
