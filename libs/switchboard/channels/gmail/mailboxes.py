"""Connecting a mailbox: authorization code → encrypted tokens, a ``gmail`` channel account, its sync state.

Used by ``switchboard channel add-gmail`` and the admin API (``POST .../channels/gmail/authorize`` then
``.../connect``), both through :func:`start_authorization` and :func:`finish_authorization`. Connecting again (after a revoke) keeps the
account and its conversations, stores the new tokens and makes the mailbox ``active`` again; the
cursor starts from the mailbox's current ``historyId`` (mail that arrived while it was disconnected is
not answered: a person should look at it).
"""

from __future__ import annotations

import secrets as token_secrets
import time
import uuid
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.channels.gmail.client import GmailClient
from switchboard.channels.gmail.oauth import ClientSecrets, consent_url
from switchboard.crypto import CredentialCipher, CredentialDecryptError
from switchboard.db.models import ChannelAccount, GmailMailbox, MailboxStatus, utcnow
from switchboard.observability import get_logger

__all__ = [
    "AUTHORIZATION_TTL_S",
    "Authorization",
    "AuthorizationRefused",
    "ConnectedMailbox",
    "code_from_answer",
    "connect_mailbox",
    "finish_authorization",
    "start_authorization",
]

log = get_logger(__name__)

AUTHORIZATION_TTL_S = 900.0
"""How long a consent URL's ``state`` is accepted after :func:`start_authorization`, in seconds."""


class AuthorizationRefused(ValueError):
    """A ``state`` that is not ours, expired, or of another tenant, or an answer without a code."""


@dataclass(frozen=True)
class Authorization:
    """A started consent: the URL the mailbox owner opens and the ``state`` that comes back with the code.

    ``state`` is the tenant, the OAuth client and the redirect URI encrypted with the credential cipher
    (with an expiry): nothing is stored until the code comes back, and the client secret is never
    readable outside this process.
    """

    url: str
    state: str
    redirect_uri: str


def start_authorization(
    *,
    cipher: CredentialCipher,
    auth_url: str,
    scopes: str,
    tenant_id: uuid.UUID,
    secrets: ClientSecrets,
    redirect_uri: str,
    login_hint: str | None = None,
    now: float | None = None,
) -> Authorization:
    """The consent URL (offline access, consent forced) for connecting a mailbox to ``tenant_id``."""
    state = cipher.encrypt(
        {
            "tenant_id": str(tenant_id),
            "client_id": secrets.client_id,
            "client_secret": secrets.client_secret,
            "redirect_uri": redirect_uri,
            "expires_at": (now or time.time()) + AUTHORIZATION_TTL_S,
            "nonce": token_secrets.token_urlsafe(8),
        }
    )
    url = consent_url(
        auth_url=auth_url,
        client_id=secrets.client_id,
        redirect_uri=redirect_uri,
        scopes=scopes,
        state=state,
        login_hint=login_hint,
    )
    return Authorization(url=url, state=state, redirect_uri=redirect_uri)


def code_from_answer(answer: str, *, state: str | None = None) -> str:
    """The authorization code from what the owner pasted: the code itself, or the whole redirected URL
    (``...?code=4/0A...&state=...``; its ``state`` must then be ``state``, and an ``error=`` is refused).

    Raises:
        AuthorizationRefused: empty, an ``error`` redirect, a URL without a code, or another state.
    """
    answer = answer.strip()
    if not answer:
        raise AuthorizationRefused("no authorization code given")
    if "code=" not in answer and "error=" not in answer:
        return answer
    query = parse_qs(urlsplit(answer).query if "?" in answer else answer)
    if "error" in query:
        raise AuthorizationRefused(f"consent refused: {query['error'][0]}")
    if "code" not in query:
        raise AuthorizationRefused("the URL has no code= parameter")
    if state is not None and query.get("state", [state])[0] != state:
        raise AuthorizationRefused("the redirect's state is not this consent's (another or an old attempt)")
    return query["code"][0]


async def finish_authorization(
    *,
    sessions: async_sessionmaker[AsyncSession],
    cipher: CredentialCipher,
    client: GmailClient,
    tenant_id: uuid.UUID,
    state: str,
    code: str,
    now: float | None = None,
) -> ConnectedMailbox:
    """Check ``state`` (ours, not expired, for ``tenant_id``) and :func:`connect_mailbox` with ``code``.

    Raises:
        AuthorizationRefused: the state is not ours, expired or of another tenant.
        OAuthError, GmailApiError, ValueError: as :func:`connect_mailbox`.
    """
    try:
        pending = cipher.decrypt(state)
    except CredentialDecryptError:
        raise AuthorizationRefused("unknown state: start the connection again") from None
    if pending.get("tenant_id") != str(tenant_id):
        raise AuthorizationRefused("the state belongs to another tenant")
    if float(pending.get("expires_at") or 0) < (now or time.time()):
        raise AuthorizationRefused(f"the consent expired ({AUTHORIZATION_TTL_S:g} s): start again")
    secrets = ClientSecrets(client_id=pending["client_id"], client_secret=pending["client_secret"])
    return await connect_mailbox(
        sessions=sessions,
        cipher=cipher,
        client=client,
        tenant_id=tenant_id,
        secrets=secrets,
        code=code,
        redirect_uri=pending["redirect_uri"],
    )


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
        "client_id": secrets.client_id,
        "client_secret": secrets.client_secret,
        "refresh_token": grant.refresh_token,
        "access_token": grant.access_token,
        "expires_at": time.time() + grant.expires_in_s,
        "scope": grant.scope,
    }
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
            account = ChannelAccount(
                tenant_id=tenant_id, channel="gmail", external_account_id=address, display_name=address
            )
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
    return ConnectedMailbox(
        account_id=account.id, email=address, history_id=mailbox.history_id, reconnected=reconnected
    )
