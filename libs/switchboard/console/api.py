"""Admin API for conversations: ``/v1/admin/tenants/{slug}/conversations`` (inbox roles).

The console pages and ``switchboard conversations list|show`` read and act through the same
functions (:mod:`switchboard.console.inbox`, :mod:`switchboard.console.actions`).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from fastapi import HTTPException, Query, status
from pydantic import BaseModel, Field

from switchboard.api.access import INBOX_ROLES, Principal, PrincipalDep
from switchboard.api.deps import ResourcesDep, SessionDep, SessionsDep, TenantDep
from switchboard.api.routers import tenant_admin_router
from switchboard.console import actions
from switchboard.console.actions import REPLY_MAX_CHARS, Actioner, ActionRefused
from switchboard.console.inbox import InboxFilters, Mode, conversation_view, list_inbox
from switchboard.conversations.notes import NOTE_MAX_CHARS

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
        )
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
            )
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


class ReplyBody(BaseModel):
    text: str = Field(min_length=1, max_length=REPLY_MAX_CHARS, description="What the customer receives.")


class NoteBody(BaseModel):
    text: str = Field(
        min_length=1, max_length=NOTE_MAX_CHARS, description="The note (never sent, never read by the model)."
    )


class TransferBody(BaseModel):
    to: str = Field(
        description="`user:<id>` (a console user of the tenant) or `agent:<id>` (an online WhatsApp agent).",
        max_length=80,
    )


class DecisionBody(BaseModel):
    approve: bool
    reason: str | None = Field(None, max_length=500, description="Why it was rejected (optional).")


class ActionResult(BaseModel):
    """The conversation after the action, and what happened in words."""

    message: str | None = None
    trace_id: str | None = None
    conversation: ConversationDetail


def _who(tenant: Any, principal: Principal) -> Actioner:
    return Actioner(tenant_id=tenant.id, user=principal.user)


async def _done(
    session: SessionDep, tenant: Any, conversation_id: uuid.UUID, run: Callable[[], Awaitable[Any]]
) -> ActionResult:
    try:
        outcome = await run()
    except LookupError:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "conversation not found") from None
    except ActionRefused as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
    view = await conversation_view(session, tenant_id=tenant.id, conversation_id=conversation_id)
    assert view is not None
    message, trace_id = (
        (None, outcome) if isinstance(outcome, str) and outcome.startswith("console-") else (outcome, None)
    )
    return ActionResult(message=message, trace_id=trace_id, conversation=detail_of(view))


_ACTION_RESPONSES: dict[int | str, dict[str, Any]] = {
    404: {"description": "No such conversation in this tenant (or unknown tenant)"},
    409: {"description": "The action cannot be done now (the detail says why)"},
}


_PLAIN_ACTIONS: dict[str, tuple[Callable[..., Awaitable[str | None]], str, str]] = {
    "takeover": (
        actions.take_over,
        "Take the conversation over (the AI stops at once)",
        "The calling console user (session or user API token) handles it now: no model is called for it "
        "until it is handed back; a WhatsApp agent who had it is told. 409 with ADMIN_TOKEN (nobody to reply "
        "as) or when it is closed.",
    ),
    "handback": (
        actions.hand_back,
        "Hand the conversation back to the AI",
        "From a console user, a WhatsApp agent (who is told) or the queue. 409 when the AI has it.",
    ),
    "close": (
        actions.close,
        "Close the conversation",
        "A person who had it hands it back first; the customer's next message opens a new one. The "
        "customer gets the tenant's farewell (`handoff.farewell`) when it has one.",
    ),
    "reopen": (
        actions.reopen,
        "Reopen a closed conversation",
        "The AI answers it again. 409 when it is open, or the customer has a newer open conversation.",
    ),
}
"""Actions without a body: path word → (the action, OpenAPI summary, description)."""


def _plain_action_route(
    act: Callable[..., Awaitable[str | None]],
) -> Callable[..., Awaitable[ActionResult]]:
    async def route(
        conversation_id: uuid.UUID,
        tenant: TenantDep,
        principal: PrincipalDep,
        session: SessionDep,
        sessions: SessionsDep,
        resources: ResourcesDep,
    ) -> ActionResult:
        who = _who(tenant, principal)
        return await _done(
            session,
            tenant,
            conversation_id,
            lambda: act(sessions, resources.redis, who=who, conversation_id=conversation_id),
        )

    return route


for _name, (_act_fn, _summary, _description) in _PLAIN_ACTIONS.items():
    conversations_admin_router.add_api_route(
        f"/{{conversation_id}}/{_name}",
        _plain_action_route(_act_fn),
        methods=["POST"],
        response_model=ActionResult,
        responses=_ACTION_RESPONSES,
        summary=_summary,
        description=_description,
        name=f"post_{_name}",
    )


@conversations_admin_router.post(
    "/{conversation_id}/note",
    response_model=ActionResult,
    responses=_ACTION_RESPONSES,
    summary="Keep a private note on the conversation",
    description="Shown in the console's thread; never sent to the customer and never part of what the model "
    "reads. 409 with ADMIN_TOKEN (a note needs an author).",
)
async def post_note(
    conversation_id: uuid.UUID,
    body: NoteBody,
    tenant: TenantDep,
    principal: PrincipalDep,
    session: SessionDep,
    sessions: SessionsDep,
    resources: ResourcesDep,
) -> ActionResult:
    who = _who(tenant, principal)
    return await _done(
        session,
        tenant,
        conversation_id,
        lambda: actions.note(
            sessions, resources.redis, who=who, conversation_id=conversation_id, text=body.text
        ),
    )


@conversations_admin_router.post(
    "/{conversation_id}/reply",
    response_model=ActionResult,
    responses=_ACTION_RESPONSES,
    summary="Reply to the customer as the person who took the conversation over",
    description="Written through the one outbox (purpose `human_reply`) and sent on the customer's own "
    "channel by the delivery loop, which applies the channel's window rules (WhatsApp: free text only "
    "within 24 h of the customer's last message; Instagram: `HUMAN_AGENT` tag up to 7 days). 409 unless "
    "the caller has taken the conversation over.",
)
async def post_reply(
    conversation_id: uuid.UUID,
    body: ReplyBody,
    tenant: TenantDep,
    principal: PrincipalDep,
    session: SessionDep,
    sessions: SessionsDep,
    resources: ResourcesDep,
) -> ActionResult:
    who = _who(tenant, principal)
    return await _done(
        session,
        tenant,
        conversation_id,
        lambda: actions.reply(
            sessions, resources.redis, who=who, conversation_id=conversation_id, text=body.text
        ),
    )


@conversations_admin_router.post(
    "/{conversation_id}/transfer",
    response_model=ActionResult,
    responses=_ACTION_RESPONSES,
    summary="Transfer the conversation to a console user or a WhatsApp agent",
    description="A WhatsApp agent must be online and receives the assignment notice with a summary.",
)
async def post_transfer(
    conversation_id: uuid.UUID,
    body: TransferBody,
    tenant: TenantDep,
    principal: PrincipalDep,
    session: SessionDep,
    sessions: SessionsDep,
    resources: ResourcesDep,
) -> ActionResult:
    who = _who(tenant, principal)
    return await _done(
        session,
        tenant,
        conversation_id,
        lambda: actions.transfer(
            sessions, resources.redis, who=who, conversation_id=conversation_id, to=body.to
        ),
    )


@conversations_admin_router.post(
    "/{conversation_id}/approvals/{action_id}",
    response_model=ActionResult,
    responses=_ACTION_RESPONSES,
    summary="Approve or reject a pending action of the conversation",
    description="Approve runs the tool now with the stored arguments and idempotency key (audited); "
    "409 when it was decided already, the tool is disabled, or the tool refused (nothing changed).",
)
async def post_decision(
    conversation_id: uuid.UUID,
    action_id: uuid.UUID,
    body: DecisionBody,
    tenant: TenantDep,
    principal: PrincipalDep,
    session: SessionDep,
    sessions: SessionsDep,
    resources: ResourcesDep,
) -> ActionResult:
    who = _who(tenant, principal)
    return await _done(
        session,
        tenant,
        conversation_id,
        lambda: actions.decide(
            sessions,
            resources.redis,
            who=who,
            conversation_id=conversation_id,
            action_id=action_id,
            approve=body.approve,
            reason=body.reason,
        ),
    )
