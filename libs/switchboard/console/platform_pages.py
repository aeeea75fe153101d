"""Console: the platform console (``/platform``, platform admins only): organizations and tenants
(create, with their first admin's invitation, and suspend), usage per tenant, the platform's model keys
and who may use them, queue depth and dead letters with a retry button. The same operations as
``/v1/admin/platform/...`` (:mod:`switchboard.platform_routes`)."""

from __future__ import annotations

import uuid
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Form, HTTPException, Query, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlmodel import col, select

from switchboard.api.deps import ResourcesDep, SessionDep, SettingsDep
from switchboard.console.app import console_language, register_nav, render
from switchboard.console.deps import platform_access
from switchboard.console.people_pages import issue_invite_link
from switchboard.db.models import Role, Tenant
from switchboard.errors import TenantNotFound
from switchboard.i18n import N_, gettext
from switchboard.llm.keys import platform_key
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
from switchboard.settings import Settings
from switchboard.tenants import TenantExists, create_tenant, get_tenant
from switchboard.users import SessionInfo, UserExists, create_invite

__all__ = ["platform_pages_router"]

platform_pages_router = APIRouter(include_in_schema=False)
PlatformDep = Annotated[SessionInfo, Depends(platform_access)]
register_nav("platform", N_("Platform"), "/platform", (Role.platform_admin,), platform=True)
# What the page says after a Retry of a failed reply (msgids: translated in the viewer's language).
REQUEUED_ONE = N_("Requeued %(n)s part of the reply: the delivery loop sends it now.")
REQUEUED_MANY = N_("Requeued %(n)s parts of the reply: the delivery loop sends them now, in order.")
NOT_RETRIED = N_("Not retried: %(reason)s")
TENANT_CREATED = N_("Tenant %(slug)s created.")
ADMIN_INVITED = N_("Send this invitation link to %(email)s, its first admin (shown only now; it works once).")
ADMIN_MAILED = N_("The invitation was e-mailed to %(email)s, its first admin.")
ADMIN_EXISTS = N_("Not created: somebody already signs in with %(email)s.")
ADMIN_NOT_EMAIL = N_("Not created: the first admin's e-mail is not an e-mail address.")


async def _page(
    request: Request,
    session,
    resources,
    *,
    code: int = 200,
    message: str | None = None,
    error: str | None = None,
    tenant_filter: str = "",
    new_link: dict | None = None,
    typed: dict[str, str] | None = None,
) -> Response:  # type: ignore[no-untyped-def]
    depths = await queue_depths(resources.redis) if resources.redis is not None else {}
    usage = await usage_per_tenant(session, days=30)
    chosen = next((t for t in usage if t["slug"] == tenant_filter), None)
    dead = await dead_letters(session, limit=50, tenant_id=chosen["tenant_id"] if chosen else None)
    language = console_language(request)
    for part in dead["outbox"]:  # why a part offers no Retry, in the page's language
        refusal = part["not_retryable"]
        part["why_not"] = refusal.text(language) if refusal is not None else None
    return render(
        request,
        "platform.html",
        status_code=code,
        usage=usage,
        depths=depths,
        dead=dead,
        tenant_filter=chosen["slug"] if chosen else "",
        message=message,
        error=error,
        new_link=new_link,
        active="platform",
        provider_keys=provider_keys(resources.settings),
        failing=await failing_models(session, resources.redis),
        typed=typed or {},
    )


async def failing_models(session, redis) -> list[dict]:  # type: ignore[no-untyped-def]
    """Tenants whose model is failing or that have questions waiting for it: ``[{"slug", "deployments",
    "since" (UTC datetime or ``None``), "waiting"}]``, longest outage first."""
    from datetime import UTC, datetime

    from switchboard.inbound.resume import waiting_per_tenant
    from switchboard.llm.health import failing_tenants, tenant_health

    waiting = await waiting_per_tenant(session)
    ids = {uuid.UUID(t) for t in (await failing_tenants(redis) if redis is not None else [])} | set(waiting)
    if not ids:
        return []
    slugs = dict((await session.exec(select(Tenant.id, Tenant.slug).where(col(Tenant.id).in_(ids)))).all())
    found = []
    for tenant_id in ids:
        health = await tenant_health(redis, tenant_id) if redis is not None else []
        found.append(
            {
                "slug": slugs.get(tenant_id, str(tenant_id)),
                "deployments": [h.deployment for h in health],
                "since": datetime.fromtimestamp(min(h.since for h in health), UTC) if health else None,
                "waiting": waiting.get(tenant_id, 0),
            }
        )
    return sorted(found, key=lambda f: (f["since"] is None, f["since"] or 0, f["slug"]))


def provider_keys(settings: Settings) -> dict[str, bool]:
    """What the page shows of the platform's model keys: which are set, and whether tenants' own
    models may use them (``TENANTS_MAY_USE_PLATFORM_KEYS``); never a key itself."""
    return {
        "openai": platform_key(settings, "openai") is not None,
        "anthropic": platform_key(settings, "anthropic") is not None,
        "tenants_may_use": settings.tenants_may_use_platform_keys,
    }


