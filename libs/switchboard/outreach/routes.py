"""The public API's routes that start conversations and send into them, and WhatsApp templates
(``/api/v1``, :mod:`switchboard.public_api`): each states its scope, every error is a problem.

* ``GET /api/v1/whatsapp/templates`` (``listTemplates``), ``POST /api/v1/whatsapp/templates/refresh``
  (``refreshTemplates``);
* ``POST /api/v1/conversations`` (``startConversation``): a customer by phone, a template or free text;
* ``POST /api/v1/conversations/{id}/messages`` (``sendMessage``): text, buttons, a list or a template;
* ``POST /api/v1/conversations/{id}/attachments`` (``sendAttachment``): an image or a PDF, by upload;
* ``POST /api/v1/webhooks/{id}/rotate-secret`` (``rotateWebhookSecret``).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field
from sqlmodel import col, select

from switchboard.api.deps import ResourcesDep, SessionDep, SettingsDep
from switchboard.body_limit import allow_body
from switchboard.channels.whatsapp.send import GraphSendError
from switchboard.channels.whatsapp.templates import (
    TemplateRefused,
    TemplateValues,
    refresh_account_templates,
    refusal_of,
    template_summary,
    upload_media,
)
from switchboard.crypto import CredentialCipher
from switchboard.db.models import ChannelAccount, WebhookEndpoint, WhatsAppTemplate
from switchboard.events.endpoints import (
    ROTATION_OVERLAP_MAX_S,
    EndpointRefused,
    previous_secret_until,
    rotate_secret,
)
from switchboard.observability import get_logger
from switchboard.outbox.jobs import deliver_soon
from switchboard.outreach.sends import (
    OutreachRefused,
    Sent,
    TemplateChoice,
    send_attachment,
    send_message,
    start_conversation,
)
from switchboard.public_api import (
    PROBLEM_TITLES,
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
from switchboard.replies import OptionList, QuickReplies

__all__ = ["OUTREACH_PROBLEMS", "outreach_routers"]

log = get_logger(__name__)

OUTREACH_PROBLEMS: dict[str, str] = {
    "outside_customer_service_window": "Outside the customer-service window",
    "conversation_closed": "The conversation is closed",
    "invalid_phone": "Not a phone number",
    "invalid_text": "Text not accepted",
    "no_whatsapp_number": "No WhatsApp number connected",
    "channel_account_required": "Name the number to write from",
    "channel_account_not_found": "No such number",
    "template_not_found": "No such template",
    "template_not_approved": "Template not approved",
    "template_parameters_invalid": "Template values do not fit",
    "waba_id_required": "WhatsApp Business Account id needed",
    "provider_refused": "WhatsApp refused",
}
"""The problem codes these routes add (stable, like every other code)."""
PROBLEM_TITLES.update(OUTREACH_PROBLEMS)


def _problem(exc: OutreachRefused | TemplateRefused) -> ApiProblem:
    if isinstance(exc, TemplateRefused):
        return ApiProblem(422, exc.code, str(exc))
    return ApiProblem(exc.status, exc.code, str(exc))


# --- Templates -------------------------------------------------------------------------------------

templates_router = public_router("/whatsapp/templates", tags=["whatsapp templates"])


class TemplatePublic(BaseModel):
    """A WhatsApp message template as last listed from Meta, and the values it takes."""

    id: uuid.UUID
    channel_account_id: uuid.UUID
    name: str
    language: str = Field(examples=["en_US"])
    status: str = Field(
        description="`APPROVED`, `PENDING`, `REJECTED`, `PAUSED`...: only approved ones are sent."
    )
    category: str = Field(description="`UTILITY`, `MARKETING` or `AUTHENTICATION`.")
    parameter_format: str = Field(
        description="`POSITIONAL` (`{{1}}`: give `body` as a list) or `NAMED` (an object)."
    )
    header_format: str | None = Field(description="`TEXT`, `IMAGE`, `VIDEO`, `DOCUMENT` or none.")
    header_text: str | None
    body_text: str
    body_values: list[str] = Field(
        description="The body's placeholders in order: `['1', '2']` or `['name']`."
    )
    button_values: int = Field(description="How many URL buttons take the end of their link as a value.")
    refreshed_at: datetime

    @classmethod
    def of(cls, row: WhatsAppTemplate) -> TemplatePublic:
        summary = template_summary(row)
        summary.pop("header_values")
        return cls(id=row.id, channel_account_id=row.channel_account_id, **summary)


@templates_router.get(
    "",
    operation_id="listTemplates",
    response_model=Page[TemplatePublic],
    summary="List the WhatsApp templates of your numbers",
    description="As last listed from Meta (`refreshTemplates`), newest refresh first.",
)
async def list_templates_route(
    caller: Annotated[ApiCaller, require_scope("messages:write")],
    session: SessionDep,
    channel_account_id: uuid.UUID | None = None,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
) -> Page[TemplatePublic]:
    query = select(WhatsAppTemplate).where(WhatsAppTemplate.tenant_id == caller.tenant.id)
    if channel_account_id is not None:
        query = query.where(WhatsAppTemplate.channel_account_id == channel_account_id)
    rows, next_cursor = await keyset_page(session, query, WhatsAppTemplate, limit=limit, cursor=cursor)
    return Page[TemplatePublic](items=[TemplatePublic.of(r) for r in rows], next_cursor=next_cursor)


class RefreshBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    channel_account_id: uuid.UUID | None = Field(
        None, description="The number; needed when you have several."
    )
    waba_id: str | None = Field(
        None,
        max_length=64,
        pattern=r"^\d+$",
        description="The WhatsApp Business Account id; default: the one of the last refresh.",
    )


class RefreshResult(BaseModel):
    channel_account_id: uuid.UUID
    templates: int
    approved: int


@templates_router.post(
    "/refresh",
    operation_id="refreshTemplates",
    response_model=RefreshResult,
    summary="List the templates from WhatsApp again",
    responses=problem_responses(502),
    description="Replaces the number's stored templates with what Meta lists now (every page).",
)
async def refresh_templates_route(
    body: RefreshBody,
    caller: Annotated[ApiCaller, require_scope("messages:write")],
    session: SessionDep,
    settings: SettingsDep,
) -> RefreshResult:
    query = select(ChannelAccount).where(
        ChannelAccount.tenant_id == caller.tenant.id,
        ChannelAccount.channel == "whatsapp",
        col(ChannelAccount.is_active).is_(True),  # a disconnected number is not one of yours any more
    )
    if body.channel_account_id is not None:
        query = query.where(ChannelAccount.id == body.channel_account_id)
    accounts = list((await session.exec(query.order_by(col(ChannelAccount.created_at)))).all())
    if not accounts:
        raise ApiProblem(404, "channel_account_not_found", "no WhatsApp number of yours has this id")
    if len(accounts) > 1:
        numbers = ", ".join(f"{a.id} (number id {a.external_account_id})" for a in accounts)
        raise ApiProblem(
            422,
            "channel_account_required",
            f"you have several WhatsApp numbers: name one as channel_account_id: {numbers}",
        )
    try:
        rows = await refresh_account_templates(session, settings, account=accounts[0], waba_id=body.waba_id)
    except TemplateRefused as exc:
        raise _problem(exc) from None
    except GraphSendError as exc:
        log.warning("templates_refresh_refused", code=exc.code, http_status=exc.http_status)
        raise ApiProblem(502, "provider_refused", refusal_of(exc)) from None
    await session.commit()
    return RefreshResult(
        channel_account_id=accounts[0].id,
        templates=len(rows),
        approved=sum(r.status.upper() == "APPROVED" for r in rows),
    )


# --- Starting and sending --------------------------------------------------------------------------

conversations_router = public_router("/conversations", tags=["conversations"])


class HeaderMedia(BaseModel):
    model_config = ConfigDict(extra="forbid")

    link: str | None = Field(None, max_length=2000, description="An `https://` address WhatsApp fetches.")
    id: str | None = Field(None, max_length=200, description="Or a media id of the number.")
    filename: str | None = Field(None, max_length=240, description="For a document header.")


class TemplateBody(BaseModel):
    """An approved template and the values that fill it (``listTemplates`` says which it takes)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(max_length=512, examples=["order_update"])
    language: str | None = Field(
        None, max_length=16, examples=["en_US"], description="Needed when it has several."
    )
    body: list[str] | dict[str, str] = Field(
        default_factory=list,
        max_length=100,
        examples=[["Ana", "#1042", "on its way"]],
        description="The body's values: a list for `{{1}}`, `{{2}}`...; an object for named values.",
    )
    header: str | None = Field(None, max_length=1024, description="The value of a text header.")
    header_media: HeaderMedia | None = None
    buttons: list[str] = Field(
        default_factory=list, max_length=10, description="The end of each URL button's link, in order."
    )

    def choice(self) -> TemplateChoice:
        media = self.header_media.model_dump(exclude_none=True) if self.header_media else None
        return TemplateChoice(
            self.name, self.language, TemplateValues(self.body, self.header, media, self.buttons)
        )


