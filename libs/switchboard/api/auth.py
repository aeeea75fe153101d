"""Bearer-token authentication for service-to-service calls and the admin API.

Tokens come from settings (``SERVICE_TOKEN``, ``ADMIN_TOKEN``) or are generated into
``DATA_DIR/secrets`` (see :class:`switchboard.settings.Settings`), read through
:data:`~switchboard.api.deps.SettingsDep`. Comparison is constant-time (``hmac.compare_digest``).
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from switchboard.api.deps import SettingsDep
from switchboard.observability import get_logger

__all__ = ["require_service_token", "require_admin_token", "ServiceAuth", "AdminAuth"]

log = get_logger(__name__)
_bearer = HTTPBearer(auto_error=False)


def _check(
    request: Request, credentials: HTTPAuthorizationCredentials | None, expected: str, realm: str
) -> None:
    if credentials is None or not hmac.compare_digest(credentials.credentials.encode(), expected.encode()):
        log.warning("rejected request: missing or wrong bearer token", realm=realm, path=request.url.path)
        raise HTTPException(
            status_code=status.HTTP_401_UNAUTHORIZED,
            detail=f"missing or invalid bearer token ({realm})",
            headers={"WWW-Authenticate": "Bearer"},
        )


BearerDep = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


async def require_service_token(request: Request, credentials: BearerDep, settings: SettingsDep) -> None:
    """Dependency: ``Authorization: Bearer <SERVICE_TOKEN>`` or 401."""
    _check(request, credentials, settings.secret("service_token"), "service")


async def require_admin_token(request: Request, credentials: BearerDep, settings: SettingsDep) -> None:
    """Dependency: ``Authorization: Bearer <ADMIN_TOKEN>`` or 401."""
    _check(request, credentials, settings.secret("admin_token"), "admin")


ServiceAuth = Depends(require_service_token)
AdminAuth = Depends(require_admin_token)
