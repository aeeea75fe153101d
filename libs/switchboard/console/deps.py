"""Who is looking at a console page, as FastAPI dependencies (role and tenant checked on every route).

* :data:`CurrentUserDep`: the logged-in user (:class:`~switchboard.users.SessionInfo`) or
  :class:`LoginRequired` (the app answers a page request with a redirect to ``/login``, an htmx request
  with ``HX-Redirect``, anything else with 401).
* :func:`page_access` ``(roles)``: the user, the tenant of the path's ``{slug}`` (404 for a tenant the
  user may not see, like an unknown one) and the role check (403); unsafe methods also need the
  session's CSRF token (form field ``csrf_token`` or header ``X-CSRF-Token``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Depends, HTTPException, Path, Request, status

from switchboard.api.deps import SessionsDep
from switchboard.db.models import Role, Tenant
from switchboard.errors import SwitchboardError, TenantNotFound
from switchboard.observability import get_logger
from switchboard.tenants import get_tenant
from switchboard.users import (
    CSRF_FIELD,
    CSRF_HEADER,
    SESSION_COOKIE,
    SessionInfo,
    csrf_matches,
    load_session,
    may_access_tenant,
)

__all__ = [
    "LoginRequired",
    "PageContext",
    "CurrentUserDep",
    "current_user",
    "page_access",
    "platform_access",
    "account_access",
    "check_csrf",
    "cross_site_reason",
]

log = get_logger(__name__)
_UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}


class LoginRequired(SwitchboardError):
    """No live console session: the page asks the person to log in."""


async def current_user(request: Request, sessions: SessionsDep) -> SessionInfo:
    """The logged-in user's session, or :class:`LoginRequired`.

    Reads in a short session of its own: a route that streams (server-sent events) holds no database
    connection for as long as the page stays open.
    """
    async with sessions() as session:
        info = await load_session(session, request.cookies.get(SESSION_COOKIE))
    if info is None:
        raise LoginRequired("log in first")
    request.state.console = info
    return info


CurrentUserDep = Annotated[SessionInfo, Depends(current_user)]


async def check_csrf(request: Request, info: SessionInfo) -> None:
    """403 when an unsafe request carries neither the form field nor the header with the session's token."""
    if request.method not in _UNSAFE:
        return
    given = request.headers.get(CSRF_HEADER)
    if not given and request.headers.get("content-type", "").startswith(
        ("application/x-www-form-urlencoded", "multipart/form-data")
    ):
        given = (await request.form()).get(CSRF_FIELD)  # cached: the route reads the same form
    if not csrf_matches(info.csrf_token, given if isinstance(given, str) else None):
        log.warning("console_csrf_rejected", path=request.url.path, user_id=str(info.user.id))
        raise HTTPException(
            status.HTTP_403_FORBIDDEN, "This form has expired: reload the page and try again."
        )


_SAME_SITE_FETCH = {"same-origin", "none"}
"""``Sec-Fetch-Site`` values of a request the console's own page (or the person typing the address) made."""


def cross_site_reason(request: Request) -> str | None:
    """Why a form post without a session (the login form) comes from another site, or ``None``.

    Browsers say where a post comes from: ``Sec-Fetch-Site`` (anything but ``same-origin`` / ``none`` is
    refused) and ``Origin`` (its host and port must be the ``Host`` the request was sent to; ``null``,
    from sandboxed frames and some redirects, is refused). A request with neither header is not a
    browser's cross-site post (every current browser sends ``Origin`` with one) and passes: scripts
    and the CLI's tests log in that way.
    """
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site.strip().lower() not in _SAME_SITE_FETCH:
        return f"sec-fetch-site={fetch_site[:40]}"
    origin = request.headers.get("origin")
    if origin is None:
        return None
    host = (request.headers.get("host") or "").strip().lower()
    try:
        parts = urlsplit(origin.strip())
        origin_host = (parts.netloc or "").lower()
        default_port = {"http": 80, "https": 443}.get(parts.scheme)
        if parts.port is not None and parts.port == default_port:
            origin_host = (parts.hostname or "").lower()
    except ValueError:
        return "origin unreadable"
    if host.endswith((":80", ":443")):
        host = host.rsplit(":", 1)[0]
    if not origin_host or origin_host != host:
        return f"origin={origin[:100]}"
    return None


@dataclass(frozen=True)
class PageContext:
    """What a tenant page knows about its viewer."""

    info: SessionInfo
    tenant: Tenant

    @property
    def user(self):  # noqa: ANN201 (ConsoleUser; kept short for templates)
        return self.info.user

    @property
    def role(self) -> Role:
        return Role(self.info.user.role)


def page_access(roles: Iterable[Role]) -> Callable[..., Awaitable[PageContext]]:
    """Dependency for routes under ``/t/{slug}/...``: logged in, may see that tenant, role in ``roles``,
    CSRF token on unsafe methods."""
    allowed = frozenset(roles)

    async def check(
        request: Request,
        slug: Annotated[str, Path(description="Tenant slug (or id).")],
        info: CurrentUserDep,
        sessions: SessionsDep,
    ) -> PageContext:
        try:
            async with sessions() as session:  # short: see current_user
                tenant = await get_tenant(session, slug)
        except TenantNotFound:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"tenant {slug!r} not found") from None
        if not may_access_tenant(info.user, tenant.id):
            log.warning("console_other_tenant", path=request.url.path, user_id=str(info.user.id))
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"tenant {slug!r} not found")
        if Role(info.user.role) not in allowed:
            log.warning("console_role_refused", path=request.url.path, role=info.user.role)
            raise HTTPException(status.HTTP_403_FORBIDDEN, "Your role may not open this page.")
        await check_csrf(request, info)
        return PageContext(info=info, tenant=tenant)

    check.roles = allowed  # type: ignore[attr-defined]  # read by the route walk test (tests/console)
    return check


async def platform_access(request: Request, info: CurrentUserDep) -> SessionInfo:
    """Dependency for platform pages (no tenant in the path): platform admins only, CSRF on unsafe methods."""
    if info.user.role != Role.platform_admin.value:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "Only platform admins may open this page.")
    await check_csrf(request, info)
    return info


platform_access.roles = frozenset({Role.platform_admin})  # type: ignore[attr-defined]


async def account_access(request: Request, info: CurrentUserDep) -> SessionInfo:
    """Dependency for the signed-in person's own pages (``/account``): any role, CSRF on unsafe methods."""
    await check_csrf(request, info)
    return info


account_access.roles = frozenset(Role)  # type: ignore[attr-defined]
