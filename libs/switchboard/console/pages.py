"""Console pages of the core: login, logout, the account page (own password, own API tokens), the home
redirect, a tenant's home page with its setup checklist, the inbox and its live stream.

The conversation page and its actions are in :mod:`switchboard.console.conversation_pages`.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlmodel import col, select

from switchboard.api.access import ADMIN_ROLES, INBOX_ROLES
from switchboard.api.deps import ResourcesDep, SessionDep, SessionsDep, SettingsDep
from switchboard.channels.base import channel_names
from switchboard.console.app import render
from switchboard.console.checklist import setup_checklist
from switchboard.console.deps import (
    CurrentUserDep,
    PageContext,
    account_access,
    check_csrf,
    cross_site_reason,
    page_access,
)
from switchboard.console.inbox import InboxFilters, Mode, list_inbox, unread_total
from switchboard.console.live import live_events
from switchboard.db.models import AgentStatus, ConsoleUser, HumanAgent, Role, Team, Tenant
from switchboard.i18n import N_
from switchboard.live_updates import publish_session_change
from switchboard.observability import get_logger
from switchboard.storable import clean_text
from switchboard.users import (
    MIN_PASSWORD_CHARS,
    SESSION_COOKIE,
    LoginLimiter,
    LoginRefused,
    SessionInfo,
    WeakPassword,
    active_api_tokens,
    authenticate,
    end_session,
    load_session,
    may_access_tenant,
    revoke_api_tokens,
    set_password,
    start_session,
    verify_password,
)
from switchboard.validation import has_unstorable_chars

__all__ = ["pages_router", "InboxPage"]

log = get_logger(__name__)
pages_router = APIRouter(include_in_schema=False)

InboxPage = Annotated[PageContext, Depends(page_access(INBOX_ROLES))]
HomePage = Annotated[PageContext, Depends(page_access(ADMIN_ROLES))]
AccountDep = Annotated[SessionInfo, Depends(account_access)]


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


def _limiter(resources: ResourcesDep, settings: SettingsDep) -> LoginLimiter:
    assert resources.redis is not None
    return LoginLimiter(
        resources.redis,
        max_attempts=settings.console_login_max_attempts,
        max_attempts_per_ip=settings.console_login_max_attempts_per_ip,
        window_s=settings.console_login_window_s,
    )


def _set_session_cookie(response: Response, token: str, settings: SettingsDep) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        token,
        max_age=settings.console_session_ttl_s,
        httponly=True,
        samesite="lax",
        secure=settings.console_cookie_secure,
        path="/",
    )


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
    """Refuse a post from another site, count the attempt (rate limit), then check the password; on
    success a new session cookie and a redirect."""
    ip = _client_ip(request)
    target = _safe_next(next)
    reason = cross_site_reason(request)
    if reason is not None:
        log.warning("console_login_cross_site", ip=ip, reason=reason)
        return render(
            request,
            "login.html",
            status_code=403,
            next=target,
            email="",
            error="This sign-in came from another web site and was refused. Open the console's own "
            "address and sign in there.",
        )
    limiter = _limiter(resources, settings)
    try:
        await limiter.attempt(email=email, ip=ip)
    except LoginRefused as exc:
        return render(
            request,
            "login.html",
            status_code=429,
            next=target,
            error=str(exc),
            email=email,
            headers={"Retry-After": str(exc.retry_after_s)},
        )
    # an address the database cannot hold (a NUL, an unpaired surrogate) is no account's: a failed login
    unstorable = has_unstorable_chars(email)
    user = None if unstorable else await authenticate(session, email=email, password=password)
    if user is None:
        email = clean_text(email) if unstorable else email
        await limiter.failed(ip=ip)
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
    _set_session_cookie(response, token, settings)
    return response


@pages_router.post("/logout")
async def logout(
    request: Request, info: CurrentUserDep, session: SessionDep, resources: ResourcesDep
) -> Response:
    await check_csrf(request, info)
    await end_session(session, request.cookies.get(SESSION_COOKIE))
    await session.commit()
    await publish_session_change(resources.redis, user_id=info.user.id)
    log.info("console_logout", user_id=str(info.user.id))
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


async def _account_page(
    request: Request, session: SessionDep, info: SessionInfo, *, status_code: int = 200, **context: Any
) -> HTMLResponse:
    tokens = await active_api_tokens(session, user_id=info.user.id)
    return render(
        request,
        "account.html",
        status_code=status_code,
        api_tokens=tokens,
        min_chars=MIN_PASSWORD_CHARS,
        active="account",
        **{"error": None, "changed": False, "revoked": None, **context},
    )


@pages_router.get("/account", response_class=HTMLResponse)
async def account(request: Request, info: AccountDep, session: SessionDep) -> Response:
    """The signed-in person's own account: change the password, revoke their API tokens."""
    return await _account_page(request, session, info)


