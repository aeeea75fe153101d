"""One OpenAPI document for the public API: ``GET /api/v1/openapi.json``, and ``/api/v1/docs`` to read it.

It holds every ``/api/v1`` route of the service (and nothing of its admin API or pages), with the
bearer scheme of tenant API keys, the :class:`~switchboard.public_api.problems.Problem` schema of every
error, and a relative server (``/``: the host the document was fetched from, e.g. behind the proxy).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.routing import APIRoute

from switchboard.docs_ui import STATIC_PREFIX, SWAGGER_UI_VERSION
from switchboard.public_api.auth import scope_of
from switchboard.public_api.problems import Problem

__all__ = ["OPENAPI_PATH", "DOCS_PATH", "mount_public_openapi", "public_openapi", "route_scopes"]

OPENAPI_PATH = "/api/v1/openapi.json"
DOCS_PATH = "/api/v1/docs"

_DESCRIPTION = (
    "The API for a business's own systems (a shop, a CRM): conversations, customers, knowledge, leads, "
    "feedback and event webhooks. Authenticate with a tenant API key: `Authorization: Bearer sbk_...` "
    "(created in the console under API keys, or `switchboard api-keys create`); each route needs one "
    "scope. Lists are cursor-paginated (`limit`, `cursor`, `next_cursor`). Every error is "
    "`application/problem+json` (RFC 9457) with a stable `code`."
)


def public_openapi(app: FastAPI, *, version: str) -> dict[str, Any]:
    """The OpenAPI document of ``app``'s ``/api/v1`` routes (built once per app, then cached)."""
    cached: dict[str, Any] | None = getattr(app.state, "public_openapi", None)
    if cached is not None:
        return cached
    full = get_openapi(
        title="Switchboard API",
        version=version,
        openapi_version="3.1.0",
        description=_DESCRIPTION,
        routes=app.routes,
        servers=[{"url": "/", "description": "This Switchboard"}],
    )
    paths = {path: ops for path, ops in full["paths"].items() if path.startswith("/api/v1/")}
    scopes = route_scopes(app.routes)
    for path, operations in paths.items():
        for method, operation in operations.items():
            scope = scopes.get((method.upper(), path))
            if scope:
                operation["x-scope"] = scope
                operation["description"] = (
                    operation.get("description", "") + f"\n\nScope: `{scope}`."
                ).strip()
    document = {**full, "paths": paths, "components": _used_components(full.get("components", {}), paths)}
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault("Problem", Problem.model_json_schema(ref_template="#/components/schemas/{model}"))
    document["security"] = [{"apiKey": []}]
    app.state.public_openapi = document
    return document


def _refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["$ref"]} if isinstance(node.get("$ref"), str) else set()
        for value in node.values():
            found |= _refs(value)
        return found
    if isinstance(node, list):
        return set().union(*(_refs(item) for item in node)) if node else set()
    return set()


def _used_components(components: dict[str, Any], paths: dict[str, Any]) -> dict[str, Any]:
    """The schemas the public paths reach (directly or through other schemas), and the security schemes."""
    schemas: dict[str, Any] = components.get("schemas", {})
    prefix = "#/components/schemas/"
    wanted = {ref[len(prefix) :] for ref in _refs(paths) if ref.startswith(prefix)} | {"Problem"}
    kept: dict[str, Any] = {}
    while wanted:
        name = wanted.pop()
        if name in kept or name not in schemas:
            continue
        kept[name] = schemas[name]
        wanted |= {ref[len(prefix) :] for ref in _refs(schemas[name]) if ref.startswith(prefix)}
    schemes = components.get("securitySchemes", {})
    return {"schemas": dict(sorted(kept.items())), "securitySchemes": {"apiKey": schemes["apiKey"]}}


def _api_routes(routes: Iterable[Any]) -> Iterator[APIRoute]:
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        elif hasattr(route, "original_router"):  # FastAPI's included router (its routes keep their paths)
            yield from _api_routes(route.original_router.routes)


def _scope_in(dependant: Any) -> str | None:
    for dependency in dependant.dependencies:
        scope = scope_of(dependency.call) if dependency.call else None
        if scope or (scope := _scope_in(dependency)):
            return scope
    return None


def route_scopes(routes: Iterable[Any]) -> dict[tuple[str, str], str]:
    """``(METHOD, path) → scope`` of every ``/api/v1`` route among ``routes`` (an app's or a router's)."""
    found: dict[tuple[str, str], str] = {}
    for route in _api_routes(routes):
        if route.path.startswith("/api/v1/"):
            scope = _scope_in(route.dependant)
            if scope:
                found.update({(method, route.path): scope for method in route.methods or ()})
    return found


def mount_public_openapi(app: FastAPI, *, version: str) -> None:
    """Serve :data:`OPENAPI_PATH` and :data:`DOCS_PATH` (the vendored Swagger UI; no CDN), unauthenticated."""

    @app.get(OPENAPI_PATH, include_in_schema=False)
    async def openapi_document() -> JSONResponse:
        return JSONResponse(public_openapi(app, version=version))

    base = f"{STATIC_PREFIX}/swagger-ui-{SWAGGER_UI_VERSION}"

    @app.get(DOCS_PATH, include_in_schema=False)
    async def openapi_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=OPENAPI_PATH,
            title="Switchboard API",
            swagger_js_url=f"{base}/swagger-ui-bundle.js",
            swagger_css_url=f"{base}/swagger-ui.css",
            swagger_favicon_url=f"{base}/favicon-32x32.png",
        )
