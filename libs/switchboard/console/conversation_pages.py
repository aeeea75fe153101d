"""The conversation page: the thread, what the AI did per turn, and the person's actions.

Every action posts a form (CSRF token included) and runs the same function as its admin API
equivalent (:mod:`switchboard.console.actions`); the page then shows the fresh state.
"""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request, status
from fastapi.responses import HTMLResponse, Response

from switchboard.api.access import INBOX_ROLES
from switchboard.api.deps import SessionDep
from switchboard.console.app import render
from switchboard.console.deps import PageContext, page_access
from switchboard.console.inbox import conversation_view, mark_read

__all__ = ["conversation_pages_router"]

conversation_pages_router = APIRouter(include_in_schema=False)
InboxPage = Annotated[PageContext, Depends(page_access(INBOX_ROLES))]


async def _view_or_404(session: SessionDep, page: PageContext, conversation_id: uuid.UUID):  # noqa: ANN202
    view = await conversation_view(session, tenant_id=page.tenant.id, conversation_id=conversation_id)
    if view is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "conversation not found")
    return view


@conversation_pages_router.get("/t/{slug}/conversations/{conversation_id}", response_class=HTMLResponse)
async def conversation_page(
    request: Request, conversation_id: uuid.UUID, page: InboxPage, session: SessionDep
) -> Response:
    view = await _view_or_404(session, page, conversation_id)
    await mark_read(session, tenant_id=page.tenant.id, user_id=page.user.id, conversation_id=conversation_id)
    await session.commit()
    partial = request.headers.get("HX-Request") and request.headers.get("HX-Target") == "conversation"
    return render(
        request, "_conversation.html" if partial else "conversation.html",
        tenant=page.tenant, view=view, active="inbox", flash=request.query_params.get("flash"),
    )  # fmt: skip
