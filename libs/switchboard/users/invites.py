"""Invitations to a tenant's console, and turning people's accounts off and on again.

An invitation is a link with a random 256-bit token (:func:`invite_path`); the table keeps only its
SHA-256. It works until it expires (setting ``console_invite_ttl_s``, 72 hours), once, and not after it
was withdrawn or replaced by a newer link (:func:`resend_invite`). Opening it lets the person choose a
password (the password policy applies) and creates their account (:func:`accept_invite`).
"""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

from sqlalchemy import delete, update
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import ConsoleInvite, ConsoleSession, ConsoleUser, Role, utcnow
from switchboard.errors import SwitchboardError
from switchboard.i18n import N_, gettext
from switchboard.observability import get_logger
from switchboard.password_policy import check_password
from switchboard.users.accounts import (
    UserExists,
    UserNotFound,
    create_user,
    find_user,
    normalize_email,
    sha256_hex,
)

__all__ = [
    "INVITABLE_ROLES",
    "INVITE_PATH_PREFIX",
    "InviteProblem",
    "InviteRefused",
    "InviteNotFound",
    "IssuedInvite",
    "create_invite",
    "resend_invite",
    "revoke_invite",
    "pending_invites",
    "invite_for_token",
    "accept_invite",
    "invite_path",
    "set_user_active",
    "CannotDeactivateSelf",
]

log = get_logger(__name__)

INVITABLE_ROLES: tuple[Role, ...] = (Role.tenant_admin, Role.agent)
"""Roles a tenant's invitation can give (platform admins are added from the command line)."""
INVITE_PATH_PREFIX = "/invite/"
"""Invitation links are ``<console address>/invite/<token>``."""


class InviteProblem(StrEnum):
    """Why an invitation link does not work (:class:`InviteRefused`)."""

    unknown = "unknown"  # no invitation has this token (mistyped, or never made)
    expired = "expired"  # past ``expires_at``
    used = "used"  # accepted already: the link works once
    revoked = "revoked"  # withdrawn, or replaced by a newer link


_PROBLEM_TEXT = {
    InviteProblem.unknown: N_(
        "This invitation link is not valid. Check that you copied all of it, or ask for a new one."
    ),
    InviteProblem.expired: N_(
        "This invitation link has expired. Ask the person who invited you for a new one."
    ),
    InviteProblem.used: N_("This invitation link was used already. Sign in with the password you chose."),
    InviteProblem.revoked: N_(
        "This invitation link no longer works: it was withdrawn or a newer one was sent. Use the newest "
        "link, or ask for a new one."
    ),
}


class InviteRefused(SwitchboardError):
    """The invitation link does not work; ``problem`` says why, the message says so in plain words."""

    def __init__(self, problem: InviteProblem) -> None:
        self.problem = problem
        super().__init__(_PROBLEM_TEXT[problem])

    def text(self, language: str) -> str:
        """Why, in ``language`` (``en`` / ``es``)."""
        return gettext(language, _PROBLEM_TEXT[self.problem])


class InviteNotFound(SwitchboardError):
    """No invitation with that id in this tenant."""


class CannotDeactivateSelf(SwitchboardError):
    """A person cannot turn off their own account (they would lock themselves out)."""


@dataclass(frozen=True)
class IssuedInvite:
    """A new invitation and its token (returned once; only its SHA-256 is stored)."""

    invite: ConsoleInvite
    token: str

    @property
    def path(self) -> str:
        return invite_path(self.token)


def invite_path(token: str) -> str:
    """``/invite/<token>``: the path of an invitation link on the console."""
    return INVITE_PATH_PREFIX + token


async def create_invite(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    email: str,
    role: Role | str,
    ttl_s: int,
    name: str = "",
    invited_by_id: uuid.UUID | None = None,
) -> IssuedInvite:
    """Invite ``email`` to the tenant's console with ``role`` (caller's transaction). An earlier open
    invitation of the same e-mail to this tenant stops working.

    Args:
        ttl_s: how long the link works, in seconds.

    Raises:
        ValueError: not an e-mail address, or a role other than ``tenant_admin`` / ``agent``.
        UserExists: somebody signs in with that e-mail already.
    """
    address = normalize_email(email)
    try:
        chosen = Role(role)
    except ValueError:
        raise ValueError(f"unknown role {role!r}") from None
    if chosen not in INVITABLE_ROLES:
        raise ValueError(f"a {chosen.value} cannot be invited to a tenant")
    if await find_user(session, address) is not None:
        raise UserExists(f"somebody signs in as {address} already")
    now = utcnow()
    await session.execute(
        update(ConsoleInvite)
        .where(
            col(ConsoleInvite.tenant_id) == tenant_id,
            col(ConsoleInvite.email) == address,
            col(ConsoleInvite.accepted_at).is_(None),
            col(ConsoleInvite.revoked_at).is_(None),
        )
        .values(revoked_at=now)
    )
    token = secrets.token_urlsafe(32)
    invite = ConsoleInvite(
        tenant_id=tenant_id,
        email=address,
        name=name.strip()[:200],
        role=chosen.value,
        token_hash=sha256_hex(token),
        invited_by_id=invited_by_id,
        created_at=now,
        expires_at=now + timedelta(seconds=ttl_s),
    )
    session.add(invite)
    await session.flush()
    log.info("console_invite_created", invite_id=str(invite.id), tenant_id=str(tenant_id), role=chosen.value)
    return IssuedInvite(invite=invite, token=token)


