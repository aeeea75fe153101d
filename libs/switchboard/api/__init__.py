"""HTTP API building blocks shared by services: authentication dependencies."""

from switchboard.api.auth import AdminAuth, ServiceAuth, require_admin_token, require_service_token

__all__ = ["AdminAuth", "ServiceAuth", "require_admin_token", "require_service_token"]
