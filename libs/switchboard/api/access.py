"""Who may call the admin API about one tenant: ``ADMIN_TOKEN``, a user's API token, or a console session.

Every route under ``/v1/admin/tenants/{slug}`` (:func:`switchboard.api.routers.tenant_admin_router`)
depends on :func:`tenant_access`, which accepts, in this order:

1. ``Authorization: Bearer <ADMIN_TOKEN>``: platform-admin access to every tenant (the CLI, scripts).
2. ``Authorization: Bearer sbu_...``: a console user's API token, acting with that user's role and tenant.
3. The console's session cookie (a logged-in browser): that user's role and tenant; a request that
   changes something (POST, PUT, PATCH, DELETE) must also carry the session's CSRF token in
   ``X-CSRF-Token``.

Nothing of these: 401. A user of another tenant: 404, the same answer as an unknown tenant (nobody
learns which tenants exist). A role the route does not allow (an ``agent`` on a settings route): 403.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, HTTPException, Path, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from switchboard.api.deps import SessionDep, SettingsDep, tenant_not_found
from switchboard.db.models import ConsoleUser, Role, Tenant
from switchboard.errors import TenantNotFound
from switchboard.observability import get_logger
from switchboard.tenants import get_tenant
from switchboard.users import (
    CSRF_HEADER,
    SESSION_COOKIE,
    csrf_matches,
    load_session,
    may_access_tenant,
    user_for_api_token,
)

__all__ = ["ADMIN_ROLES", "INBOX_ROLES", "Principal", "tenant_access", "PrincipalDep"]

log = get_logger(__name__)
_bearer = HTTPBearer(auto_error=False)

ADMIN_ROLES: tuple[Role, ...] = (Role.platform_admin, Role.tenant_admin)
"""Roles allowed on a tenant's configuration (settings, knowledge, tools, channels, people)."""
INBOX_ROLES: tuple[Role, ...] = (Role.platform_admin, Role.tenant_admin, Role.agent)
"""Roles allowed on the inbox: conversations, takeover, replies, approvals."""
_UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}


@dataclass(frozen=True)
class Principal:
    """Who is calling: the admin token (``user`` is ``None``) or a console user."""

    role: Role
    user: ConsoleUser | None = None
    via: str = "admin_token"
    """``admin_token``, ``api_token`` or ``session``."""

    @property
    def label(self) -> str:
        """For audit rows: ``admin`` or ``console_user:<id>``."""
        return f"console_user:{self.user.id}" if self.user else "admin"


async def _principal(
    request: Request,
    credentials: HTTPAuthorizationCredentials | None,
    session: SessionDep,
    settings: SettingsDep,
) -> Principal:
    if credentials is not None:
        given = credentials.credentials
        if hmac.compare_digest(given.encode(), settings.secret("admin_token").encode()):
            return Principal(role=Role.platform_admin)
        user = await user_for_api_token(session, given)
        if user is not None:
            await session.commit()  # last_used_at
            return Principal(role=Role(user.role), user=user, via="api_token")
    else:
        info = await load_session(session, request.cookies.get(SESSION_COOKIE))
        if info is not None:
            if request.method in _UNSAFE and not csrf_matches(
                info.csrf_token, request.headers.get(CSRF_HEADER)
            ):
                log.warning("admin_api_csrf_rejected", path=request.url.path, user_id=str(info.user.id))
                raise HTTPException(status.HTTP_403_FORBIDDEN, f"missing or wrong {CSRF_HEADER} header")
            return Principal(role=Role(info.user.role), user=info.user, via="session")
    log.warning("rejected request: missing or wrong credentials", realm="admin", path=request.url.path)
    raise HTTPException(
        status.HTTP_401_UNAUTHORIZED,
        "missing or invalid bearer token (admin), API token or console session",
        headers={"WWW-Authenticate": "Bearer"},
    )


def tenant_access(roles: Iterable[Role] = ADMIN_ROLES) -> Callable[..., Awaitable[Principal]]:
    """A dependency checking the caller (see the module docstring) against the path's ``{slug}`` tenant
    and ``roles``; it returns the :class:`Principal` and leaves it in ``request.state.principal``."""
    allowed = frozenset(roles)

    async def check(
        request: Request,
        slug: Annotated[str, Path(description="Tenant slug (or id).")],
        session: SessionDep,
        settings: SettingsDep,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> Principal:
        principal = await _principal(request, credentials, session, settings)
        if principal.user is not None:
            try:
                tenant: Tenant = await get_tenant(session, slug)
            except TenantNotFound:
                raise tenant_not_found(slug) from None
            if not may_access_tenant(principal.user, tenant.id):
                log.warning("admin_api_other_tenant", path=request.url.path, user_id=str(principal.user.id))
                raise tenant_not_found(slug)
            if principal.role not in allowed:
                log.warning("admin_api_role_refused", path=request.url.path, role=principal.role.value)
                raise HTTPException(
                    status.HTTP_403_FORBIDDEN, f"the {principal.role.value} role may not do this"
                )
        request.state.principal = principal
        return principal

    check.roles = allowed  # type: ignore[attr-defined]  # read by the route walk test (tests/console)
    return check


def _current(request: Request) -> Principal:
    principal = getattr(request.state, "principal", None)
    if principal is None:  # a route outside tenant_admin_router: a programming error
        raise HTTPException(status.HTTP_500_INTERNAL_SERVER_ERROR, "no access check ran for this route")
    return principal


PrincipalDep = Annotated[Principal, Depends(_current)]
"""The caller as :func:`tenant_access` (the router's dependency) established it."""
