"""Tenant routing for every channel: the provider's account id in a webhook → the tenant's channel account.

A webhook names the receiving account in the provider's terms (WhatsApp ``metadata.phone_number_id``,
Instagram ``entry[].id``, a Gmail address); :class:`AccountDirectory` maps it to the active
``channel_accounts`` row of that channel. Lookups are cached in-process for :data:`CACHE_TTL_S` seconds
(unknown ids for :data:`NEGATIVE_CACHE_TTL_S`, so a freshly connected account is picked up quickly); call
:meth:`AccountDirectory.invalidate` after changing an account in this process.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.crypto import CredentialCipher
from switchboard.db.models import ChannelAccount, Tenant
from switchboard.i18n import N_
from switchboard.tenants import add_channel_account

__all__ = [
    "AccessTokenMissing",
    "api_base_option",
    "AccountRef",
    "AccountDirectory",
    "AccountTaken",
    "CACHE_TTL_S",
    "NEGATIVE_CACHE_TTL_S",
    "access_token_of",
    "account_token_state",
    "token_state_label",
    "TOKEN_STATE_LABELS",
    "TOKEN_STATES_OK",
    "connect_channel_account",
]

CACHE_TTL_S = 30.0
"""How long a found account is trusted without re-reading the database (seconds)."""
NEGATIVE_CACHE_TTL_S = 5.0
"""How long an unknown account id is remembered as unknown (seconds)."""


def account_token_state(
    *, is_active: bool, has_credentials: bool, mailbox_status: str | None, on_sandbox: bool = False
) -> str:
    """The one token state of a channel account, shown by the console Channels page and ``channel list``
    (each in words by :func:`token_state_label`).

    Args:
        on_sandbox: the account talks to this deployment's sandbox
            (:meth:`~switchboard.settings.Settings.account_on_sandbox`), which needs no token.

    Returns ``needs_reauth`` (a Gmail mailbox whose grant was revoked: ``gmail_mailboxes.status``; it wins
    over everything, the mailbox is not synced until connected again), ``inactive`` (switched off),
    ``stored`` (credentials present), ``sandbox`` (none, and none needed) or ``missing``.
    """
    if mailbox_status == "needs_reauth":
        return "needs_reauth"
    if not is_active:
        return "inactive"
    if has_credentials:
        return "stored"
    return "sandbox" if on_sandbox else "missing"


TOKEN_STATE_LABELS: dict[str, str] = {
    "stored": N_("stored"),
    "missing": N_("missing"),
    "sandbox": N_("not needed (sandbox)"),
    "needs_reauth": N_("needs_reauth"),
    "inactive": N_("inactive"),
}
""":func:`account_token_state` → what people read (English msgids; the console translates them)."""

TOKEN_STATES_OK = frozenset({"stored", "sandbox"})
"""Token states under which the account can send."""


def token_state_label(state: str) -> str:
    """``sandbox`` → ``not needed (sandbox)``; the others are their own words."""
    return TOKEN_STATE_LABELS.get(state, state)


@dataclass(frozen=True)
class AccountRef:
    """The routing facts of one connected channel account."""

    id: uuid.UUID
    """``channel_accounts.id``."""
    tenant_id: uuid.UUID
    channel: str
    external_account_id: str
    """The provider's id of the account (``channel_accounts.external_account_id``)."""


class AccountDirectory:
    """Cached ``external_account_id`` → :class:`AccountRef` for one channel (active accounts only)."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession], channel: str) -> None:
        self._sessions = sessions
        self.channel = channel
        self._cache: dict[str, tuple[float, AccountRef | None]] = {}

    def invalidate(self, external_account_id: str | None = None) -> None:
        """Forget one id (or everything)."""
        if external_account_id is None:
            self._cache.clear()
        else:
            self._cache.pop(external_account_id, None)

    async def resolve(self, external_account_id: str) -> AccountRef | None:
        """The active account of this channel for ``external_account_id``, or ``None``.

        Raises:
            sqlalchemy.exc.SQLAlchemyError / OSError: the database is unreachable (the route answers 503).
        """
        now = time.monotonic()
        hit = self._cache.get(external_account_id)
        if hit is not None and hit[0] > now:
            return hit[1]
        async with self._sessions() as session:
            row = (
                await session.exec(
                    select(ChannelAccount).where(
                        ChannelAccount.channel == self.channel,
                        ChannelAccount.external_account_id == external_account_id,
                        ChannelAccount.is_active.is_(True),  # type: ignore[attr-defined]
                    )
                )
            ).first()
        ref = (
            AccountRef(
                id=row.id,
                tenant_id=row.tenant_id,
                channel=self.channel,
                external_account_id=external_account_id,
            )
            if row
            else None
        )
        self._cache[external_account_id] = (now + (CACHE_TTL_S if ref else NEGATIVE_CACHE_TTL_S), ref)
        return ref


def access_token_of(account: ChannelAccount, cipher: CredentialCipher) -> str | None:
    """The provider access token stored (encrypted) on ``account``, or ``None`` when none is stored."""
    if not account.credentials_encrypted:
        return None
    return cipher.decrypt(account.credentials_encrypted).get("access_token")


class AccountTaken(ValueError):
    """The provider's account is connected to another tenant (one account routes to one tenant)."""