@pages_router.post("/account/password", response_class=HTMLResponse)
async def change_password(
    request: Request,
    info: AccountDep,
    session: SessionDep,
    settings: SettingsDep,
    resources: ResourcesDep,
    current_password: Annotated[str, Form(max_length=1024)],
    new_password: Annotated[str, Form(max_length=1024)],
    new_password_again: Annotated[str, Form(max_length=1024)],
) -> Response:
    """Change one's own password (the current one checked, rate-limited like a login). Every session of
    the user ends, this browser gets a new one; the page then says the API tokens still work and offers
    to revoke them."""
    user = info.user
    limiter = _limiter(resources, settings)
    ip = _client_ip(request)
    try:
        await limiter.attempt(email=user.email, ip=ip)
    except LoginRefused as exc:
        return await _account_page(request, session, info, status_code=429, error=str(exc))
    ok, _upgrade = verify_password(current_password, user.password_hash)
    if not ok:
        await limiter.failed(ip=ip)
        log.info("console_password_change_refused", user_id=str(user.id), reason="current password")
        return await _account_page(
            request, session, info, status_code=400, error="The current password is wrong."
        )
    await limiter.succeeded(email=user.email)
    if new_password != new_password_again:
        return await _account_page(
            request, session, info, status_code=400, error="The two new passwords differ."
        )
    try:
        changed = await set_password(session, email=user.email, password=new_password)
    except WeakPassword as exc:
        return await _account_page(request, session, info, status_code=400, error=f"Not changed: {exc}.")
    token, new_info = await start_session(session, user=changed, ttl_s=settings.console_session_ttl_s)
    await session.commit()
    await publish_session_change(resources.redis, user_id=user.id)
    request.state.console = new_info  # the page's forms carry the new session's CSRF token
    response = await _account_page(request, session, new_info, changed=True)
    _set_session_cookie(response, token, settings)
    return response


@pages_router.post("/account/tokens/revoke", response_class=HTMLResponse)
async def revoke_tokens(request: Request, info: AccountDep, session: SessionDep) -> Response:
    """Revoke every API token (``sbu_...``) of the signed-in person."""
    count = await revoke_api_tokens(session, user_id=info.user.id)
    await session.commit()
    return await _account_page(request, session, info, revoked=count)


@pages_router.get("/", response_class=HTMLResponse)
async def home(request: Request, info: CurrentUserDep, session: SessionDep) -> Response:
    """A tenant admin goes to their tenant's home page (the setup checklist), an agent to the inbox; a
    platform admin picks a tenant."""
    if info.user.tenant_id is not None:
        tenant = await session.get(Tenant, info.user.tenant_id)
        if tenant is not None:
            page = "home" if info.user.role == Role.tenant_admin.value else "inbox"
            return RedirectResponse(f"/t/{tenant.slug}/{page}", status_code=303)
    tenants = list((await session.exec(select(Tenant).order_by(col(Tenant.slug)))).all())
    return render(request, "tenants.html", tenants=tenants, active=None)


@pages_router.get("/t/{slug}/home", response_class=HTMLResponse)
async def tenant_home(
    request: Request, page: HomePage, session: SessionDep, settings: SettingsDep
) -> Response:
    """The tenant's home page: the setup checklist, each step's state read from the database."""
    steps = await setup_checklist(session, page.tenant, settings)
    docs = settings.console_docs_url
    return render(
        request,
        "home.html",
        tenant=page.tenant,
        steps=steps,
        all_done=all(s.done for s in steps),
        going_live_url=f"{docs.rstrip('/')}/going-live/" if docs else None,
        active="home",
    )


def _filters(
    channel: str | None,
    mode: str | None,
    assigned: str | None,
    unread: bool,
    q: str | None,
    team: str | None = None,
) -> InboxFilters:
    try:
        team_id = uuid.UUID(team) if team else None
    except ValueError:
        team_id = None
    return InboxFilters(
        channel=channel if channel in channel_names() else None,
        mode=Mode(mode) if mode in {m.value for m in Mode} else None,
        assigned=assigned or None,
        unread=unread,
        q=(q or "").strip()[:200] or None,
        team=team_id,
    )


async def _teams(session: SessionDep, tenant: Tenant) -> list[Team]:
    return list(
        (await session.exec(select(Team).where(Team.tenant_id == tenant.id).order_by(col(Team.name)))).all()
    )


async def _assignees(session: SessionDep, tenant: Tenant) -> list[tuple[str, str]]:
    agents = (await session.exec(select(HumanAgent).where(HumanAgent.tenant_id == tenant.id))).all()
    users = (await session.exec(select(ConsoleUser).where(ConsoleUser.tenant_id == tenant.id))).all()
    return (
        [("me", N_("Me")), ("none", N_("Nobody"))]  # translated by the template (names are not)
        + [(f"agent:{a.id}", f"{a.name} (WhatsApp)") for a in agents]
        + [(f"user:{u.id}", u.name or u.email) for u in users]
    )