async def _tenant_invite(
    session: AsyncSession, *, tenant_id: uuid.UUID, invite_id: uuid.UUID
) -> ConsoleInvite:
    invite = await session.get(ConsoleInvite, invite_id)
    if invite is None or invite.tenant_id != tenant_id:
        raise InviteNotFound(f"no invitation {invite_id}")
    return invite


async def resend_invite(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    invite_id: uuid.UUID,
    ttl_s: int,
    invited_by_id: uuid.UUID | None = None,
) -> IssuedInvite:
    """A new link for an invitation not yet accepted (same e-mail, name and role, a new expiry); the
    old link stops working at once.

    Raises:
        InviteNotFound: no such invitation in this tenant.
        InviteRefused: it was accepted already (``used``).
        UserExists: somebody signs in with that e-mail already.
    """
    old = await _tenant_invite(session, tenant_id=tenant_id, invite_id=invite_id)
    if old.accepted_at is not None:
        raise InviteRefused(InviteProblem.used)
    return await create_invite(
        session,
        tenant_id=tenant_id,
        email=old.email,
        role=old.role,
        ttl_s=ttl_s,
        name=old.name,
        invited_by_id=invited_by_id,
    )


async def revoke_invite(
    session: AsyncSession, *, tenant_id: uuid.UUID, invite_id: uuid.UUID
) -> ConsoleInvite:
    """Withdraw an invitation: its link stops working (nothing if it was accepted or withdrawn already).

    Raises:
        InviteNotFound: no such invitation in this tenant.
    """
    invite = await _tenant_invite(session, tenant_id=tenant_id, invite_id=invite_id)
    if invite.accepted_at is None and invite.revoked_at is None:
        invite.revoked_at = utcnow()
        session.add(invite)
        log.info("console_invite_revoked", invite_id=str(invite.id), tenant_id=str(tenant_id))
    return invite


async def pending_invites(session: AsyncSession, *, tenant_id: uuid.UUID) -> list[ConsoleInvite]:
    """The tenant's invitations neither accepted nor withdrawn (expired ones included), newest first."""
    query = (
        select(ConsoleInvite)
        .where(
            col(ConsoleInvite.tenant_id) == tenant_id,
            col(ConsoleInvite.accepted_at).is_(None),
            col(ConsoleInvite.revoked_at).is_(None),
        )
        .order_by(col(ConsoleInvite.created_at).desc())
    )
    return list((await session.exec(query)).all())


async def invite_for_token(session: AsyncSession, token: str, *, lock: bool = False) -> ConsoleInvite:
    """The invitation the link's ``token`` opens, if it still works.

    Args:
        lock: hold the row (``FOR UPDATE``) until the transaction ends, so two tabs cannot both use it.

    Raises:
        InviteRefused: unknown, used, withdrawn or expired (checked in that order).
    """
    query = select(ConsoleInvite).where(ConsoleInvite.token_hash == sha256_hex(token or ""))
    if lock:
        query = query.with_for_update()
    invite = (await session.exec(query)).first()
    if invite is None:
        raise InviteRefused(InviteProblem.unknown)
    if invite.accepted_at is not None:
        raise InviteRefused(InviteProblem.used)
    if invite.revoked_at is not None:
        raise InviteRefused(InviteProblem.revoked)
    if invite.expires_at <= utcnow():
        raise InviteRefused(InviteProblem.expired)
    return invite


async def accept_invite(session: AsyncSession, *, token: str, password: str, name: str = "") -> ConsoleUser:
    """Use the link: create the account with the chosen password (caller's transaction, which the
    caller commits); the link then stops working.

    Raises:
        InviteRefused: the link does not work (:func:`invite_for_token`).
        WeakPassword: the password breaks :func:`~switchboard.password_policy.check_password`.
        UserExists: somebody took that e-mail since the invitation was made.
    """
    invite = await invite_for_token(session, token, lock=True)
    check_password(password, email=invite.email)
    user = await create_user(
        session,
        email=invite.email,
        password=password,
        role=invite.role,
        tenant_id=invite.tenant_id,
        name=name.strip() or invite.name,
    )
    invite.accepted_at = utcnow()
    invite.user_id = user.id
    session.add(invite)
    log.info("console_invite_accepted", invite_id=str(invite.id), user_id=str(user.id))
    return user


async def set_user_active(
    session: AsyncSession, *, tenant_id: uuid.UUID, user_id: uuid.UUID, active: bool, actor_id: uuid.UUID
) -> ConsoleUser:
    """Turn a tenant's console user off (their sessions end at once; API tokens stop working while
    off) or on again (caller's transaction).

    Raises:
        UserNotFound: no such user in this tenant.
        CannotDeactivateSelf: ``actor_id`` is the user being turned off.
    """
    user = await session.get(ConsoleUser, user_id)
    if user is None or user.tenant_id != tenant_id:
        raise UserNotFound(f"no console user {user_id}")
    if not active and user.id == actor_id:
        raise CannotDeactivateSelf("You cannot deactivate your own account.")
    user.is_active = active
    user.updated_at = utcnow()
    session.add(user)
    if not active:
        await session.execute(delete(ConsoleSession).where(col(ConsoleSession.user_id) == user.id))
    log.warning(
        "console_user_activated" if active else "console_user_deactivated",
        user_id=str(user.id),
        tenant_id=str(tenant_id),
        actor_id=str(actor_id),
    )
    return user
