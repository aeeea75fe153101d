"""OAuth 2.0 for a mailbox: the consent URL, the client secrets file, tokens encrypted at rest, refresh.

Google's authorization-code flow for installed and web apps (Google's "OAuth 2.0 for installed apps" docs): the consent URL asks
for ``access_type=offline`` and ``prompt=consent`` so the first exchange returns a refresh token;
access tokens last about an hour. The credentials of a mailbox — the tenant's own OAuth client id
and secret, the refresh token and the current access token with its expiry — are one JSON object
encrypted with the credential cipher (:class:`~switchboard.crypto.CredentialCipher`) in
``channel_accounts.credentials_encrypted``; ``switchboard keys rotate`` re-encrypts it like any other.

:class:`TokenSource` hands out an access token, refreshing it ``GMAIL_TOKEN_REFRESH_MARGIN_S`` before
it expires, or at once after a 401 (:meth:`TokenSource.token` with ``force=True``). A refresh that
Google refuses with ``invalid_grant`` marks the mailbox ``needs_reauth`` with a security alert and
raises :class:`MailboxNeedsReauth`: sync stops for that mailbox (no retry loop) until it is connected
again with ``switchboard channel add-gmail``.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from sqlalchemy import update
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.channels.gmail.client import GmailClient, OAuthError
from switchboard.crypto import CredentialCipher
from switchboard.db.models import ChannelAccount, GmailMailbox, MailboxStatus, SecurityAlert, utcnow
from switchboard.errors import SwitchboardError
from switchboard.observability import get_logger

__all__ = [
    "ClientSecrets",
    "MailboxNeedsReauth",
    "TokenSource",
    "consent_url",
    "load_client_secrets",
    "parse_client_secrets",
    "mark_needs_reauth",
]

log = get_logger(__name__)


class MailboxNeedsReauth(SwitchboardError):
    """The mailbox's grant is gone (``invalid_grant``) or it has no refresh token: reconnect it."""

    def __init__(self, account_id: uuid.UUID, reason: str) -> None:
        self.account_id = account_id
        self.reason = reason
        super().__init__(f"mailbox {account_id} needs to be connected again: {reason}")


@dataclass(frozen=True)
class ClientSecrets:
    """The tenant's OAuth client (Google Cloud console → Credentials → OAuth client ID, JSON)."""

    client_id: str
    client_secret: str
    auth_uri: str | None = None
    token_uri: str | None = None
    redirect_uris: tuple[str, ...] = ()


def load_client_secrets(path: Path | str) -> ClientSecrets:
    """Read a ``client_secret_*.json`` file (``{"installed": {...}}`` or ``{"web": {...}}``).

    Raises:
        ValueError: not JSON, or no ``client_id`` / ``client_secret``.
    """
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read the client secrets file {path}: {exc}") from exc
    return parse_client_secrets(data)


def parse_client_secrets(data: Any) -> ClientSecrets:
    """The content of a ``client_secret_*.json`` file (``{"installed": {...}}``, ``{"web": {...}}`` or
    the inner object).

    Raises:
        ValueError: not an object, or no ``client_id`` / ``client_secret``.
    """
    if not isinstance(data, dict):
        raise ValueError("the client secrets are not a JSON object")
    block = data.get("installed") or data.get("web") or data
    if not isinstance(block, dict) or not block.get("client_id") or not block.get("client_secret"):
        raise ValueError("the client secrets file has no client_id / client_secret")
    return ClientSecrets(
        client_id=str(block["client_id"]),
        client_secret=str(block["client_secret"]),
        auth_uri=block.get("auth_uri"),
        token_uri=block.get("token_uri"),
        redirect_uris=tuple(str(u) for u in block.get("redirect_uris") or ()),
    )


def consent_url(
    *,
    auth_url: str,
    client_id: str,
    redirect_uri: str,
    scopes: str,
    state: str,
    login_hint: str | None = None,
) -> str:
    """The URL the mailbox owner opens to grant access (offline access, consent forced so a refresh
    token is issued every time)."""
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "scope": scopes,
        "access_type": "offline",
        "prompt": "consent",
        "include_granted_scopes": "true",
        "state": state,
    }
    if login_hint:
        params["login_hint"] = login_hint
    return f"{auth_url}?{urlencode(params)}"


