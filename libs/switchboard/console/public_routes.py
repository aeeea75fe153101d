"""The public API's resources (``/api/v1``), served by the console service: the tenant's own systems
call them with a tenant API key (:mod:`switchboard.public_api`).

Each route states its scope; every list is cursor-paginated; every error is a problem. The routes
read and act through the same functions as the console pages and the admin API.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from pydantic import BaseModel
from sqlmodel import col, select

from switchboard.api.deps import SessionDep
from switchboard.console.inbox import Mode, mode_of
from switchboard.db.models import Conversation
from switchboard.public_api import (
    ApiCaller,
    CursorQuery,
    LimitQuery,
    Page,
    keyset_page,
    public_router,
    require_scope,
)

__all__ = ["public_routers"]

conversations_router = public_router("/conversations", tags=["conversations"])


class ConversationOut(BaseModel):
    """A conversation: who has it and when things happened (its messages: ``listMessages``)."""

    id: uuid.UUID
    channel: str
    status: str
    """``ai``, ``human`` or ``closed``."""
    mode: Mode
    """``ai``, ``human``, ``waiting`` (for a person, in the queue) or ``closed``."""
    customer_id: uuid.UUID
    assigned_user_id: uuid.UUID | None
    assigned_agent_id: uuid.UUID | None
    created_at: datetime
    updated_at: datetime
    closed_at: datetime | None
    last_customer_message_at: datetime | None


def conversation_out(conversation: Conversation) -> ConversationOut:
    return ConversationOut(
        id=conversation.id, channel=conversation.channel, status=conversation.status,
        mode=mode_of(conversation), customer_id=conversation.customer_id,
        assigned_user_id=conversation.assigned_user_id, assigned_agent_id=conversation.assigned_agent_id,
        created_at=conversation.created_at, updated_at=conversation.updated_at,
        closed_at=conversation.closed_at, last_customer_message_at=conversation.last_customer_message_at,
    )  # fmt: skip


@conversations_router.get(
    "", operation_id="listConversations", response_model=Page[ConversationOut],
    summary="List conversations",
    description="Newest first. Filters: `status` (ai, human, closed), `channel`, `customer_id`, "
    "`created_after` (ISO 8601).",
)  # fmt: skip
async def list_conversations(
    caller: Annotated[ApiCaller, require_scope("conversations:read")],
    session: SessionDep,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
    status: str | None = None,
    channel: str | None = None,
    customer_id: uuid.UUID | None = None,
    created_after: datetime | None = None,
) -> Page[ConversationOut]:
    query = select(Conversation).where(
        Conversation.tenant_id == caller.tenant.id, col(Conversation.is_agent_console).is_(False)
    )
    if status:
        query = query.where(Conversation.status == status)
    if channel:
        query = query.where(Conversation.channel == channel)
    if customer_id:
        query = query.where(Conversation.customer_id == customer_id)
    if created_after:
        query = query.where(col(Conversation.created_at) > created_after)
    rows, next_cursor = await keyset_page(session, query, Conversation, limit=limit, cursor=cursor)
    return Page[ConversationOut](items=[conversation_out(c) for c in rows], next_cursor=next_cursor)


def public_routers() -> list[object]:
    """Every router of ``/api/v1`` the console service serves."""
    return [conversations_router]
