"""Admin API for Gmail mailboxes (mounted by the orchestrator; ``ADMIN_TOKEN`` bearer auth).

* ``GET  /v1/admin/tenants/{slug}/channels/gmail`` — the tenant's mailboxes and their sync status
* ``POST /v1/admin/tenants/{slug}/channels/gmail/authorize`` — the consent URL for a new mailbox
* ``POST /v1/admin/tenants/{slug}/channels/gmail/connect`` — the code from the redirect: the mailbox
  is connected (the same as ``switchboard channel add-gmail``, :mod:`.mailboxes`)
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from fastapi import HTTPException, status
from pydantic import BaseModel, ConfigDict, Field
from sqlmodel import col, select

from switchboard.api.deps import SessionDep, SessionsDep, SettingsDep, TenantDep
from switchboard.api.routers import tenant_admin_router
from switchboard.channels.gmail.client import GmailApiError, GmailClient, OAuthError
from switchboard.channels.gmail.mailboxes import (
    AUTHORIZATION_TTL_S,
    AuthorizationRefused,
    code_from_answer,
    finish_authorization,
    start_authorization,
)
from switchboard.channels.gmail.oauth import parse_client_secrets
from switchboard.crypto import CredentialCipher
from switchboard.db.models import GmailMailbox

__all__ = ["gmail_admin_router"]

gmail_admin_router = tenant_admin_router("/channels/gmail", tags=["admin: channels"])


class AuthorizeRequest(BaseModel):
    """Start connecting a mailbox."""

    model_config = ConfigDict(extra="forbid")

    client_secrets: dict[str, Any] = Field(
        description="The tenant's OAuth client: the content of the `client_secret_*.json` file from Google "
        'Cloud console (`{"installed": {...}}` or `{"web": {...}}`).'
    )
    redirect_uri: str = Field(
        min_length=1,
        max_length=2000,
        description="Where Google sends the browser after consent (registered on the OAuth client); the "
        "page there passes the `code` and `state` query parameters to `/connect`.",
    )
    login_hint: str | None = Field(None, max_length=320, description="The mailbox address, pre-filled.")


class AuthorizeResponse(BaseModel):
    consent_url: str = Field(description="Open in a browser, sign in as the mailbox, allow access.")
    state: str = Field(description="Opaque; comes back on the redirect and goes to `/connect`.")
    expires_in_s: float


class ConnectRequest(BaseModel):
    """Finish connecting: what came back on the redirect."""

    model_config = ConfigDict(extra="forbid")

    state: str = Field(min_length=1, max_length=4000)
    code: str = Field(
        min_length=1, max_length=4000, description="The `code` parameter, or the whole redirected URL."
    )


class MailboxPublic(BaseModel):
    """A connected mailbox as the API shows it."""

    channel_account_id: uuid.UUID
    email: str
    status: str = Field(description="`active` or `needs_reauth` (connect it again).")
    history_id: str | None
    last_error: str | None
    watch_expiration_ms: int | None = Field(None, description="When push ends (epoch ms); null: polled only.")
    last_synced_at: datetime | None
    reconnected: bool | None = Field(None, description="Only in `/connect` answers.")


@gmail_admin_router.get("", summary="List the tenant's Gmail mailboxes and their sync status")
async def list_mailboxes(tenant: TenantDep, session: SessionDep) -> list[MailboxPublic]:
    rows = await session.exec(
        select(GmailMailbox).where(GmailMailbox.tenant_id == tenant.id).order_by(col(GmailMailbox.email))
    )
    return [_public(row) for row in rows.all()]


@gmail_admin_router.post(
    "/authorize",
    summary="Start connecting a Gmail mailbox: the OAuth consent URL",
    description="Offline access with consent forced, so Google returns a refresh token. Nothing is stored "
    f"yet: the `state` carries the request (encrypted) and is accepted for {AUTHORIZATION_TTL_S:g} s.",
    responses={422: {"description": "the client secrets have no client_id / client_secret"}},
)
async def authorize(body: AuthorizeRequest, tenant: TenantDep, settings: SettingsDep) -> AuthorizeResponse:
    try:
        secrets = parse_client_secrets(body.client_secrets)
    except ValueError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
    auth = start_authorization(
        cipher=CredentialCipher.from_settings(settings),
        auth_url=settings.resolved_gmail_auth_url,
        scopes=settings.gmail_oauth_scopes,
        tenant_id=tenant.id,
        secrets=secrets,
        redirect_uri=body.redirect_uri,
        login_hint=body.login_hint,
    )
    return AuthorizeResponse(consent_url=auth.url, state=auth.state, expires_in_s=AUTHORIZATION_TTL_S)


@gmail_admin_router.post(
    "/connect",
    summary="Finish connecting a Gmail mailbox with the code from the redirect",
    description="Exchanges the code, stores the tokens encrypted, and starts the sync from the mailbox's "
    "current history id (mail already there is not answered). Connecting a `needs_reauth` mailbox again "
    "makes it `active` and keeps its conversations.",
    responses={
        400: {"description": "unknown or expired state, or a redirect without a code"},
        409: {"description": "the mailbox is connected to another tenant, or no refresh token came back"},
        502: {"description": "Google refused the code or the profile could not be read"},
    },
)
async def connect(
    body: ConnectRequest, tenant: TenantDep, sessions: SessionsDep, settings: SettingsDep
) -> MailboxPublic:
    client = GmailClient(
        settings.resolved_gmail_api_base_url,
        settings.resolved_gmail_token_url,
        timeout_s=settings.gmail_timeout_s,
    )
    try:
        code = code_from_answer(body.code, state=body.state)
        connected = await finish_authorization(
            sessions=sessions,
            cipher=CredentialCipher.from_settings(settings),
            client=client,
            tenant_id=tenant.id,
            state=body.state,
            code=code,
        )
    except AuthorizationRefused as exc:
        raise HTTPException(status.HTTP_400_BAD_REQUEST, str(exc)) from None
    except (OAuthError, GmailApiError) as exc:
        raise HTTPException(status.HTTP_502_BAD_GATEWAY, str(exc)) from None
    except ValueError as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
    finally:
        await client.aclose()
    async with sessions() as session:
        row = (
            await session.exec(
                select(GmailMailbox).where(GmailMailbox.channel_account_id == connected.account_id)
            )
        ).one()
    return _public(row).model_copy(update={"reconnected": connected.reconnected})


def _public(row: GmailMailbox) -> MailboxPublic:
    return MailboxPublic(
        channel_account_id=row.channel_account_id,
        email=row.email,
        status=row.status,
        history_id=row.history_id,
        last_error=row.last_error,
        watch_expiration_ms=row.watch_expiration_ms,
        last_synced_at=row.last_synced_at,
    )
