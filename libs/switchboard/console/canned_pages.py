"""Console: the tenant's canned replies (``/t/{slug}/canned``): everyone in the inbox reads them (the
reply box's ``/`` picker offers them); admins add, change and delete them
(:mod:`switchboard.handoff.canned`)."""

from __future__ import annotations

import uuid
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from switchboard.api.access import ADMIN_ROLES, INBOX_ROLES
from switchboard.api.deps import SessionDep, SessionsDep
from switchboard.console.app import render
from switchboard.console.deps import PageContext, page_access
from switchboard.db.engine import session_scope
from switchboard.handoff.canned import (
    TEXT_MAX_CHARS,
    CannedReplyRefused,
    canned_replies,
    delete_canned,
    save_canned,
)

__all__ = ["canned_pages_router"]

canned_pages_router = APIRouter(include_in_schema=False)
InboxPage = Annotated[PageContext, Depends(page_access(INBOX_ROLES))]
AdminPage = Annotated[PageContext, Depends(page_access(ADMIN_ROLES))]


def _back(page: PageContext, **query: str) -> Response:
    return RedirectResponse(f"/t/{page.tenant.slug}/canned?{urlencode(query)}", status_code=303)


@canned_pages_router.get("/t/{slug}/canned", response_class=HTMLResponse)
async def canned_page(request: Request, page: InboxPage, session: SessionDep) -> Response:
    rows = await canned_replies(session, tenant_id=page.tenant.id)
    return render(
        request,
        "canned.html",
        tenant=page.tenant,
        rows=rows,
        active="inbox",
        may_edit=page.role in ADMIN_ROLES,
        message=request.query_params.get("message"),
        error=request.query_params.get("error"),
        text_max=TEXT_MAX_CHARS,
    )


@canned_pages_router.post("/t/{slug}/canned")
async def save_canned_action(
    page: AdminPage,
    sessions: SessionsDep,
    shortcut: Annotated[str, Form(max_length=64)],
    text: Annotated[str, Form(max_length=TEXT_MAX_CHARS * 2)],
    reply_id: Annotated[uuid.UUID | None, Form()] = None,
) -> Response:
    """Add a canned reply, or change one (``reply_id``); back to the page with what happened."""
    try:
        async with session_scope(sessions) as session:
            row = await save_canned(
                session, tenant_id=page.tenant.id, shortcut=shortcut, text=text, reply_id=reply_id
            )
            saved = row.shortcut
    except CannedReplyRefused as exc:
        return _back(page, error=str(exc))
    return _back(page, message=f"Saved /{saved}.")


@canned_pages_router.post("/t/{slug}/canned/{reply_id}/delete")
async def delete_canned_action(reply_id: uuid.UUID, page: AdminPage, sessions: SessionsDep) -> Response:
    async with session_scope(sessions) as session:
        deleted = await delete_canned(session, tenant_id=page.tenant.id, reply_id=reply_id)
    return _back(page, message="Deleted." if deleted else "Already deleted.")