class AccessTokenMissing(ValueError):
    """An account on a real API (not the local sandbox) without an access token: every send would fail."""


async def connect_channel_account(
    session: AsyncSession,
    *,
    tenant: Tenant,
    channel: str,
    external_account_id: str,
    access_token: str | None,
    display_name: str | None,
    cipher: CredentialCipher,
    api_base_url: str | None = None,
    label: str = "account",
) -> tuple[ChannelAccount, bool]:
    """Connect ``external_account_id`` of ``channel`` (a WhatsApp ``phone_number_id``, an Instagram
    professional account id) to ``tenant``, or update it: a new token (encrypted; ``None`` keeps the
    stored one), the name, active again, and the API root when ``api_base_url`` is given (``sandbox``, a
    URL, or ``""`` for the real API). The caller commits; webhooks find the account within
    :data:`NEGATIVE_CACHE_TTL_S`. ``switchboard channel add-whatsapp|add-instagram`` and the console's
    Channels page both connect through here.

    Returns:
        ``(account, created)``.

    Raises:
        AccountTaken: the account belongs to another tenant (``label`` names it in the message).
        AccessTokenMissing: the account would use a real API (``""`` or a URL) with no token given or
            stored.
    """
    existing = (
        await session.exec(
            select(ChannelAccount).where(
                ChannelAccount.channel == channel, ChannelAccount.external_account_id == external_account_id
            )
        )
    ).first()
    if existing is not None and existing.tenant_id != tenant.id:
        raise AccountTaken(f"{label} {external_account_id} is already connected to another tenant")
    # "" is the real API, a URL another root; None keeps what is stored (not checked: nothing changes)
    on_real_api = api_base_url is not None and api_base_url != "sandbox"
    if on_real_api and not access_token and not (existing and existing.credentials_encrypted):
        raise AccessTokenMissing(
            f"{label} {external_account_id}: an account on the real API needs its access token "
            "(--access-token, or the token field); without one, connect it to the sandbox"
        )
    if existing is not None:
        if access_token:
            existing.credentials_encrypted = cipher.encrypt({"access_token": access_token})
        existing.display_name = display_name or existing.display_name
        if api_base_url is not None:
            existing.api_base_url = api_base_url or None
        existing.is_active = True
        session.add(existing)
        await session.flush()
        return existing, False
    account = await add_channel_account(
        session,
        tenant=tenant,
        channel=channel,
        external_account_id=external_account_id,
        display_name=display_name,
        credentials={"access_token": access_token} if access_token else None,
        cipher=cipher,
        api_base_url=api_base_url or None,
    )
    return account, True


def api_base_option(value: str | None, *, has_token: bool) -> str | None:
    """``--api-base`` of ``channel add-*`` as the stored ``api_base_url``: ``sandbox``, ``""`` (real API,
    the process default) or a URL; unset: the real API with a token, the sandbox without.

    Raises:
        ValueError: not ``sandbox``, ``real`` or an ``http(s)://`` URL.
    """
    if value is None:
        return "" if has_token else "sandbox"
    if value in ("sandbox", "real"):
        return "sandbox" if value == "sandbox" else ""
    if not value.startswith(("https://", "http://")):
        raise ValueError(f"--api-base must be 'sandbox', 'real' or an http(s):// URL, not {value!r}")
    return value.rstrip("/")