@platform_pages_router.get("/platform", response_class=HTMLResponse)
async def platform_page(
    request: Request,
    info: PlatformDep,
    session: SessionDep,
    resources: ResourcesDep,
    tenant: Annotated[str, Query(max_length=64, description="Dead letters of this tenant (slug) only.")] = "",
    flash: Annotated[str, Query(max_length=500, description="What the last action did.")] = "",
) -> Response:
    return await _page(request, session, resources, tenant_filter=tenant, message=flash or None)


@platform_pages_router.post("/platform/tenants", response_class=HTMLResponse)
async def platform_create_tenant(
    request: Request,
    info: PlatformDep,
    session: SessionDep,
    resources: ResourcesDep,
    settings: SettingsDep,
    slug: Annotated[str, Form(max_length=64)],
    name: Annotated[str, Form(max_length=200)],
    organization: Annotated[str, Form(max_length=200)] = "",
    admin_email: Annotated[str, Form(max_length=320)] = "",
    admin_name: Annotated[str, Form(max_length=200)] = "",
) -> Response:
    """Create a tenant and, with ``admin_email``, its first admin's invitation in the same step (both
    or neither): the link is shown once, and e-mailed when an SMTP server is configured."""
    language = console_language(request)
    email = admin_email.strip()
    typed = {
        "slug": slug,
        "name": name,
        "organization": organization,
        "admin_email": admin_email,
        "admin_name": admin_name,
    }
    try:
        tenant = await create_tenant(
            session, slug=slug.strip(), name=name.strip(), organization_name=organization.strip() or None
        )
        issued = None
        if email:
            issued = await create_invite(
                session,
                tenant_id=tenant.id,
                email=email,
                role=Role.tenant_admin,
                name=admin_name,
                ttl_s=settings.console_invite_ttl_s,
                invited_by_id=info.user.id,
            )
        await session.commit()
    except UserExists:
        await session.rollback()
        error = gettext(language, ADMIN_EXISTS) % {"email": email.lower()}
        return await _page(request, session, resources, code=422, error=error, typed=typed)
    except (TenantExists, ValueError) as exc:
        await session.rollback()
        error = str(exc)
        if email and not isinstance(exc, TenantExists) and "e-mail" in error:
            error = gettext(language, ADMIN_NOT_EMAIL)
        return await _page(request, session, resources, code=422, error=error, typed=typed)
    message = gettext(language, TENANT_CREATED) % {"slug": tenant.slug}
    if issued is None:
        return await _page(request, session, resources, message=message)
    shown = await issue_invite_link(
        request, settings, issued, tenant=tenant, inviter=info.user.name or info.user.email, language=language
    )
    said = ADMIN_MAILED if shown["mailed"] else ADMIN_INVITED
    message += " " + gettext(language, said) % {"email": issued.invite.email}
    if shown["mail_error"]:
        message += " " + shown["mail_error"]
    return await _page(request, session, resources, message=message, new_link=shown)


@platform_pages_router.post("/platform/tenants/{tenant_ref}/{action}")
async def platform_suspend(tenant_ref: str, action: str, info: PlatformDep, session: SessionDep) -> Response:
    if action not in ("suspend", "unsuspend"):
        raise HTTPException(status.HTTP_404_NOT_FOUND, "use suspend or unsuspend")
    try:
        tenant = await get_tenant(session, tenant_ref)
    except TenantNotFound:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"tenant {tenant_ref!r} not found") from None
    await set_suspended(session, tenant, suspended=action == "suspend", actor=f"console:{info.user.email}")
    await session.commit()
    return RedirectResponse("/platform", status_code=303)


@platform_pages_router.post("/platform/dead-letters/{message_id}/retry")
async def platform_retry(
    message_id: uuid.UUID, info: PlatformDep, session: SessionDep, resources: ResourcesDep
) -> Response:
    try:
        await retry_dead_inbound(session, resources.redis, message_id, actor=f"console:{info.user.email}")
    except DeadLetterNotFound:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no dead inbound message {message_id}") from None
    return RedirectResponse("/platform", status_code=303)


@platform_pages_router.post("/platform/outbox/{outbox_id}/retry")
async def platform_retry_outbox(
    request: Request,
    outbox_id: uuid.UUID,
    info: PlatformDep,
    session: SessionDep,
    resources: ResourcesDep,
    tenant: Annotated[str, Form(max_length=64)] = "",
) -> Response:
    """Retry a failed outbox part's reply through the delivery loop; back to the page (303) with what
    was requeued, or the page with why not (409: retried already, accepted by the provider, or a
    closed service window)."""
    language = console_language(request)
    try:
        ids = await retry_failed_outbox(
            session, resources.redis, outbox_id, actor=f"console:{info.user.email}"
        )
    except NotRetryable as exc:
        await session.rollback()
        why = gettext(language, NOT_RETRIED) % {"reason": exc.refusal.text(language)}
        return await _page(request, session, resources, code=409, error=why, tenant_filter=tenant)
    done = gettext(language, REQUEUED_ONE if len(ids) == 1 else REQUEUED_MANY) % {"n": len(ids)}
    query = {"flash": done, **({"tenant": tenant} if tenant else {})}
    return RedirectResponse("/platform?" + urlencode(query), status_code=303)
