"""Connecting a mailbox: authorization code → encrypted tokens, a ``gmail`` channel account, its sync state.

Used by ``switchboard channel add-gmail`` and the admin API. Connecting again (after a revoke) keeps the
account and its conversations, stores the new tokens and makes the mailbox ``active`` again; the
cursor starts from the mailbox's current ``historyId`` (mail that arrived while it was disconnected is
not answered: a person should look at it).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.channels.gmail.client import GmailClient
from switchboard.channels.gmail.oauth import ClientSecrets
from switchboard.crypto import CredentialCipher
from switchboard.db.models import ChannelAccount, GmailMailbox, MailboxStatus, utcnow
from switchboard.observability import get_logger

__all__ = ["ConnectedMailbox", "connect_mailbox"]

log = get_logger(__name__)


@dataclass(frozen=True)
class ConnectedMailbox:
    account_id: uuid.UUID
    email: str
    history_id: str | None
    reconnected: bool


async def connect_mailbox(
    *,
    sessions: async_sessionmaker[AsyncSession],
    cipher: CredentialCipher,
    client: GmailClient,
    tenant_id: uuid.UUID,
    secrets: ClientSecrets,
    code: str,
    redirect_uri: str,
) -> ConnectedMailbox:
    """Exchange ``code``, read the mailbox's address and cursor, store everything.

    Raises:
        OAuthError: the code was refused.
        GmailApiError: the profile could not be read.
        ValueError: no refresh token came back, or the mailbox belongs to another tenant.
    """
    grant = await client.exchange_code(
        code=code, client_id=secrets.client_id, client_secret=secrets.client_secret, redirect_uri=redirect_uri
    )
    if not grant.refresh_token:
        raise ValueError("Google returned no refresh token: revoke the app's access and consent again")
    profile = await client.profile(grant.access_token)
    address = str(profile["emailAddress"]).strip().lower()
    credentials = {
        "client_id": secrets.client_id, "client_secret": secrets.client_secret,
        "refresh_token": grant.refresh_token, "access_token": grant.access_token,
        "expires_at": time.time() + grant.expires_in_s, "scope": grant.scope,
    }  # fmt: skip
    async with sessions() as session, session.begin():
        account = (
            await session.exec(
                select(ChannelAccount).where(
                    ChannelAccount.channel == "gmail", ChannelAccount.external_account_id == address
                )
            )
        ).first()
        reconnected = account is not None
        if account is not None and account.tenant_id != tenant_id:
            raise ValueError(f"mailbox {address} is connected to another tenant")
        if account is None:
            account = ChannelAccount(tenant_id=tenant_id, channel="gmail", external_account_id=address,
                                     display_name=address)  # fmt: skip
        account.credentials_encrypted = cipher.encrypt(credentials)
        account.is_active = True
        account.updated_at = utcnow()
        session.add(account)
        await session.flush()
        mailbox = (
            await session.exec(select(GmailMailbox).where(GmailMailbox.channel_account_id == account.id))
        ).first() or GmailMailbox(tenant_id=tenant_id, channel_account_id=account.id, email=address)
        mailbox.status = MailboxStatus.active.value
        mailbox.history_id = str(profile.get("historyId")) if profile.get("historyId") else None
        mailbox.last_error = None
        mailbox.updated_at = utcnow()
        session.add(mailbox)
    log.info("gmail_mailbox_connected", tenant_id=str(tenant_id), mailbox=address, reconnected=reconnected)
    return ConnectedMailbox(account_id=account.id, email=address, history_id=mailbox.history_id,
                            reconnected=reconnected)  # fmt: skip
