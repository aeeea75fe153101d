"""Router builders shared by the admin API."""

from __future__ import annotations

from collections.abc import Iterable

from fastapi import APIRouter, Depends

from switchboard.api.access import ADMIN_ROLES, tenant_access
from switchboard.api.deps import TENANT_NOT_FOUND_RESPONSE
from switchboard.db.models import Role

__all__ = ["ADMIN_TENANT_PREFIX", "tenant_admin_router"]

ADMIN_TENANT_PREFIX = "/v1/admin/tenants/{slug}"
"""Every admin route about one tenant lives under this prefix (``{slug}``: slug or id, see ``TenantDep``)."""

_ACCESS_RESPONSES = {
    401: {"description": "No ADMIN_TOKEN, user API token (`sbu_...`) or console session"},
    403: {"description": "The user's role may not do this, or a session request without its CSRF token"},
}


def tenant_admin_router(path: str = "", *, tags: list[str], roles: Iterable[Role] = ADMIN_ROLES) -> APIRouter:
    """A router for ``/v1/admin/tenants/{slug}<path>``.

    Callers: ``ADMIN_TOKEN`` (every tenant), or a console user (API token or session) of that tenant
    whose role is in ``roles`` (default: platform and tenant admins); see :mod:`switchboard.api.access`.
    401/403 and the unknown-tenant 404 are documented on every route; routes take the tenant as
    ``tenant: TenantDep`` and the caller as ``principal: PrincipalDep``.
    """
    return APIRouter(
        prefix=ADMIN_TENANT_PREFIX + path,
        tags=list(tags),
        dependencies=[Depends(tenant_access(roles))],
        responses={**TENANT_NOT_FOUND_RESPONSE, **_ACCESS_RESPONSES},
    )
