"""Who calls the public API: a tenant API key (``Authorization: Bearer sbk_...``) with the route's scope.

:func:`require_scope` is the dependency every ``/api/v1`` route declares. It looks the key up (every
request: a revoked or expired key is refused at once), loads its tenant, checks the scope, and counts
the request against the key's rate limit (``API_KEY_REQUESTS_PER_MINUTE``, a fixed one-minute window
in Redis). Refusals are problems: 401 ``unauthorized``, 403 ``insufficient_scope``, 429
``rate_limited`` with ``Retry-After`` (seconds until the window ends).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from switchboard.api.deps import ResourcesDep, SessionDep, SettingsDep
from switchboard.db.models import Tenant, TenantApiKey
from switchboard.observability import get_logger
from switchboard.public_api.problems import ApiProblem
from switchboard.users import API_SCOPES, key_for_token

__all__ = ["ApiCaller", "RATE_WINDOW_S", "require_scope", "scope_of"]

log = get_logger(__name__)
_bearer = HTTPBearer(auto_error=False, scheme_name="apiKey", description="A tenant API key: `sbk_...`")

RATE_WINDOW_S = 60
"""The rate limit's window (seconds)."""


@dataclass(frozen=True)
class ApiCaller:
    """The caller of a public API route: the key and its tenant (every query filters on ``tenant.id``)."""

    tenant: Tenant
    key: TenantApiKey


async def _count_request(redis: Any, key_id: str, limit: int) -> int | None:
    """Count one request of the key; seconds to wait when it is past ``limit`` in this window, else ``None``."""
    now = time.time()
    window = int(now // RATE_WINDOW_S)
    counter = f"public_api:rate:{key_id}:{window}"
    pipe = redis.pipeline(transaction=False)
    pipe.incr(counter)
    pipe.expire(counter, RATE_WINDOW_S + 5)
    count, _ = await pipe.execute()
    if int(count) <= limit:
        return None
    return max(1, int((window + 1) * RATE_WINDOW_S - now + 0.999))


def require_scope(scope: str) -> Any:
    """The dependency (``Depends(...)``) of a route allowed to keys with ``scope`` (a key of
    :data:`~switchboard.users.tokens.API_SCOPES`); it gives the :class:`ApiCaller`::

        caller: Annotated[ApiCaller, require_scope("conversations:read")]

    Raises ``ValueError`` at import time for an unknown scope.
    """
    if scope not in API_SCOPES:
        raise ValueError(f"unknown scope {scope!r}")

    async def check(
        request: Request,
        session: SessionDep,
        settings: SettingsDep,
        resources: ResourcesDep,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> ApiCaller:
        key = await key_for_token(session, credentials.credentials) if credentials else None
        if key is None:
            log.warning("public_api_unauthorized", path=request.url.path)
            raise ApiProblem(
                401,
                "unauthorized",
                "send a valid API key: Authorization: Bearer sbk_...",
                headers={"WWW-Authenticate": "Bearer"},
            )
        if scope not in key.scopes:
            log.warning("public_api_scope_refused", path=request.url.path, key_id=str(key.id), scope=scope)
            raise ApiProblem(403, "insufficient_scope", f"this needs an API key with the scope {scope}")
        wait = await _count_request(resources.redis, str(key.id), settings.api_key_requests_per_minute)
        if wait is not None:
            log.warning("public_api_rate_limited", key_id=str(key.id))
            raise ApiProblem(
                429,
                "rate_limited",
                f"more than {settings.api_key_requests_per_minute} requests a minute with this key; "
                f"retry in {wait} s",
                headers={"Retry-After": str(wait)},
            )
        tenant = await session.get(Tenant, key.tenant_id)
        if tenant is None:  # the tenant was deleted (its keys go with it): as if the key were unknown
            raise ApiProblem(401, "unauthorized", "send a valid API key: Authorization: Bearer sbk_...")
        await session.commit()  # last_used_at
        caller = ApiCaller(tenant=tenant, key=key)
        request.state.api_caller = caller
        return caller

    check.scope = scope  # type: ignore[attr-defined]  # read by scope_of (the scope × route test, the docs)
    return Depends(check)


def scope_of(dependency: Callable[..., Awaitable[Any]]) -> str | None:
    """The scope a :func:`require_scope` dependency function checks (``None``: not one of them)."""
    return getattr(dependency, "scope", None)
