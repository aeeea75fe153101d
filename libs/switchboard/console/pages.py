"""Console pages of the core: login, logout, the home redirect, the inbox and its live stream.

The conversation page and its actions are in :mod:`switchboard.console.conversation_pages`.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlmodel import col, select

from switchboard.api.access import INBOX_ROLES
from switchboard.api.deps import ResourcesDep, SessionDep, SettingsDep
from switchboard.console.app import render
from switchboard.console.auth import (
    SESSION_COOKIE,
    LoginLimiter,
    LoginRefused,
    authenticate,
    end_session,
    load_session,
    start_session,
)
from switchboard.console.deps import CurrentUserDep, PageContext, check_csrf, page_access
from switchboard.console.inbox import InboxFilters, Mode, list_inbox
from switchboard.console.live import live_events
from switchboard.db.models import ConsoleUser, HumanAgent, Role, Tenant
from switchboard.i18n import N_
from switchboard.observability import get_logger

__all__ = ["pages_router", "InboxPage"]

log = get_logger(__name__)
pages_router = APIRouter(include_in_schema=False)

InboxPage = Annotated[PageContext, Depends(page_access(INBOX_ROLES))]
CHANNELS = ("whatsapp", "instagram", "gmail")


def _client_ip(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def _safe_next(target: str | None) -> str:
    """Only a path on this site (never ``//evil.example`` or ``https://...``): an open redirect otherwise."""
    if not target or not target.startswith("/") or target.startswith("//") or urlsplit(target).netloc:
        return "/"
    return target


@pages_router.get("/login", response_class=HTMLResponse)
async def login_page(request: Request, session: SessionDep, next: str | None = None) -> Response:
    if await load_session(session, request.cookies.get(SESSION_COOKIE)) is not None:
        return RedirectResponse(_safe_next(next), status_code=303)
    return render(request, "login.html", next=_safe_next(next), error=None, email="")


@pages_router.post("/login", response_class=HTMLResponse)
async def login_submit(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    resources: ResourcesDep,
    email: Annotated[str, Form(max_length=320)],
    password: Annotated[str, Form(max_length=1024)],
    next: Annotated[str, Form()] = "/",
) -> Response:
    """Check the password (after the rate limit); on success a new session cookie and a redirect."""
    assert resources.redis is not None
    limiter = LoginLimiter(
        resources.redis,
        max_attempts=settings.console_login_max_attempts,
        max_attempts_per_ip=settings.console_login_max_attempts_per_ip,
        window_s=settings.console_login_window_s,
    )
    ip = _client_ip(request)
    target = _safe_next(next)
    try:
        await limiter.check(email=email, ip=ip)
    except LoginRefused as exc:
        return render(
            request, "login.html", status_code=429, next=target, error=str(exc), email=email,
            headers={"Retry-After": str(exc.retry_after_s)},
        )  # fmt: skip
    user = await authenticate(session, email=email, password=password)
    if user is None:
        await limiter.failed(email=email, ip=ip)
        log.info("console_login_failed", ip=ip)
        return render(
            request,
            "login.html",
            status_code=401,
            next=target,
            error="Wrong e-mail or password.",
            email=email,
        )
    await limiter.succeeded(email=email)
    token, _info = await start_session(session, user=user, ttl_s=settings.console_session_ttl_s)
    await session.commit()
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        SESSION_COOKIE, token, max_age=settings.console_session_ttl_s, httponly=True, samesite="lax",
        secure=settings.console_cookie_secure, path="/",
    )  # fmt: skip
    return response


@pages_router.post("/logout")
async def logout(request: Request, info: CurrentUserDep, session: SessionDep) -> Response:
    await check_csrf(request, info)
    await end_session(session, request.cookies.get(SESSION_COOKIE))
    await session.commit()
    log.info("console_logout", user_id=str(info.user.id))
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


@pages_router.get("/", response_class=HTMLResponse)
async def home(request: Request, info: CurrentUserDep, session: SessionDep) -> Response:
    """A tenant user goes to their inbox; a platform admin picks a tenant."""
    if info.user.tenant_id is not None:
        tenant = await session.get(Tenant, info.user.tenant_id)
        if tenant is not None:
            return RedirectResponse(f"/t/{tenant.slug}/inbox", status_code=303)
    tenants = list((await session.exec(select(Tenant).order_by(col(Tenant.slug)))).all())
    return render(request, "tenants.html", tenants=tenants, active=None)


def _filters(
    channel: str | None, mode: str | None, assigned: str | None, unread: bool, q: str | None
) -> InboxFilters:
    return InboxFilters(
        channel=channel if channel in CHANNELS else None,
        mode=Mode(mode) if mode in {m.value for m in Mode} else None,
        assigned=assigned or None,
        unread=unread,
        q=(q or "").strip()[:200] or None,
    )


async def _assignees(session: SessionDep, tenant: Tenant) -> list[tuple[str, str]]:
    agents = (await session.exec(select(HumanAgent).where(HumanAgent.tenant_id == tenant.id))).all()
    users = (await session.exec(select(ConsoleUser).where(ConsoleUser.tenant_id == tenant.id))).all()
    return (
        [("me", N_("Me"))]  # translated by the template (names are not)
        + [(f"agent:{a.id}", f"{a.name} (WhatsApp)") for a in agents]
        + [(f"user:{u.id}", u.name or u.email) for u in users]
    )


@pages_router.get("/t/{slug}/inbox", response_class=HTMLResponse)
async def inbox(
    request: Request,
    page: InboxPage,
    session: SessionDep,
    channel: str | None = None,
    mode: str | None = None,
    assigned: str | None = None,
    unread: bool = False,
    q: Annotated[str | None, Query(max_length=200)] = None,
) -> Response:
    """Conversations across channels, newest activity first; the list refreshes itself on live events."""
    filters = _filters(channel, mode, assigned, unread, q)
    rows = await list_inbox(session, tenant_id=page.tenant.id, viewer_id=page.user.id, filters=filters)
    template = "_inbox_rows.html" if request.headers.get("HX-Request") else "inbox.html"
    return render(
        request, template, tenant=page.tenant, rows=rows, filters=filters, channels=CHANNELS,
        modes=[m.value for m in Mode], assignees=await _assignees(session, page.tenant), active="inbox",
    )  # fmt: skip


@pages_router.get("/t/{slug}/events")
async def events(request: Request, page: InboxPage, resources: ResourcesDep) -> Response:
    """Server-sent events of the tenant (``conversation`` events: ``{"conversation_id", "kind"}``)."""
    assert resources.redis is not None
    return live_events(request, resources.redis, tenant_id=page.tenant.id)


_ = Role
