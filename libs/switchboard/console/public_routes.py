"""The public API's resources (``/api/v1``), served by the console service: the tenant's own systems
call them with a tenant API key (:mod:`switchboard.public_api`).

Each route states its scope; every list is cursor-paginated; every error is a problem. The routes
read and act through the same functions as the console pages and the admin API: conversation
actions (:mod:`switchboard.console.actions`), knowledge uploads (:mod:`switchboard.knowledge.routes`),
feedback (:mod:`switchboard.feedback.store`), event webhooks (:mod:`switchboard.events.endpoints`).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import Depends, Query, Request, Response
from fastapi import Path as FastApiPath
from fastapi.routing import APIRouter
from pydantic import BaseModel, Field
from sqlmodel import col, select

from switchboard.api.deps import ResourcesDep, SessionDep, SessionsDep, SettingsDep
from switchboard.body_limit import body_allowance
from switchboard.console import actions
from switchboard.console.actions import Actioner, ActionRefused
from switchboard.console.inbox import Mode, mode_of, sender_of
from switchboard.conversations.notes import NOTE_MAX_CHARS, add_note, notes_of
from switchboard.crypto import CredentialCipher
from switchboard.db.models import (
    Conversation,
    Customer,
    HumanAgent,
    KnowledgeSource,
    Lead,
    Message,
    MessageRole,
    Team,
    TeamMember,
    WebhookEndpoint,
)
from switchboard.egress import EgressPolicy
from switchboard.events.endpoints import EndpointRefused, create_endpoint
from switchboard.events.outbox import forget_subscribers
from switchboard.events.routes import EndpointCreate, EndpointCreated, EndpointPublic
from switchboard.feedback.routes import FeedbackPublic
from switchboard.feedback.store import COMMENT_MAX_CHARS, FeedbackRejected, Rating, record_feedback
from switchboard.knowledge.embeddings import EmbeddingFailed, resolve_embedding_config
from switchboard.knowledge.ingest import DocumentNotFound, delete_source, find_source, mark_for_reindex
from switchboard.knowledge.jobs import enqueue_ingest
from switchboard.knowledge.parsers import DocumentRejected
from switchboard.knowledge.retrieval import search_chunks
from switchboard.knowledge.routes import (
    UPLOAD_BODY,
    DocumentPublic,
    HitPublic,
    UploadResult,
    accept_upload,
    rejection_status,
)
from switchboard.knowledge.upload_form import upload_body_bytes
from switchboard.leads.routes import LeadPublic
from switchboard.live_updates import publish_conversation_event
from switchboard.media.store import MediaCopyFailed, MediaStore
from switchboard.observability import get_logger
from switchboard.outreach.routes import outreach_routers
from switchboard.privacy.erase import confirms_identity
from switchboard.privacy.export import export_key, new_export_id
from switchboard.public_api import (
    ApiCaller,
    ApiProblem,
    CursorQuery,
    LimitQuery,
    Page,
    keyset_page,
    problem_responses,
    public_router,
    require_scope,
)
from switchboard.queue.jobs import enqueue_erase_customer, enqueue_export_customer, export_pending
from switchboard.validation import check_text

__all__ = ["public_routers"]

log = get_logger(__name__)

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
    team_id: uuid.UUID | None = None
    """The team it was given to (its automatic assignment picks among that team's online agents)."""
    created_at: datetime
    updated_at: datetime
    closed_at: datetime | None
    last_customer_message_at: datetime | None


def conversation_out(conversation: Conversation) -> ConversationOut:
    return ConversationOut(
        id=conversation.id,
        channel=conversation.channel,
        status=conversation.status,
        mode=mode_of(conversation),
        customer_id=conversation.customer_id,
        assigned_user_id=conversation.assigned_user_id,
        assigned_agent_id=conversation.assigned_agent_id,
        team_id=conversation.team_id,
        created_at=conversation.created_at,
        updated_at=conversation.updated_at,
        closed_at=conversation.closed_at,
        last_customer_message_at=conversation.last_customer_message_at,
    )


@conversations_router.get(
    "",
    operation_id="listConversations",
    response_model=Page[ConversationOut],
    summary="List conversations",
    description="Newest first. Filters: `status` (ai, human, closed), `channel`, `customer_id`, "
    "`team_id`, `created_after` (ISO 8601).",
)
async def list_conversations(
    caller: Annotated[ApiCaller, require_scope("conversations:read")],
    session: SessionDep,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
    status: str | None = None,
    channel: str | None = None,
    customer_id: uuid.UUID | None = None,
    team_id: uuid.UUID | None = None,
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
    if team_id:
        query = query.where(Conversation.team_id == team_id)
    if created_after:
        query = query.where(col(Conversation.created_at) > created_after)
    rows, next_cursor = await keyset_page(session, query, Conversation, limit=limit, cursor=cursor)
    return Page[ConversationOut](items=[conversation_out(c) for c in rows], next_cursor=next_cursor)


# --- Conversations: messages, assign, hand back, close ---------------------------------------------

_SHOWN_ROLES = (MessageRole.user.value, MessageRole.assistant.value, MessageRole.human_agent.value)
_SENDER = {
    MessageRole.user.value: "customer",
    MessageRole.assistant.value: "ai",
    MessageRole.human_agent.value: "human",
}


_HISTORY_ONLY_KINDS = ("tool_call", "tool_result", "system")
"""Message kinds kept for the model's history only: what the API's thread leaves out."""


class MessageOut(BaseModel):
    """One message of the thread (the customer's, the AI's or a person's; notes about the conversation,
    such as a hand-back, are left out)."""

    id: uuid.UUID
    sender: Literal["customer", "ai", "human"]
    kind: str = Field(description="text, image, audio, video, document, interactive, ...")
    text: str | None
    media: list[dict[str, Any]] = Field(description="`{mime, filename?, caption?}` of each attachment.")
    created_at: datetime


async def _conversation(
    session: Any, caller: ApiCaller, conversation_id: uuid.UUID, *, fresh: bool = False
) -> Conversation:
    conversation = await session.get(Conversation, conversation_id, populate_existing=fresh)
    if conversation is None or conversation.tenant_id != caller.tenant.id or conversation.is_agent_console:
        raise ApiProblem(404, "not_found", "conversation not found")
    return conversation


@conversations_router.get(
    "/{conversation_id}",
    operation_id="getConversation",
    response_model=ConversationOut,
    summary="Get a conversation",
)
async def get_conversation(
    conversation_id: uuid.UUID,
    caller: Annotated[ApiCaller, require_scope("conversations:read")],
    session: SessionDep,
) -> ConversationOut:
    return conversation_out(await _conversation(session, caller, conversation_id))


@conversations_router.get(
    "/{conversation_id}/messages",
    operation_id="listMessages",
    response_model=Page[MessageOut],
    summary="List a conversation's messages",
    description="Newest first; tool calls and system rows are left out.",
)
async def list_messages(
    conversation_id: uuid.UUID,
    caller: Annotated[ApiCaller, require_scope("conversations:read")],
    session: SessionDep,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
) -> Page[MessageOut]:
    await _conversation(session, caller, conversation_id)
    query = select(Message).where(
        Message.tenant_id == caller.tenant.id,
        Message.conversation_id == conversation_id,
        col(Message.role).in_(_SHOWN_ROLES),
        # the model's tool calls and results and the notes for its history: rows, never messages
        col(Message.kind).not_in(_HISTORY_ONLY_KINDS),
    )
    rows, next_cursor = await keyset_page(session, query, Message, limit=limit, cursor=cursor)
    items = []
    for m in rows:
        sender, _ = sender_of(m)
        if (
            sender == "system"
        ):  # notes for the model's history (a hand-back), not messages: a page may be short
            continue
        media = [{k: v for k, v in item.items() if k in ("mime", "filename", "caption")} for item in m.media]
        items.append(
            MessageOut(id=m.id, sender=sender, kind=m.kind, text=m.text, media=media, created_at=m.created_at)
        )
    return Page[MessageOut](items=items, next_cursor=next_cursor)


# --- Teams -------------------------------------------------------------------------------------------

teams_router = public_router("/teams", tags=["teams"])


class TeamMemberOut(BaseModel):
    """A WhatsApp agent in a team (assign to them alone with ``{"to": "agent:<id>"}``)."""

    id: uuid.UUID
    name: str


class TeamOut(BaseModel):
    """A named group of the tenant's agents: give it a conversation with ``{"to": "team:<id>"}``, filter
    conversations with ``team_id``."""

    id: uuid.UUID
    name: str
    members: list[TeamMemberOut] = Field(description="Its agents, by name.")
    created_at: datetime


@teams_router.get(
    "",
    operation_id="listTeams",
    response_model=Page[TeamOut],
    summary="List teams",
    description="Newest first, each with its members. A team's `id` is what `team:<id>` (assigning a "
    "conversation) and the `team_id` filter of `listConversations` take.",
)
async def list_teams(
    caller: Annotated[ApiCaller, require_scope("conversations:read")],
    session: SessionDep,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
) -> Page[TeamOut]:
    query = select(Team).where(Team.tenant_id == caller.tenant.id)
    rows, next_cursor = await keyset_page(session, query, Team, limit=limit, cursor=cursor)
    members: dict[uuid.UUID, list[TeamMemberOut]] = {team.id: [] for team in rows}
    if rows:
        found = await session.exec(
            select(TeamMember.team_id, HumanAgent.id, HumanAgent.name)
            .join(HumanAgent, col(HumanAgent.id) == col(TeamMember.agent_id))
            .where(TeamMember.tenant_id == caller.tenant.id, col(TeamMember.team_id).in_(list(members)))
            .order_by(col(HumanAgent.name))
        )
        for team_id, agent_id, name in found.all():
            members[team_id].append(TeamMemberOut(id=agent_id, name=name))
    return Page[TeamOut](
        items=[TeamOut(id=t.id, name=t.name, members=members[t.id], created_at=t.created_at) for t in rows],
        next_cursor=next_cursor,
    )


class AssignBody(BaseModel):
    to: str = Field(
        max_length=80,
        pattern=r"^(user|agent|team):[0-9a-fA-F-]{36}$",
        description="`user:<id>` (a console user of the tenant), `agent:<id>` (an online WhatsApp agent) "
        "or `team:<id>` (a team: its least-loaded online agent gets it, else it waits for one of them).",
    )


async def _act(
    caller: ApiCaller, session: Any, conversation_id: uuid.UUID, run: Callable[[Actioner], Awaitable[None]]
) -> ConversationOut:
    await _conversation(session, caller, conversation_id)
    try:
        await run(Actioner(tenant_id=caller.tenant.id))
    except LookupError:
        raise ApiProblem(404, "not_found", "conversation not found") from None
    except ActionRefused as exc:
        raise ApiProblem(409, "conflict", str(exc)) from None
    # the action ran in its own transaction: read the row again
    return conversation_out(await _conversation(session, caller, conversation_id, fresh=True))


_CONFLICT = problem_responses(404, 409)


@conversations_router.post(
    "/{conversation_id}/assign",
    operation_id="assignConversation",
    response_model=ConversationOut,
    responses=_CONFLICT,
    summary="Assign a conversation to a person",
    description="The AI stops answering it; a WhatsApp agent must be online and is told. 409: closed, "
    "an unknown or inactive person, an offline agent.",
)
async def assign_conversation(
    conversation_id: uuid.UUID,
    body: AssignBody,
    caller: Annotated[ApiCaller, require_scope("conversations:write")],
    session: SessionDep,
    sessions: SessionsDep,
    resources: ResourcesDep,
) -> ConversationOut:
    return await _act(
        caller,
        session,
        conversation_id,
        lambda who: actions.transfer(
            sessions, resources.redis, who=who, conversation_id=conversation_id, to=body.to
        ),
    )


@conversations_router.post(
    "/{conversation_id}/handback",
    operation_id="handBackConversation",
    response_model=ConversationOut,
    responses=_CONFLICT,
    summary="Hand a conversation back to the AI",
    description="From a person or the queue; 409 when the AI has it already or it is closed.",
)
async def hand_back_conversation(
    conversation_id: uuid.UUID,
    caller: Annotated[ApiCaller, require_scope("conversations:write")],
    session: SessionDep,
    sessions: SessionsDep,
    resources: ResourcesDep,
) -> ConversationOut:
    return await _act(
        caller,
        session,
        conversation_id,
        lambda who: actions.hand_back(sessions, resources.redis, who=who, conversation_id=conversation_id),
    )


@conversations_router.post(
    "/{conversation_id}/close",
    operation_id="closeConversation",
    response_model=ConversationOut,
    responses=_CONFLICT,
    summary="Close a conversation",
    description="A person who had it hands it back first. The customer's next message opens a new "
    "conversation unless this one is reopened (`reopenConversation`). Closing it again changes nothing.",
)
async def close_conversation(
    conversation_id: uuid.UUID,
    caller: Annotated[ApiCaller, require_scope("conversations:write")],
    session: SessionDep,
    sessions: SessionsDep,
    resources: ResourcesDep,
) -> ConversationOut:
    return await _act(
        caller,
        session,
        conversation_id,
        lambda who: actions.close(sessions, resources.redis, who=who, conversation_id=conversation_id),
    )


@conversations_router.post(
    "/{conversation_id}/reopen",
    operation_id="reopenConversation",
    response_model=ConversationOut,
    responses=_CONFLICT,
    summary="Reopen a closed conversation",
    description="The AI answers the customer's next message in it. 409: it is open, or the customer has "
    "a newer open conversation (continue there).",
)
async def reopen_conversation(
    conversation_id: uuid.UUID,
    caller: Annotated[ApiCaller, require_scope("conversations:write")],
    session: SessionDep,
    sessions: SessionsDep,
    resources: ResourcesDep,
) -> ConversationOut:
    return await _act(
        caller,
        session,
        conversation_id,
        lambda who: actions.reopen(sessions, resources.redis, who=who, conversation_id=conversation_id),
    )


class NoteOut(BaseModel):
    """A private note: shown to the team in the thread, never sent to the customer nor read by the AI."""

    id: uuid.UUID
    text: str
    author_name: str
    created_at: datetime


class NoteBody(BaseModel):
    text: str = Field(min_length=1, max_length=NOTE_MAX_CHARS)


@conversations_router.get(
    "/{conversation_id}/notes",
    operation_id="listNotes",
    response_model=list[NoteOut],
    responses=problem_responses(404),
    summary="List a conversation's private notes",
    description="Oldest first.",
)
async def list_notes(
    conversation_id: uuid.UUID,
    caller: Annotated[ApiCaller, require_scope("conversations:read")],
    session: SessionDep,
) -> list[NoteOut]:
    await _conversation(session, caller, conversation_id)
    notes = await notes_of(session, tenant_id=caller.tenant.id, conversation_id=conversation_id)
    return [NoteOut(id=n.id, text=n.text, author_name=n.author_name, created_at=n.created_at) for n in notes]


@conversations_router.post(
    "/{conversation_id}/notes",
    operation_id="addNote",
    status_code=201,
    response_model=NoteOut,
    responses=problem_responses(404),
    summary="Keep a private note on a conversation",
    description="Shown to the team in the console's thread, signed with the key's name; never sent to "
    "the customer and never read by the AI.",
)
async def add_conversation_note(
    conversation_id: uuid.UUID,
    body: NoteBody,
    caller: Annotated[ApiCaller, require_scope("conversations:write")],
    session: SessionDep,
    resources: ResourcesDep,
) -> NoteOut:
    conversation = await _conversation(session, caller, conversation_id)
    try:
        note = add_note(
            session, conversation=conversation, text=body.text, author_name=f"API: {caller.key.name}"
        )
    except ValueError as exc:
        raise ApiProblem(
            422, "invalid_request", str(exc), errors=[{"field": "text", "message": str(exc)}]
        ) from None
    await session.commit()
    await publish_conversation_event(
        resources.redis, tenant_id=caller.tenant.id, conversation_id=conversation_id, kind="note"
    )
    return NoteOut(id=note.id, text=note.text, author_name=note.author_name, created_at=note.created_at)


# --- Customers ----------------------------------------------------------------------------------------

customers_router = public_router("/customers", tags=["customers"])
ATTRIBUTE_KEY = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
MAX_ATTRIBUTES = 50
ATTRIBUTE_MAX_CHARS = 1000


class CustomerOut(BaseModel):
    """A customer; ``attributes`` are the tenant's own (set through this API)."""

    id: uuid.UUID
    channel: str
    external_user_id: str
    phone: str | None
    display_name: str | None
    email: str | None
    attributes: dict[str, str]
    created_at: datetime
    updated_at: datetime


def customer_out(customer: Customer) -> CustomerOut:
    return CustomerOut(
        id=customer.id,
        channel=customer.channel,
        external_user_id=customer.external_user_id,
        phone=customer.phone,
        display_name=customer.display_name,
        email=customer.email,
        attributes=dict(customer.profile.get("attributes") or {}),
        created_at=customer.created_at,
        updated_at=customer.updated_at,
    )


class CustomerUpdate(BaseModel):
    display_name: str | None = Field(
        None, max_length=200, description="The customer's name as people read it."
    )
    attributes: dict[str, str | None] | None = Field(
        None,
        description=f"Merged into the customer's attributes; a null value removes that one. Keys: "
        f"letters, digits, `_.-`, at most 64; values at most {ATTRIBUTE_MAX_CHARS} characters; at most "
        f"{MAX_ATTRIBUTES} attributes.",
    )


async def _customer(session: Any, caller: ApiCaller, customer_id: uuid.UUID) -> Customer:
    customer = await session.get(Customer, customer_id)
    if customer is None or customer.tenant_id != caller.tenant.id:
        raise ApiProblem(404, "not_found", "customer not found")
    return customer


@customers_router.get(
    "",
    operation_id="listCustomers",
    response_model=Page[CustomerOut],
    summary="List customers",
    description="Newest first. Filters: `channel`, `external_user_id` (a phone number's digits, an e-mail).",
)
async def list_customers(
    caller: Annotated[ApiCaller, require_scope("customers:read")],
    session: SessionDep,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
    channel: str | None = None,
    external_user_id: Annotated[str | None, Query(max_length=255)] = None,
) -> Page[CustomerOut]:
    query = select(Customer).where(Customer.tenant_id == caller.tenant.id)
    if channel:
        query = query.where(Customer.channel == channel)
    if external_user_id:
        query = query.where(Customer.external_user_id == external_user_id)
    rows, next_cursor = await keyset_page(session, query, Customer, limit=limit, cursor=cursor)
    return Page[CustomerOut](items=[customer_out(c) for c in rows], next_cursor=next_cursor)


@customers_router.get(
    "/{customer_id}", operation_id="getCustomer", response_model=CustomerOut, summary="Get a customer"
)
async def get_customer(
    customer_id: uuid.UUID, caller: Annotated[ApiCaller, require_scope("customers:read")], session: SessionDep
) -> CustomerOut:
    return customer_out(await _customer(session, caller, customer_id))


def _checked_attributes(current: dict[str, str], changes: dict[str, str | None]) -> dict[str, str]:
    merged = dict(current)
    errors: list[dict[str, str]] = []
    for key, value in changes.items():
        if not ATTRIBUTE_KEY.match(key):
            errors.append(
                {"field": f"attributes.{key[:64]}", "message": "keys are 1-64 letters, digits, _ . -"}
            )
        elif value is None:
            merged.pop(key, None)
        else:
            try:
                merged[key] = check_text(value, field=key, max_length=ATTRIBUTE_MAX_CHARS, allow_empty=True)
            except ValueError as exc:
                errors.append({"field": f"attributes.{key}", "message": str(exc)})
    if len(merged) > MAX_ATTRIBUTES:
        errors.append({"field": "attributes", "message": f"at most {MAX_ATTRIBUTES} attributes"})
    if errors:
        raise ApiProblem(422, "invalid_request", "; ".join(e["message"] for e in errors), errors=errors)
    return merged


@customers_router.patch(
    "/{customer_id}",
    operation_id="updateCustomer",
    response_model=CustomerOut,
    summary="Update a customer's name and attributes",
)
async def update_customer(
    customer_id: uuid.UUID,
    body: CustomerUpdate,
    caller: Annotated[ApiCaller, require_scope("customers:write")],
    session: SessionDep,
) -> CustomerOut:
    customer = await _customer(session, caller, customer_id)
    if body.display_name is not None:
        try:
            customer.display_name = (
                check_text(body.display_name, field="display_name", max_length=200) or None
            )
        except ValueError as exc:
            raise ApiProblem(
                422, "invalid_request", str(exc), errors=[{"field": "display_name", "message": str(exc)}]
            ) from None
    if body.attributes is not None:
        attributes = _checked_attributes(dict(customer.profile.get("attributes") or {}), body.attributes)
        customer.profile = {**customer.profile, "attributes": attributes}
    session.add(customer)
    await session.commit()
    await session.refresh(customer)
    return customer_out(customer)


class EraseBody(BaseModel):
    confirm: str = Field(
        min_length=1,
        max_length=320,
        description="One of the customer's identities (phone number, e-mail address, Instagram or web id), "
        "typed again: the erase cannot be undone.",
    )


class Queued(BaseModel):
    status: Literal["queued"] = "queued"


@customers_router.post(
    "/{customer_id}/erase",
    operation_id="eraseCustomer",
    status_code=202,
    response_model=Queued,
    responses=problem_responses(404, 422),
    summary="Erase a customer everywhere",
    description="Deletes or irreversibly anonymizes everything stored about the customer (messages and "
    "their files, memory, leads, traces, webhook deliveries; counts are kept) in a background job that "
    "survives a restart. An audit record keeps who erased which customer id, when. 422 "
    "`identity_not_confirmed`: `confirm` is not one of the customer's identities.",
)
async def erase_customer_route(
    customer_id: uuid.UUID,
    body: EraseBody,
    caller: Annotated[ApiCaller, require_scope("customers:write")],
    session: SessionDep,
    resources: ResourcesDep,
) -> Queued:
    customer = await _customer(session, caller, customer_id)
    if not await confirms_identity(
        session, tenant_id=caller.tenant.id, customer=customer, typed=body.confirm
    ):
        raise ApiProblem(
            422,
            "identity_not_confirmed",
            "`confirm` must be one of the customer's identities, typed again.",
            errors=[{"field": "confirm", "message": "not one of the customer's identities"}],
        )
    await enqueue_erase_customer(
        resources.redis, tenant_id=caller.tenant.id, customer_id=customer_id, actor=f"api_key:{caller.key.id}"
    )
    log.info("customer_erase_requested", customer_id=str(customer_id), api_key_id=str(caller.key.id))
    return Queued()


class ExportStarted(BaseModel):
    export_id: str
    status: Literal["queued"] = "queued"
    download: str = Field(description="`getCustomerExport`'s path: the ZIP once it is ready.")


@customers_router.post(
    "/{customer_id}/exports",
    operation_id="exportCustomer",
    status_code=202,
    response_model=ExportStarted,
    responses=problem_responses(404),
    summary="Export everything stored about a customer",
    description="A background job writes a ZIP: `customer.json` (the customer, identities, conversations "
    "and messages, memory, leads, feedback) and their media files. Fetch it with `getCustomerExport`.",
)
async def export_customer_route(
    customer_id: uuid.UUID,
    caller: Annotated[ApiCaller, require_scope("customers:read")],
    session: SessionDep,
    resources: ResourcesDep,
) -> ExportStarted:
    await _customer(session, caller, customer_id)
    export_id = new_export_id()
    await enqueue_export_customer(
        resources.redis,
        tenant_id=caller.tenant.id,
        customer_id=customer_id,
        export_id=export_id,
        actor=f"api_key:{caller.key.id}",
    )
    return ExportStarted(export_id=export_id, download=f"/api/v1/customers/exports/{export_id}")


@customers_router.get(
    "/exports/{export_id}",
    operation_id="getCustomerExport",
    summary="Download a customer export",
    response_class=Response,
    responses={
        200: {"content": {"application/zip": {}}, "description": "The export."},
        202: {"description": "Not ready yet: ask again in a few seconds."},
        **problem_responses(404),
    },
    description="The ZIP once the export job wrote it (202 until then); 404 for an unknown or expired one "
    "(exports are deleted after `CUSTOMER_EXPORT_LINK_TTL_S`).",
)
async def get_customer_export(
    export_id: Annotated[
        str, FastApiPath(pattern=r"^[0-9a-f]{32}$", description="`exportCustomer`'s `export_id`.")
    ],
    caller: Annotated[ApiCaller, require_scope("customers:read")],
    settings: SettingsDep,
    resources: ResourcesDep,
) -> Response:
    store = MediaStore.from_settings(settings)
    try:
        data = await store.get(export_key(caller.tenant.id, export_id))
    except MediaCopyFailed:
        if await export_pending(resources.redis, export_id):
            return Response(status_code=202, headers={"Retry-After": "5"})
        raise ApiProblem(404, "not_found", "no such export (or it expired)") from None
    return Response(
        data,
        media_type="application/zip",
        headers={
            "Content-Disposition": 'attachment; filename="customer-export.zip"',
            "Cache-Control": "no-store",
        },
    )


# --- Knowledge -----------------------------------------------------------------------------------------

knowledge_router = public_router("/knowledge", tags=["knowledge"])
_knowledge_write = require_scope("knowledge:write")
"""One dependency object: the upload lists it before its body allowance, and FastAPI runs it once."""


async def _document(session: Any, caller: ApiCaller, document_id: uuid.UUID) -> KnowledgeSource:
    try:
        return await find_source(session, tenant_id=caller.tenant.id, document=str(document_id))
    except DocumentNotFound:
        raise ApiProblem(404, "not_found", "document not found") from None


@knowledge_router.get(
    "/documents",
    operation_id="listDocuments",
    response_model=Page[DocumentPublic],
    summary="List documents",
    description="Newest first, with each one's ingestion status (pending, processing, ready, failed).",
)
async def list_documents(
    caller: Annotated[ApiCaller, require_scope("knowledge:read")],
    session: SessionDep,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
) -> Page[DocumentPublic]:
    query = select(KnowledgeSource).where(KnowledgeSource.tenant_id == caller.tenant.id)
    rows, next_cursor = await keyset_page(session, query, KnowledgeSource, limit=limit, cursor=cursor)
    return Page[DocumentPublic](items=[DocumentPublic.of(s) for s in rows], next_cursor=next_cursor)


@knowledge_router.post(
    "/documents",
    operation_id="uploadDocument",
    status_code=202,
    response_model=UploadResult,
    responses=problem_responses(404, 413, 415),
    summary="Upload a document (PDF, DOCX, XLSX, CSV, TXT, Markdown)",
    description="Multipart form field `file`. Stored and queued for ingestion; poll `getDocument` for its "
    "status. A file with an existing name replaces that document; bytes already stored change nothing. "
    "413 past the upload limit, 415 an unsupported type, 422 an empty, encrypted or unreadable file.",
    dependencies=[_knowledge_write, Depends(body_allowance(upload_body_bytes))],
    openapi_extra={"requestBody": UPLOAD_BODY},
)
async def upload_document(
    request: Request,
    caller: Annotated[ApiCaller, _knowledge_write],
    session: SessionDep,
    settings: SettingsDep,
    resources: ResourcesDep,
) -> UploadResult:
    try:
        return await accept_upload(request, session, settings, resources, tenant_id=caller.tenant.id)
    except DocumentRejected as exc:
        status = rejection_status(exc)
        code = {413: "body_too_large", 415: "unsupported_media_type"}.get(status, "invalid_request")
        raise ApiProblem(status, code, str(exc)) from None


@knowledge_router.get(
    "/documents/{document_id}",
    operation_id="getDocument",
    response_model=DocumentPublic,
    summary="Get a document and its ingestion status",
)
async def get_document(
    document_id: uuid.UUID, caller: Annotated[ApiCaller, require_scope("knowledge:read")], session: SessionDep
) -> DocumentPublic:
    return DocumentPublic.of(await _document(session, caller, document_id))


@knowledge_router.delete(
    "/documents/{document_id}",
    operation_id="deleteDocument",
    status_code=204,
    summary="Delete a document, its passages and its stored file",
)
async def delete_document(
    document_id: uuid.UUID, caller: Annotated[ApiCaller, _knowledge_write], session: SessionDep
) -> Response:
    await _document(session, caller, document_id)
    await delete_source(session, tenant_id=caller.tenant.id, source_id=document_id)
    await session.commit()
    return Response(status_code=204)


@knowledge_router.post(
    "/documents/{document_id}/reindex",
    operation_id="reindexDocument",
    status_code=202,
    response_model=DocumentPublic,
    summary="Re-read and re-embed a document",
)
async def reindex_document(
    document_id: uuid.UUID,
    caller: Annotated[ApiCaller, _knowledge_write],
    session: SessionDep,
    resources: ResourcesDep,
) -> DocumentPublic:
    await _document(session, caller, document_id)
    [source] = await mark_for_reindex(session, tenant_id=caller.tenant.id, source_ids=[document_id])
    await session.commit()
    if resources.redis is not None:
        await enqueue_ingest(resources.redis, source)
    return DocumentPublic.of(source)


@knowledge_router.get(
    "/search",
    operation_id="searchKnowledge",
    response_model=list[HitPublic],
    summary="Search the knowledge",
    description="The passages that answer `q` best (the search the assistant uses: vector, full text and "
    "the knowledge graph); nothing when nothing is relevant.",
)
async def search_knowledge(
    caller: Annotated[ApiCaller, require_scope("knowledge:read")],
    session: SessionDep,
    settings: SettingsDep,
    q: Annotated[str, Query(min_length=1, max_length=2000, description="The question or code.")],
    mode: Literal["vector", "hybrid", "exact", "graph", "neighborhood"] = "hybrid",
    limit: Annotated[int, Query(ge=1, le=50)] = 5,
) -> list[HitPublic]:
    try:
        hits = await search_chunks(
            session,
            tenant_id=caller.tenant.id,
            query=q,
            mode=mode,
            limit=limit,
            settings=settings,
            embedding=resolve_embedding_config(settings, caller.tenant),
        )
    except EmbeddingFailed:
        raise ApiProblem(503, "unavailable", "the search is unavailable now; try again later") from None
    return [HitPublic(**hit.to_json_dict()) for hit in hits]


# --- Leads, feedback -------------------------------------------------------------------------------------

leads_router = public_router("/leads", tags=["leads"])


@leads_router.get(
    "",
    operation_id="listLeads",
    response_model=Page[LeadPublic],
    summary="List leads",
    description="Newest first. Filter: `source` (`tool`: the assistant recorded it; `intent`: found in the chat).",
)
async def list_leads(
    caller: Annotated[ApiCaller, require_scope("leads:read")],
    session: SessionDep,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
    source: Annotated[str | None, Query(pattern="^(tool|intent)$")] = None,
) -> Page[LeadPublic]:
    query = select(Lead).where(Lead.tenant_id == caller.tenant.id)
    if source:
        query = query.where(Lead.source == source)
    rows, next_cursor = await keyset_page(session, query, Lead, limit=limit, cursor=cursor)
    return Page[LeadPublic](
        items=[LeadPublic.model_validate(lead, from_attributes=True) for lead in rows],
        next_cursor=next_cursor,
    )


messages_router = public_router("/messages", tags=["feedback"])


class FeedbackBody(BaseModel):
    rating: Rating = Field(description="`up` or `down`.")
    comment: str | None = Field(None, max_length=COMMENT_MAX_CHARS, description="Optional free text.")


@messages_router.post(
    "/{message_id}/feedback",
    operation_id="sendFeedback",
    response_model=FeedbackPublic,
    summary="Rate one of the assistant's messages",
    description="One rating per message from the API (source `tenant_api`): a second one replaces it.",
)
async def send_feedback(
    message_id: uuid.UUID,
    body: FeedbackBody,
    caller: Annotated[ApiCaller, require_scope("feedback:write")],
    session: SessionDep,
) -> FeedbackPublic:
    message = await session.get(Message, message_id)
    if message is None or message.tenant_id != caller.tenant.id:
        raise ApiProblem(404, "not_found", "message not found")
    try:
        row = await record_feedback(
            session,
            tenant_id=caller.tenant.id,
            message_id=message.id,
            rating=body.rating,
            comment=body.comment,
            source="tenant_api",
        )
    except FeedbackRejected as exc:
        code = "not_found" if exc.status_code == 404 else "invalid_request"
        raise ApiProblem(exc.status_code, code, str(exc)) from None
    await session.commit()
    await session.refresh(row)
    return FeedbackPublic.of(row)


# --- Event webhooks --------------------------------------------------------------------------------------

webhooks_router = public_router("/webhooks", tags=["event webhooks"])


@webhooks_router.get(
    "",
    operation_id="listWebhookEndpoints",
    response_model=Page[EndpointPublic],
    summary="List event webhook endpoints",
)
async def list_webhook_endpoints(
    caller: Annotated[ApiCaller, require_scope("webhooks:manage")],
    session: SessionDep,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
) -> Page[EndpointPublic]:
    query = select(WebhookEndpoint).where(WebhookEndpoint.tenant_id == caller.tenant.id)
    rows, next_cursor = await keyset_page(session, query, WebhookEndpoint, limit=limit, cursor=cursor)
    return Page[EndpointPublic](items=[EndpointPublic.of(e) for e in rows], next_cursor=next_cursor)


@webhooks_router.post(
    "",
    operation_id="createWebhookEndpoint",
    status_code=201,
    response_model=EndpointCreated,
    summary="Register an event webhook endpoint",
    description="`https://` only, public addresses only. The answer holds the signing secret, once. Each "
    "delivery is signed; see the event webhooks page for the headers and how to verify them.",
)
async def create_webhook_endpoint(
    body: EndpointCreate,
    caller: Annotated[ApiCaller, require_scope("webhooks:manage")],
    session: SessionDep,
    settings: SettingsDep,
) -> EndpointCreated:
    cipher = CredentialCipher(settings.secret("encryption_key").encode())
    try:
        endpoint, secret = await create_endpoint(
            session,
            tenant_id=caller.tenant.id,
            url=body.url,
            event_types=list(body.event_types),
            description=body.description,
            cipher=cipher,
            egress=EgressPolicy.from_settings(settings),
            signature_scheme=body.signature_scheme,
        )
    except EndpointRefused as exc:
        raise ApiProblem(
            422, "invalid_request", str(exc), errors=[{"field": "url", "message": str(exc)}]
        ) from None
    await session.commit()
    return EndpointCreated(**EndpointPublic.of(endpoint).model_dump(), secret=secret)


@webhooks_router.delete(
    "/{endpoint_id}",
    operation_id="deleteWebhookEndpoint",
    status_code=204,
    summary="Delete an event webhook endpoint and its delivery log",
)
async def delete_webhook_endpoint(
    endpoint_id: uuid.UUID,
    caller: Annotated[ApiCaller, require_scope("webhooks:manage")],
    session: SessionDep,
) -> Response:
    endpoint = await session.get(WebhookEndpoint, endpoint_id)
    if endpoint is None or endpoint.tenant_id != caller.tenant.id:
        raise ApiProblem(404, "not_found", "webhook endpoint not found")
    await session.delete(endpoint)
    await session.commit()
    forget_subscribers(caller.tenant.id)
    return Response(status_code=204)


def public_routers() -> list[APIRouter]:
    """Every router of ``/api/v1`` the console service serves."""
    return [
        conversations_router,
        teams_router,
        customers_router,
        knowledge_router,
        leads_router,
        messages_router,
        webhooks_router,
        *outreach_routers(),
    ]
