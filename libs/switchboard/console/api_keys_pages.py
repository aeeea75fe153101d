"""API keys of a tenant (admins): the console page ``/t/{slug}/api-keys`` and the admin API
``/v1/admin/tenants/{slug}/api-keys``.

Both create tenant API keys for the public API (the key is shown once), list them with the users' API
tokens (prefix, scopes, created by, last used, expiry) and revoke either at once, through
:mod:`switchboard.users.tokens` (the CLI's ``switchboard api-keys`` too).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, HTTPException, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import BaseModel, Field

from switchboard.api.access import ADMIN_ROLES, PrincipalDep
from switchboard.api.deps import SessionDep, TenantDep
from switchboard.api.routers import tenant_admin_router
from switchboard.console.app import register_nav, render
from switchboard.console.deps import PageContext, page_access
from switchboard.db.models import utcnow
from switchboard.i18n import N_
from switchboard.users import (
    API_SCOPES,
    Credential,
    CredentialNotFound,
    create_tenant_key,
    list_credentials,
    revoke_credential,
)

__all__ = ["api_keys_admin_router", "api_keys_pages_router"]

api_keys_pages_router = APIRouter(include_in_schema=False)
api_keys_admin_router = tenant_admin_router("/api-keys", tags=["api keys"])
AdminPage = Annotated[PageContext, Depends(page_access(ADMIN_ROLES))]
register_nav("api_keys", N_("API keys"), "/api-keys", ADMIN_ROLES)

EXPIRY_CHOICES = (0, 30, 90, 365)
"""Days a key made in the console may last (0: no expiry)."""


# --- Admin API -----------------------------------------------------------------------------------------


class CredentialPublic(BaseModel):
    """A tenant API key or a user's API token (never the secret)."""

    id: uuid.UUID
    kind: str = Field(description="`key` (a tenant API key) or `user_token` (a console user's token).")
    name: str
    prefix: str
    scopes: list[str] = Field(
        description="The key's scopes; a user token has `role:<role>` (its user's rights)."
    )
    created_by: str | None
    created_at: datetime
    last_used_at: datetime | None
    expires_at: datetime | None
    revoked_at: datetime | None
    active: bool


def _public(credential: Credential) -> CredentialPublic:
    return CredentialPublic(
        id=credential.id,
        kind=credential.kind,
        name=credential.name,
        prefix=credential.prefix,
        scopes=credential.scopes,
        created_by=credential.created_by,
        created_at=credential.created_at,
        last_used_at=credential.last_used_at,
        expires_at=credential.expires_at,
        revoked_at=credential.revoked_at,
        active=credential.active,
    )


class KeyCreate(BaseModel):
    name: str = Field("", max_length=100, description="What the key is for.")
    scopes: list[str] = Field(min_length=1, description=f"Among: {', '.join(API_SCOPES)}.")
    expires_at: datetime | None = Field(None, description="When it stops working (none: never).")


class KeyCreated(CredentialPublic):
    key: str = Field(description="The key (`sbk_...`), shown only now.")


@api_keys_admin_router.get(
    "", response_model=list[CredentialPublic], summary="List API keys and users' API tokens"
)
async def get_api_keys(tenant: TenantDep, session: SessionDep) -> list[CredentialPublic]:
    return [_public(c) for c in await list_credentials(session, tenant_id=tenant.id)]


@api_keys_admin_router.post(
    "", response_model=KeyCreated, status_code=201, summary="Create an API key (shown once)"
)
async def post_api_key(
    body: KeyCreate, tenant: TenantDep, principal: PrincipalDep, session: SessionDep
) -> KeyCreated:
    try:
        key, row = await create_tenant_key(
            session,
            tenant_id=tenant.id,
            scopes=body.scopes,
            name=body.name,
            created_by=principal.user,
            expires_at=body.expires_at,
        )
    except ValueError as exc:  # an unknown scope, none, or an expiry in the past
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
    await session.commit()
    [created] = [c for c in await list_credentials(session, tenant_id=tenant.id) if c.id == row.id]
    return KeyCreated(**_public(created).model_dump(), key=key)


@api_keys_admin_router.delete(
    "/{key_id}", status_code=204, summary="Revoke an API key or a user's API token at once"
)
async def delete_api_key(key_id: uuid.UUID, tenant: TenantDep, session: SessionDep) -> Response:
    try:
        await revoke_credential(session, tenant_id=tenant.id, credential_id=key_id)
    except CredentialNotFound:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such API key or token") from None
    await session.commit()
    return Response(status_code=204)


# --- Console page ----------------------------------------------------------------------------------------


async def _page(
    request: Request,
    page: PageContext,
    session: Any,
    *,
    new_key: str | None = None,
    error: str | None = None,
    code: int = 200,
) -> Response:
    credentials = await list_credentials(session, tenant_id=page.tenant.id)
    return render(
        request,
        "api_keys.html",
        status_code=code,
        tenant=page.tenant,
        credentials=credentials,
        scopes=API_SCOPES,
        expiry_choices=EXPIRY_CHOICES,
        new_key=new_key,
        error=error,
        active="api_keys",
    )


@api_keys_pages_router.get("/t/{slug}/api-keys", response_class=HTMLResponse)
async def api_keys_page(request: Request, page: AdminPage, session: SessionDep) -> Response:
    return await _page(request, page, session)


@api_keys_pages_router.post("/t/{slug}/api-keys", response_class=HTMLResponse)
async def api_keys_create(
    request: Request,
    page: AdminPage,
    session: SessionDep,
    name: Annotated[str, Form(max_length=100)] = "",
    scope: Annotated[list[str] | None, Form()] = None,
    expires_in_days: Annotated[int, Form(ge=0, le=3650)] = 0,
) -> Response:
    """The new key is shown in this answer only (not in a URL, not stored)."""
    if not scope:
        return await _page(request, page, session, error=N_("Choose at least one scope."), code=422)
    expires_at = utcnow() + timedelta(days=expires_in_days) if expires_in_days else None
    try:
        key, _ = await create_tenant_key(
            session,
            tenant_id=page.tenant.id,
            scopes=scope,
            name=name,
            created_by=page.user,
            expires_at=expires_at,
        )
    except ValueError:
        return await _page(request, page, session, error=N_("Choose among the scopes listed."), code=422)
    await session.commit()
    return await _page(request, page, session, new_key=key)


@api_keys_pages_router.post("/t/{slug}/api-keys/{key_id}/revoke")
async def api_keys_revoke(key_id: uuid.UUID, page: AdminPage, session: SessionDep) -> Response:
    try:
        await revoke_credential(session, tenant_id=page.tenant.id, credential_id=key_id)
    except CredentialNotFound:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such API key") from None
    await session.commit()
    return RedirectResponse(f"/t/{page.tenant.slug}/api-keys", status_code=303)
