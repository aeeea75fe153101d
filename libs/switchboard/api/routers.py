"""Router builders shared by the admin API."""

from __future__ import annotations

from fastapi import APIRouter

from switchboard.api.auth import AdminAuth
from switchboard.api.deps import TENANT_NOT_FOUND_RESPONSE

__all__ = ["ADMIN_TENANT_PREFIX", "tenant_admin_router"]

ADMIN_TENANT_PREFIX = "/v1/admin/tenants/{slug}"
"""Every admin route about one tenant lives under this prefix (``{slug}``: slug or id, see ``TenantDep``)."""


def tenant_admin_router(path: str = "", *, tags: list[str]) -> APIRouter:
    """A router for ``/v1/admin/tenants/{slug}<path>``: ``ADMIN_TOKEN`` required (401 otherwise) and the
    unknown-tenant 404 documented on every route; routes take the tenant as ``tenant: TenantDep``."""
    return APIRouter(
        prefix=ADMIN_TENANT_PREFIX + path,
        tags=list(tags),
        dependencies=[AdminAuth],
        responses=TENANT_NOT_FOUND_RESPONSE,
    )
