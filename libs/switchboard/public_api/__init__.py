"""The public API's foundation (``/api/v1``): tenant API keys with scopes, one error shape, pagination.

How a router declares its routes (each route says its scope; nothing else is needed)::

    from typing import Annotated
    from switchboard.api.deps import SessionDep
    from switchboard.public_api import ApiCaller, ApiProblem, Page, public_router, require_scope

    router = public_router("/templates", tags=["templates"])

    @router.get("", operation_id="listTemplates", response_model=Page[TemplateOut], summary="List templates")
    async def list_templates(
        caller: Annotated[ApiCaller, require_scope("messages:write")], session: SessionDep,
        limit: LimitQuery = 50, cursor: CursorQuery = None,
    ) -> Page[TemplateOut]:
        rows, next_cursor = await keyset_page(session, select(Template).where(
            Template.tenant_id == caller.tenant.id), Template, limit=limit, cursor=cursor)
        ...
        raise ApiProblem(404, "not_found", "template not found")  # any error: a problem

* :mod:`~switchboard.public_api.auth`: :func:`require_scope` (key → tenant, scope, rate limit),
  :class:`ApiCaller`. Keys themselves (create, list, revoke) live in :mod:`switchboard.users.tokens`.
* :mod:`~switchboard.public_api.problems`: :class:`ApiProblem`, RFC 9457 answers, the handlers a service
  installs (:func:`install_problem_errors`).
* :mod:`~switchboard.public_api.openapi`: the one OpenAPI document of ``/api/v1`` and its Swagger UI.
* :mod:`~switchboard.public_api.pagination`: :class:`Page`, ``limit``/``cursor`` query parameters,
  :func:`keyset_page`.

A service serving ``/api/v1`` includes its routers, calls :func:`install_problem_errors` after its own
error handlers and :func:`mount_public_openapi`. Operation ids are short camelCase verbs (``listConversations``); :func:`public_router`
documents the problem answers on every route.
"""

from __future__ import annotations

from fastapi import APIRouter

from switchboard.public_api.auth import RATE_WINDOW_S, ApiCaller, require_scope, scope_of
from switchboard.public_api.openapi import (
    DOCS_PATH,
    OPENAPI_PATH,
    mount_public_openapi,
    public_openapi,
    route_scopes,
)
from switchboard.public_api.pagination import (
    CursorQuery,
    LimitQuery,
    Page,
    decode_cursor,
    encode_cursor,
    keyset_page,
)
from switchboard.public_api.problems import (
    API_PATH_PREFIX,
    PROBLEM_MEDIA_TYPE,
    PROBLEM_TITLES,
    ApiProblem,
    Problem,
    install_problem_errors,
    problem_response,
    problem_responses,
)

__all__ = [
    "API_PATH_PREFIX",
    "DOCS_PATH",
    "OPENAPI_PATH",
    "mount_public_openapi",
    "public_openapi",
    "route_scopes",
    "API_V1",
    "PROBLEM_MEDIA_TYPE",
    "PROBLEM_TITLES",
    "RATE_WINDOW_S",
    "ApiCaller",
    "ApiProblem",
    "CursorQuery",
    "LimitQuery",
    "Page",
    "Problem",
    "decode_cursor",
    "encode_cursor",
    "install_problem_errors",
    "keyset_page",
    "problem_response",
    "problem_responses",
    "public_router",
    "require_scope",
    "scope_of",
]

API_V1 = "/api/v1"
"""The public API's prefix."""


def public_router(path: str = "", *, tags: list[str]) -> APIRouter:
    """A router for ``/api/v1<path>`` whose routes document the problem answers (401, 403, 404, 422, 429)."""
    return APIRouter(prefix=API_V1 + path, tags=list(tags), responses=problem_responses(404))
