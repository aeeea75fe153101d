"""Admin API for tools and business data (mounted by the orchestrator; ``ADMIN_TOKEN`` bearer auth).

* ``GET  /v1/admin/tenants/{slug}/tools`` — the tenant's toolbox
* ``PUT  /v1/admin/tenants/{slug}/tools/{tool_name}`` — enable/disable and/or replace ``custom_config``
* ``POST /v1/admin/tenants/{slug}/data/{kind}`` — import a CSV (``products``, ``orders``, ``stores``, ``slots``)
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import HTTPException, Query, Request, status
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from switchboard.api.deps import SessionDep, TenantDep
from switchboard.api.routers import tenant_admin_router
from switchboard.body_limit import BodyTooLarge, allow_body
from switchboard.tools.importers import IMPORT_KINDS, MAX_IMPORT_BYTES, ImportReport, import_csv
from switchboard.tools.toolbox import (
    ToolAssignment,
    UnknownTool,
    configure_tool,
    list_assignments,
    set_enabled,
)

__all__ = ["admin_tools_router"]

admin_tools_router = tenant_admin_router(tags=["admin: tools"])


class ToolUpdate(BaseModel):
    """Change one tool of a tenant; omitted fields stay as they are."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool | None = None
    custom_config: dict[str, Any] | None = None
    """Replaces the tool's configuration (passed to the tool as ``tool_config``), e.g.
    ``{"needs_approval": true}`` for a write, ``{"limit": 3}`` for a search."""


@admin_tools_router.get("/tools", summary="List a tenant's tools (enabled or not) and their configuration")
async def list_tools(tenant: TenantDep, session: SessionDep) -> list[ToolAssignment]:
    return await list_assignments(session, tenant.id)


@admin_tools_router.put(
    "/tools/{tool_name}",
    summary="Enable, disable or configure one tool for a tenant",
    description="A disabled tool is not shown to the tenant's model and a call to it fails closed (Forbidden).",
)
async def update_tool(
    tool_name: str, update: ToolUpdate, tenant: TenantDep, session: SessionDep
) -> ToolAssignment:
    try:
        result = None
        if update.custom_config is not None:
            result = await configure_tool(session, tenant.id, tool_name, update.custom_config)
        if update.enabled is not None:
            result = await set_enabled(session, tenant.id, tool_name, enabled=update.enabled)
    except UnknownTool as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
    if result is None:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT, "nothing to change: send enabled and/or custom_config"
        )
    await session.commit()
    return result


@admin_tools_router.post(
    "/data/{kind}",
    summary="Import business data from CSV (products, orders, stores, slots)",
    description="Send the CSV as the request body (`Content-Type: text/csv`). Every row is validated; the "
    "answer lists rejected rows with line numbers and reasons. By default a file with any rejected row "
    "imports nothing (422); `skip_invalid=true` imports the valid rows. Rows are upserts, so re-sending a "
    "file changes nothing.",
    responses={422: {"model": ImportReport, "description": "rejected rows; nothing was imported"}},
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "The CSV file itself (UTF-8, header row first; columns per kind: "
            "docs/tools.md#business-data). At most 10 MB (MAX_IMPORT_BYTES).",
            "content": {
                "text/csv": {
                    "schema": {"type": "string", "format": "binary"},
                    "example": "sku,name,description,price,currency,stock\n"
                    "FLT-20,Replacement filter FLT 20,Pack of 2,12.50,USD,120\n",
                }
            },
        }
    },
)
async def import_data(
    kind: str,
    request: Request,
    tenant: TenantDep,
    session: SessionDep,
    skip_invalid: Annotated[
        bool, Query(description="Import the valid rows even if some are rejected.")
    ] = False,
) -> ImportReport:
    if kind not in IMPORT_KINDS:
        raise HTTPException(
            status.HTTP_404_NOT_FOUND, f"unknown kind {kind!r}: use {', '.join(IMPORT_KINDS)}"
        )
    allow_body(request, MAX_IMPORT_BYTES + 1)  # the caller is known (router dependency): read up to the limit
    try:
        body = await request.body()
    except BodyTooLarge:
        raise HTTPException(status.HTTP_413_CONTENT_TOO_LARGE, f"limit is {MAX_IMPORT_BYTES} bytes") from None
    if len(body) > MAX_IMPORT_BYTES:
        raise HTTPException(status.HTTP_413_REQUEST_ENTITY_TOO_LARGE, f"limit is {MAX_IMPORT_BYTES} bytes")
    try:
        report = await import_csv(
            session, tenant_id=tenant.id, kind=kind, data=body, skip_invalid=skip_invalid, actor="admin:api"
        )
    except ValueError as exc:
        raise HTTPException(status.HTTP_400_BAD_REQUEST, str(exc)) from None
    await session.commit()
    if not report.committed:
        return JSONResponse(report.model_dump(mode="json"), status_code=status.HTTP_422_UNPROCESSABLE_CONTENT)  # type: ignore[return-value]
    return report