async def mark_needs_reauth(session: AsyncSession, account_id: uuid.UUID, reason: str) -> bool:
    """Mark the mailbox ``needs_reauth`` and write one security alert (only when it was not already).

    Returns:
        Whether the status changed now.
    """
    mailbox = (
        await session.exec(
            select(GmailMailbox).where(GmailMailbox.channel_account_id == account_id).with_for_update()
        )
    ).first()
    if mailbox is None or mailbox.status == MailboxStatus.needs_reauth.value:
        return False
    mailbox.status = MailboxStatus.needs_reauth.value
    mailbox.last_error = reason[:500]
    mailbox.updated_at = utcnow()
    session.add(mailbox)
    session.add(
        SecurityAlert(
            tenant_id=mailbox.tenant_id,
            kind="gmail_needs_reauth",
            severity="error",
            details={"channel_account_id": str(account_id), "mailbox": mailbox.email, "reason": reason[:200]},
        )
    )
    log.error(
        "gmail_mailbox_needs_reauth",
        tenant_id=str(mailbox.tenant_id),
        mailbox=mailbox.email,
        reason=reason[:200],
    )
    return True


class TokenSource:
    """Access tokens for mailboxes, from their encrypted credentials (see the module docstring).

    Args:
        sessions: database sessions (tokens are read and written back encrypted).
        cipher: the credential cipher.
        client: the Gmail/OAuth client.
        margin_s: refresh when the token expires within this long.
        clock: seconds since the epoch (tests pass a fake one).
    """

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        cipher: CredentialCipher,
        client: GmailClient,
        *,
        margin_s: float = 300.0,
        clock: Any = time.time,
    ) -> None:
        self.sessions = sessions
        self.cipher = cipher
        self.client = client
        self.margin_s = margin_s
        self.clock = clock

    def credentials(self, account: ChannelAccount) -> dict[str, Any]:
        """The decrypted credentials of ``account`` (``{}`` when none are stored)."""
        return self.cipher.decrypt(account.credentials_encrypted) if account.credentials_encrypted else {}

    async def token(self, account_id: uuid.UUID, *, force: bool = False) -> str:
        """A valid access token for the mailbox (refreshed when about to expire, or always with ``force``).

        Raises:
            MailboxNeedsReauth: the grant was revoked (the mailbox is marked) or no refresh token exists.
            OAuthError: the token endpoint failed transiently (``is_transient``): try later.
        """
        async with self.sessions() as session:
            account = await session.get(ChannelAccount, account_id)
        if account is None:
            raise MailboxNeedsReauth(account_id, "channel account removed")
        creds = self.credentials(account)
        expires_at = float(creds.get("expires_at") or 0)
        if not force and creds.get("access_token") and expires_at - self.clock() > self.margin_s:
            return str(creds["access_token"])
        if not creds.get("refresh_token"):
            async with self.sessions() as session, session.begin():
                await mark_needs_reauth(session, account_id, "no refresh token stored")
            raise MailboxNeedsReauth(account_id, "no refresh token stored")
        try:
            grant = await self.client.refresh(
                refresh_token=str(creds["refresh_token"]),
                client_id=str(creds.get("client_id") or ""),
                client_secret=str(creds.get("client_secret") or ""),
            )
        except OAuthError as exc:
            if exc.is_transient:
                raise
            async with self.sessions() as session, session.begin():
                await mark_needs_reauth(session, account_id, f"token refresh refused: {exc.error}")
            raise MailboxNeedsReauth(account_id, exc.error) from exc
        creds = {**creds, "access_token": grant.access_token, "expires_at": self.clock() + grant.expires_in_s}
        if grant.refresh_token:  # Google may rotate it
            creds["refresh_token"] = grant.refresh_token
        async with self.sessions() as session, session.begin():
            await session.exec(
                update(ChannelAccount)
                .where(col(ChannelAccount.id) == account_id)
                .values(credentials_encrypted=self.cipher.encrypt(creds), updated_at=utcnow())
            )
        log.info("gmail_token_refreshed", channel_account_id=str(account_id), forced=force)
        return grant.access_token
