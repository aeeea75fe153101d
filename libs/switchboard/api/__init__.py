"""HTTP API building blocks shared by services: dependencies (:mod:`.deps`) and bearer-token auth."""

from switchboard.api.auth import AdminAuth, ServiceAuth, require_admin_token, require_service_token
from switchboard.api.deps import (
    TENANT_NOT_FOUND_RESPONSE,
    ResourcesDep,
    SessionDep,
    SessionsDep,
    SettingsDep,
    TenantDep,
    tenant_not_found,
)

__all__ = [
    "AdminAuth",
    "ServiceAuth",
    "require_admin_token",
    "require_service_token",
    "ResourcesDep",
    "SessionDep",
    "SessionsDep",
    "SettingsDep",
    "TenantDep",
    "TENANT_NOT_FOUND_RESPONSE",
    "tenant_not_found",
]