class StartBody(BaseModel):
    """A customer by phone and what to send them: a template, or free text inside their window."""

    model_config = ConfigDict(extra="forbid")

    phone: str = Field(max_length=32, examples=["+34 600 000 000"])
    template: TemplateBody | None = None
    text: str | None = Field(None, max_length=4096)
    channel_account_id: uuid.UUID | None = Field(
        None, description="The number to write from, when you have several."
    )


class SentPublic(BaseModel):
    conversation_id: uuid.UUID
    customer_id: uuid.UUID
    customer_created: bool
    via: Literal["template", "text", "interactive", "image", "document"]
    status: Literal["queued"] = Field(
        "queued", description="Delivery statuses follow as events (`message.*`)."
    )

    @classmethod
    def of(cls, sent: Sent) -> SentPublic:
        return cls(
            conversation_id=sent.conversation_id,
            customer_id=sent.customer_id,
            customer_created=sent.created,
            via=sent.via,
        )  # type: ignore[arg-type]


async def _queued(session: Any, resources: Any, work: Awaitable[Sent]) -> SentPublic:
    """Run a start or a send, commit what it wrote (a refusal: nothing, as a problem), and ask for its
    delivery now (the delivery sweep sends it anyway)."""
    try:
        sent = await work
    except OutreachRefused as exc:
        await session.rollback()
        raise _problem(exc) from None
    await session.commit()
    await deliver_soon(resources.redis, sent.conversation_id, source="api")
    return SentPublic.of(sent)


