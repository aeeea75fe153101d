"""Platform admin API: ``/v1/admin/platform/...`` (``ADMIN_TOKEN`` only): tenants, usage, queues, dead letters.

The platform console (``/platform``) does the same through :mod:`switchboard.platform_ops`.
"""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, HTTPException, Query, status
from pydantic import BaseModel, Field

from switchboard.api.auth import AdminAuth
from switchboard.api.deps import ResourcesDep, SessionDep, tenant_not_found
from switchboard.errors import TenantNotFound
from switchboard.platform_ops import (
    DeadLetterNotFound,
    NotRetryable,
    dead_letters,
    queue_depths,
    retry_dead_inbound,
    retry_failed_outbox,
    set_suspended,
    usage_per_tenant,
)
from switchboard.tenants import TenantExists, create_tenant, get_tenant

__all__ = ["platform_admin_router", "TenantCreate"]

platform_admin_router = APIRouter(
    prefix="/v1/admin/platform", tags=["admin: platform"], dependencies=[AdminAuth]
)


class TenantCreate(BaseModel):
    """A new tenant (and its organization, found or created by name)."""

    slug: str = Field(min_length=1, max_length=64, description="a-z, 0-9 and inner '-'.")
    name: str = Field(min_length=1, max_length=200)
    organization: str | None = Field(None, max_length=200, description="Default: the tenant's name.")


@platform_admin_router.get("/tenants", summary="Tenants with their usage over `days`")
async def get_platform_tenants(
    session: SessionDep, days: int = Query(30, ge=1, le=366)
) -> list[dict[str, Any]]:
    return await usage_per_tenant(session, days=days)


@platform_admin_router.post(
    "/tenants",
    status_code=status.HTTP_201_CREATED,
    summary="Create a tenant",
    description="409: the slug is taken; 422: a malformed slug.",
)
async def post_platform_tenant(body: TenantCreate, session: SessionDep) -> dict[str, Any]:
    try:
        tenant = await create_tenant(
            session, slug=body.slug, name=body.name, organization_name=body.organization
        )
    except TenantExists as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
    except ValueError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
    await session.commit()
    return {"id": str(tenant.id), "slug": tenant.slug, "name": tenant.name}


@platform_admin_router.post(
    "/tenants/{tenant_ref}/{action}",
    summary="Suspend a tenant, or lift its suspension",
    description="`action`: suspend or unsuspend. A suspended tenant's messages are stored but not answered.",
)
async def post_platform_suspend(tenant_ref: str, action: str, session: SessionDep) -> dict[str, Any]:
    if action not in ("suspend", "unsuspend"):
        raise HTTPException(status.HTTP_404_NOT_FOUND, "use suspend or unsuspend")
    try:
        tenant = await get_tenant(session, tenant_ref)
    except TenantNotFound:
        raise tenant_not_found(tenant_ref) from None
    await set_suspended(session, tenant, suspended=action == "suspend", actor="api:admin-token")
    await session.commit()
    return {"slug": tenant.slug, "suspended": tenant.suspended_at is not None}


@platform_admin_router.get(
    "/queues",
    summary="Queue depth and dead letters",
    description="`dead_letters.inbound`: dead inbound messages; `dead_letters.outbox`: failed outbox parts "
    "(newest failure first; `retryable`: it may be retried; else `not_retryable_reason` says why: the "
    "provider accepted it, or it was refused because the customer-service window had closed — "
    "`window_closed`, WhatsApp `131047`: a free-form reply can no longer be sent — or the agent's "
    "window, `agent_window_closed`). `tenant` (slug or id) narrows both lists to one tenant.",
)
async def get_platform_queues(
    session: SessionDep, resources: ResourcesDep, tenant: str | None = Query(None, max_length=64)
) -> dict[str, Any]:
    tenant_id = None
    if tenant:
        try:
            tenant_id = (await get_tenant(session, tenant)).id
        except TenantNotFound:
            raise tenant_not_found(tenant) from None
    depths = await queue_depths(resources.redis) if resources.redis is not None else {}
    found = await dead_letters(session, tenant_id=tenant_id)
    for part in found["outbox"]:
        refusal = part.pop("not_retryable")
        part["not_retryable_reason"] = refusal.text() if refusal is not None else None
    return {"depths": depths, "dead_letters": found}


@platform_admin_router.post(
    "/dead-letters/{message_id}/retry",
    summary="Retry a dead inbound message",
    description="Back to pending with a fresh job. 404: no dead inbound message with that id.",
)
async def post_retry_dead_letter(
    message_id: uuid.UUID, session: SessionDep, resources: ResourcesDep
) -> dict[str, Any]:
    try:
        await retry_dead_inbound(session, resources.redis, message_id, actor="api:admin-token")
    except DeadLetterNotFound:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no dead inbound message {message_id}") from None
    return {"id": str(message_id), "inbound_state": "pending"}


@platform_admin_router.post(
    "/outbox/{outbox_id}/retry",
    summary="Retry a failed outbox part (and the rest of its reply)",
    description="Puts the failed parts of the part's reply back to pending (fresh attempts, same "
    "correlation id) and asks the worker to deliver them through the delivery loop, in order. "
    "Idempotent: a part the provider accepted, or one already retried (pending, sending, sent), is never "
    "sent again — 409 for those and for unknown ids. Also 409 for a part refused because the "
    "customer-service window had closed (`window_closed`, WhatsApp `131047`: more than 24 hours since the "
    "customer's last message, so a free-form reply can no longer be sent; answer with a template or wait "
    "for the customer to write) or the agent's (`agent_window_closed`: sent by itself when the agent next "
    "writes). The 409 `detail` says which.",
)
async def post_retry_outbox(
    outbox_id: uuid.UUID, session: SessionDep, resources: ResourcesDep
) -> dict[str, Any]:
    try:
        ids = await retry_failed_outbox(session, resources.redis, outbox_id, actor="api:admin-token")
    except NotRetryable as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, exc.refusal.text()) from None
    return {"id": str(outbox_id), "requeued": [str(i) for i in ids], "status": "pending"}
