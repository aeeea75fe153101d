"""Console: tools and channels of a tenant (admins).

* **Tools** (``/t/{slug}/tools``): the toolbox with enable/disable and per-tool configuration (JSON),
  through :mod:`switchboard.tools.toolbox` (``PUT /v1/admin/tenants/{slug}/tools/{name}`` is the same).
* **Channels** (``/t/{slug}/channels``): :mod:`switchboard.console.channel_pages` (its menu entry is
  registered here, to keep the menu's order).

The People page is :mod:`switchboard.console.people_pages`.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, HTTPException, Request, status
from fastapi.responses import HTMLResponse, Response

from switchboard.api.access import ADMIN_ROLES
from switchboard.api.deps import SessionDep
from switchboard.console.app import register_nav, render
from switchboard.console.deps import PageContext, page_access
from switchboard.i18n import N_
from switchboard.observability import get_logger
from switchboard.tools.toolbox import UnknownTool, configure_tool, list_assignments, set_enabled

__all__ = ["operations_pages_router"]

log = get_logger(__name__)
operations_pages_router = APIRouter(include_in_schema=False)
AdminPage = Annotated[PageContext, Depends(page_access(ADMIN_ROLES))]
register_nav("tools", N_("Tools"), "/tools", ADMIN_ROLES)
register_nav("channels", N_("Channels"), "/channels", ADMIN_ROLES)


async def _tools_page(
    request: Request, page: PageContext, session: Any, *, error: str | None = None, code: int = 200
) -> Response:
    tools = await list_assignments(session, page.tenant.id)
    return render(
        request, "tools.html", status_code=code, tenant=page.tenant, tools=tools, error=error, active="tools"
    )


@operations_pages_router.get("/t/{slug}/tools", response_class=HTMLResponse)
async def tools_page(request: Request, page: AdminPage, session: SessionDep) -> Response:
    return await _tools_page(request, page, session)


@operations_pages_router.post("/t/{slug}/tools/{tool_name}", response_class=HTMLResponse)
async def tools_update(
    request: Request,
    tool_name: str,
    page: AdminPage,
    session: SessionDep,
    enabled: Annotated[str | None, Form()] = None,
    custom_config: Annotated[str | None, Form(max_length=20_000)] = None,
) -> Response:
    """Enable/disable (``enabled``: on/off) and/or replace the configuration (``custom_config``: a JSON object)."""
    actor = f"console:{page.user.email}"
    try:
        if custom_config is not None and custom_config.strip():
            try:
                config = json.loads(custom_config)
            except json.JSONDecodeError as exc:
                return await _tools_page(
                    request, page, session, error=f"{tool_name}: not JSON ({exc})", code=422
                )
            if not isinstance(config, dict):
                return await _tools_page(
                    request, page, session, error=f"{tool_name}: the configuration is a JSON object", code=422
                )
            await configure_tool(session, page.tenant.id, tool_name, config)
        if enabled in ("on", "off"):
            await set_enabled(session, page.tenant.id, tool_name, enabled=enabled == "on", actor=actor)
    except UnknownTool as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
    await session.commit()
    return await _tools_page(request, page, session)