def _sender(caller: ApiCaller) -> dict[str, Any]:
    return {"key_id": str(caller.key.id), "key_name": getattr(caller.key, "name", None)}


@conversations_router.post(
    "",
    operation_id="startConversation",
    status_code=202,
    response_model=SentPublic,
    summary="Start a conversation with a customer by phone (WhatsApp)",
    responses=problem_responses(404, 409),
    description="With an approved template at any time; with free text only within 24 hours of the "
    "customer's last message (WhatsApp's customer-service window), else 409 "
    "`outside_customer_service_window` with the rule in `detail`. Queued through the outbox: "
    "delivery and retries are those of every message.",
)
async def start_conversation_route(
    body: StartBody,
    caller: Annotated[ApiCaller, require_scope("messages:write")],
    session: SessionDep,
    resources: ResourcesDep,
) -> SentPublic:
    return await _queued(
        session,
        resources,
        start_conversation(
            session,
            tenant_id=caller.tenant.id,
            phone=body.phone,
            template=body.template.choice() if body.template else None,
            text=body.text,
            channel_account_id=body.channel_account_id,
            sender=_sender(caller),
        ),
    )


class SendBody(BaseModel):
    """One message as a person: text, buttons or a list (with an optional text above), or a template."""

    model_config = ConfigDict(extra="forbid")

    text: str | None = Field(None, max_length=4096)
    interactive: Annotated[QuickReplies | OptionList, Field(discriminator="kind")] | None = Field(
        None,
        description='`{"kind": "buttons"|"list", "prompt", "options": [{"id", "title", '
        '"description"?}]}`: WhatsApp shows up to 3 short buttons or a list of up to 10 rows; more '
        "or longer options are sent as a numbered text the customer answers.",
    )
    template: TemplateBody | None = None