async def _assignable(session: SessionDep, tenant: Tenant, teams: list[Team]) -> list[tuple[str, str]]:
    """Whom an inbox row can be assigned to: the active console users, the online WhatsApp agents and the
    teams (``team:<uuid>``; the template says "Team: <name>")."""
    agents = (
        await session.exec(
            select(HumanAgent)
            .where(HumanAgent.tenant_id == tenant.id, HumanAgent.status == AgentStatus.online.value)
            .order_by(col(HumanAgent.name))
        )
    ).all()
    users = (
        await session.exec(
            select(ConsoleUser)
            .where(ConsoleUser.tenant_id == tenant.id, col(ConsoleUser.is_active).is_(True))
            .order_by(col(ConsoleUser.email))
        )
    ).all()
    return (
        [(f"user:{u.id}", u.name or u.email) for u in users]
        + [(f"agent:{a.id}", f"{a.name} (WhatsApp)") for a in agents]
        + [(f"team:{t.id}", t.name) for t in teams]
    )


async def model_outage(session: Any, redis: Any, tenant_id: Any) -> dict[str, Any] | None:
    """What the console's banner says while the tenant's model is failing: ``{"since": datetime (UTC),
    "waiting": conversations waiting for it, "conversations": their ids}``, or ``None`` (answering)."""
    from datetime import UTC, datetime

    from switchboard.inbound.resume import waiting_conversations
    from switchboard.llm.health import tenant_health

    health = await tenant_health(redis, tenant_id) if redis is not None else []
    waiting = await waiting_conversations(session, tenant_id)
    if not health and not waiting:
        return None
    since = datetime.fromtimestamp(min(h.since for h in health), UTC) if health else None
    return {"since": since, "waiting": len(waiting), "conversations": waiting}


@pages_router.get("/t/{slug}/inbox", response_class=HTMLResponse)
async def inbox(
    request: Request,
    page: InboxPage,
    session: SessionDep,
    resources: ResourcesDep,
    channel: str | None = None,
    mode: str | None = None,
    assigned: str | None = None,
    unread: bool = False,
    q: Annotated[str | None, Query(max_length=200)] = None,
    team: Annotated[str | None, Query(max_length=40)] = None,
) -> Response:
    """Conversations across channels, newest activity first; the list refreshes itself on live events."""
    filters = _filters(channel, mode, assigned, unread, q, team)
    rows = await list_inbox(session, tenant_id=page.tenant.id, viewer_id=page.user.id, filters=filters)
    teams = await _teams(session, page.tenant)
    # a tenant with no conversation at all: the empty inbox points its admins to the setup checklist
    unfiltered = filters == _filters(None, None, None, False, None)
    new_tenant = not rows and unfiltered and page.role in ADMIN_ROLES
    template = "_inbox_rows.html" if request.headers.get("HX-Request") else "inbox.html"
    outage = await model_outage(session, resources.redis, page.tenant.id)
    return render(
        request,
        template,
        tenant=page.tenant,
        rows=rows,
        filters=filters,
        channels=channel_names(),
        modes=[m.value for m in Mode],
        assignees=await _assignees(session, page.tenant),
        active="inbox",
        assignable=await _assignable(session, page.tenant, teams),
        teams=teams,
        flash=request.query_params.get("flash"),
        new_tenant=new_tenant,
        outage=outage,
        waiting=outage["conversations"] if outage else set(),
    )


@pages_router.get("/t/{slug}/unread", response_class=HTMLResponse)
async def unread_badge(request: Request, page: InboxPage, session: SessionDep) -> Response:
    """The navigation's unread badge: how many open conversations have customer messages the viewer has
    not opened (``data-count``; the page title shows it too). Reloaded on every live event."""
    count = await unread_total(session, tenant_id=page.tenant.id, viewer_id=page.user.id)
    return render(request, "_unread.html", tenant=page.tenant, count=count)


@pages_router.get("/t/{slug}/events")
async def events(
    request: Request, page: InboxPage, resources: ResourcesDep, sessions: SessionsDep, settings: SettingsDep
) -> Response:
    """Server-sent events of the tenant (``conversation`` events: ``{"conversation_id", "kind"}``), until
    the session that opened them ends (a last ``ended`` event)."""
    assert resources.redis is not None
    cookie = request.cookies.get(SESSION_COOKIE)
    session_id, tenant_id = page.info.session_id, page.tenant.id

    async def session_alive() -> bool:
        async with sessions() as session:
            info = await load_session(session, cookie)
        return info is not None and info.session_id == session_id and may_access_tenant(info.user, tenant_id)

    return live_events(
        request,
        resources.redis,
        tenant_id=tenant_id,
        user_id=page.user.id,
        session_alive=session_alive,
        check_s=settings.console_stream_check_s,
    )
