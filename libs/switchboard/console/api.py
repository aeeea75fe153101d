"""Admin API for conversations: ``/v1/admin/tenants/{slug}/conversations`` (inbox roles).

The console pages and ``switchboard conversations list|show`` read and act through the same
functions (:mod:`switchboard.console.inbox`, :mod:`switchboard.console.actions`).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from fastapi import HTTPException, Query, status
from pydantic import BaseModel

from switchboard.api.access import INBOX_ROLES
from switchboard.api.deps import SessionDep, TenantDep
from switchboard.api.routers import tenant_admin_router
from switchboard.console.inbox import InboxFilters, Mode, conversation_view, list_inbox

__all__ = ["conversations_admin_router", "ConversationSummary", "ConversationDetail"]

conversations_admin_router = tenant_admin_router("/conversations", tags=["conversations"], roles=INBOX_ROLES)


class ConversationSummary(BaseModel):
    """One inbox line."""

    id: uuid.UUID
    channel: str
    mode: Mode
    customer: str
    last_text: str
    last_at: datetime
    last_from: str
    assigned_to: str | None
    unread: bool


class MessagePublic(BaseModel):
    id: uuid.UUID
    sender: str
    """``customer``, ``ai``, ``human`` or ``system``."""
    sender_name: str
    text: str
    kind: str
    media: list[dict[str, Any]]
    at: datetime
    trace_id: str | None
    delivery: list[str]
    turn: dict[str, Any] | None


class ConversationDetail(BaseModel):
    """A conversation with its thread, per-turn details, events and pending approvals."""

    id: uuid.UUID
    channel: str
    mode: Mode
    status: str
    customer: str
    assigned_to: str | None
    window_open: bool | None
    messages: list[MessagePublic]
    events: list[dict[str, Any]]
    pending_actions: list[dict[str, Any]]


@conversations_admin_router.get(
    "",
    response_model=list[ConversationSummary],
    summary="List conversations (the inbox)",
    description="Newest activity first, at most 100. Filters: `channel`, `mode` (ai, human, waiting, "
    "closed), `assigned` (`agent:<id>`, `user:<id>`, `me`), `unread`, `q` (customer or message text).",
)
async def get_conversations(
    tenant: TenantDep,
    session: SessionDep,
    channel: str | None = None,
    mode: Mode | None = None,
    assigned: str | None = None,
    unread: bool = False,
    q: str | None = Query(None, max_length=200),
) -> list[ConversationSummary]:
    rows = await list_inbox(
        session,
        tenant_id=tenant.id,
        filters=InboxFilters(channel=channel, mode=mode, assigned=assigned, unread=unread, q=q),
    )
    return [
        ConversationSummary(
            id=r.conversation_id,
            channel=r.channel,
            mode=r.mode,
            customer=r.customer,
            last_text=r.last_text,
            last_at=r.last_at,
            last_from=r.last_from,
            assigned_to=r.assigned_to,
            unread=r.unread,
        )  # fmt: skip
        for r in rows
    ]


def detail_of(view: Any) -> ConversationDetail:
    """The API shape of a :class:`~switchboard.console.inbox.ConversationView`."""
    from dataclasses import asdict

    return ConversationDetail(
        id=view.conversation.id,
        channel=view.conversation.channel,
        mode=view.mode,
        status=view.conversation.status,
        customer=view.customer_label,
        assigned_to=view.assigned_to,
        window_open=view.window_open,
        messages=[
            MessagePublic(
                id=m.id,
                sender=m.kind_of_sender,
                sender_name=m.sender_name,
                text=m.text,
                kind=m.kind,
                media=m.media,
                at=m.at,
                trace_id=m.trace_id,
                delivery=m.delivery,
                turn=asdict(m.turn) if m.turn else None,
            )  # fmt: skip
            for m in view.messages
        ],
        events=[e.model_dump(mode="json") for e in view.events],
        pending_actions=[
            {
                "id": str(a.id),
                "tool_name": a.tool_name,
                "arguments": a.arguments,
                "created_at": a.created_at.isoformat(),
            }
            for a in view.pending_actions
        ],
    )


@conversations_admin_router.get(
    "/{conversation_id}",
    response_model=ConversationDetail,
    summary="Show a conversation",
    description="The thread (customer, AI, human and system messages; media; delivery status per "
    "message), each AI turn's model, fallback, tool calls (arguments, outcome, duration), tokens, "
    "latency and trace id, lifecycle events and pending approvals. 404: not this tenant's.",
)
async def get_conversation(
    conversation_id: uuid.UUID, tenant: TenantDep, session: SessionDep
) -> ConversationDetail:
    view = await conversation_view(session, tenant_id=tenant.id, conversation_id=conversation_id)
    if view is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "conversation not found")
    return detail_of(view)