@conversations_router.post(
    "/{conversation_id}/messages",
    operation_id="sendMessage",
    status_code=202,
    response_model=SentPublic,
    summary="Send a message into a conversation as a person",
    responses=problem_responses(404, 409),
    description="Outside the channel's window free text is refused (409 `outside_customer_service_window`); "
    "a template (WhatsApp) is always allowed. Queued through the outbox.",
)
async def send_message_route(
    conversation_id: uuid.UUID,
    body: SendBody,
    caller: Annotated[ApiCaller, require_scope("messages:write")],
    session: SessionDep,
    resources: ResourcesDep,
) -> SentPublic:
    return await _queued(
        session,
        resources,
        send_message(
            session,
            tenant_id=caller.tenant.id,
            conversation_id=conversation_id,
            text=body.text,
            interactive=body.interactive,
            template=body.template.choice() if body.template else None,
            sender=_sender(caller),
        ),
    )


@conversations_router.post(
    "/{conversation_id}/attachments",
    operation_id="sendAttachment",
    status_code=202,
    response_model=SentPublic,
    summary="Send an image or a PDF into a WhatsApp conversation as a person",
    responses=problem_responses(404, 409, 413, 415, 502),
    description="Multipart form: `file` (a JPEG or PNG image up to 5 MB, or a PDF up to 100 MB, capped by "
    "the platform's media limit; the file's content decides its type) and an optional `caption`. Inside "
    "the 24-hour window only, as any free-form message.",
)
async def send_attachment_route(
    conversation_id: uuid.UUID,
    request: Request,
    caller: Annotated[ApiCaller, require_scope("messages:write")],
    session: SessionDep,
    settings: SettingsDep,
    resources: ResourcesDep,
) -> SentPublic:
    limit = settings.media_max_bytes
    allow_body(request, limit + 64 * 1024)  # the form's own lines around the file
    form = await request.form(max_files=1, max_fields=2)
    upload, caption = form.get("file"), form.get("caption")
    if upload is None or isinstance(upload, str):
        raise ApiProblem(
            422,
            "invalid_request",
            "send the file as the form field file",
            errors=[{"field": "file", "message": "required"}],
        )
    data = await upload.read(limit + 1)
    return await _queued(
        session,
        resources,
        send_attachment(
            session,
            tenant_id=caller.tenant.id,
            conversation_id=conversation_id,
            data=data,
            filename=upload.filename or "",
            caption=caption if isinstance(caption, str) else None,
            upload=lambda account, blob, mime, name: upload_media(settings, account, blob, mime, name),
            max_bytes=limit,
            sender=_sender(caller),
        ),
    )


# --- Webhook secrets -------------------------------------------------------------------------------

webhook_secrets_router = public_router("/webhooks", tags=["event webhooks"])


class RotateBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    overlap_s: int = Field(
        86_400,
        ge=0,
        le=ROTATION_OVERLAP_MAX_S,
        description="Seconds the current secret keeps signing too (0: stops now; at most a week).",
    )


class Rotated(BaseModel):
    secret: str = Field(description="The new signing secret, shown only now.")
    previous_secret_until: datetime | None


@webhook_secrets_router.post(
    "/{endpoint_id}/rotate-secret",
    operation_id="rotateWebhookSecret",
    response_model=Rotated,
    summary="Give an event webhook endpoint a new signing secret",
    description="Both secrets sign every delivery until `previous_secret_until`: switch the receiver "
    "to the new one whenever it is ready.",
)
async def rotate_webhook_secret(
    endpoint_id: uuid.UUID,
    body: RotateBody,
    caller: Annotated[ApiCaller, require_scope("webhooks:manage")],
    session: SessionDep,
    settings: SettingsDep,
) -> Rotated:
    endpoint = await session.get(WebhookEndpoint, endpoint_id)
    if endpoint is None or endpoint.tenant_id != caller.tenant.id:
        raise ApiProblem(404, "not_found", "webhook endpoint not found")
    cipher = CredentialCipher.from_settings(settings)
    try:
        secret = rotate_secret(endpoint, cipher, overlap_s=body.overlap_s)
    except EndpointRefused as exc:
        raise ApiProblem(422, "invalid_request", str(exc)) from None
    session.add(endpoint)
    await session.commit()
    return Rotated(secret=secret, previous_secret_until=previous_secret_until(endpoint, cipher))


def outreach_routers() -> list[APIRouter]:
    """The routers to mount next to the other ``/api/v1`` routers (the console service)."""
    return [templates_router, conversations_router, webhook_secrets_router]
