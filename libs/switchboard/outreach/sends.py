"""Start a conversation with a customer, and send into one as a person: checked, then written to the
one outbox (:func:`switchboard.outbox.write_outbox`, purpose ``human_reply``) in the caller's
transaction; the delivery loop sends it like any other message.

The customer-service window (WhatsApp: 24 hours after the customer's last message) is checked here
first, so a refusal comes back at once and in words: free text outside it is refused with the code
``outside_customer_service_window``; an approved template is always allowed. The delivery loop
checks it again when it sends (:func:`switchboard.outbox.policy.may_send`).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlmodel import col, func, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.channels.base import OutboundPart, channel_capabilities, within_window
from switchboard.channels.whatsapp.templates import (
    TemplateRefused,
    TemplateValues,
    fill_template,
    filled_text,
    find_template,
)
from switchboard.conversations.history import append_message
from switchboard.conversations.identities import Identity, resolve_customer
from switchboard.conversations.lifecycle import Actor, open_conversation
from switchboard.db.models import (
    ChannelAccount,
    Conversation,
    ConversationStatus,
    Customer,
    MessageRole,
    OutboxPurpose,
    utcnow,
)
from switchboard.errors import SwitchboardError
from switchboard.observability import get_logger
from switchboard.outbox.writer import OutboxItem, reply_items, write_outbox
from switchboard.replies import OptionList, QuickReplies
from switchboard.validation import check_text

__all__ = [
    "ATTACHMENT_TYPES",
    "OutreachRefused",
    "send_attachment",
    "Sent",
    "TemplateChoice",
    "TEXT_MAX_CHARS",
    "normalize_phone",
    "send_message",
    "start_conversation",
    "window_state",
]

log = get_logger(__name__)

TEXT_MAX_CHARS = 4096
"""Characters of one text a person sends (longer texts are refused, not cut)."""
_PHONE = re.compile(r"^\d{8,15}$")


class OutreachRefused(SwitchboardError):
    """A start or a send that cannot go out as asked.

    Attributes:
        status: the HTTP status a route answers (404, 409, 422).
        code: stable code (``outside_customer_service_window``, ``invalid_phone``,
            ``template_not_found``...).
    """

    def __init__(self, status: int, code: str, detail: str) -> None:
        self.status, self.code = status, code
        super().__init__(detail)


@dataclass(frozen=True)
class TemplateChoice:
    """An approved template to send and the values that fill it."""

    name: str
    language: str | None = None
    """Meta's code (``en_US``, ``es``); ``None``: the template's one language."""
    values: TemplateValues = field(default_factory=TemplateValues)


@dataclass(frozen=True)
class Sent:
    """What was written: the conversation, its customer, and the outbox rows (sent by the delivery loop)."""

    conversation_id: uuid.UUID
    customer_id: uuid.UUID
    outbox_rows: int
    created: bool
    """Whether the customer was new (a start only)."""
    via: str
    """``template``, ``text`` or ``interactive``."""


def normalize_phone(phone: str) -> str:
    """E.164 digits without ``+`` (WhatsApp's ``wa_id``): spaces, dots, dashes and brackets dropped.

    Raises:
        OutreachRefused: not 8 to 15 digits once cleaned (``invalid_phone``).
    """
    digits = re.sub(r"[\s().\-]", "", phone or "").removeprefix("+").removeprefix("00")
    if not _PHONE.match(digits) or digits.startswith("0"):
        raise OutreachRefused(
            422, "invalid_phone", "give the phone number in international form, e.g. +34 600 000 000"
        )
    return digits


def window_state(channel: str, last_customer_message_at: datetime | None, now: datetime) -> dict[str, Any]:
    """Whether free text may go out now on ``channel``: ``{"open", "hours", "closes_at"}`` (``hours`` 0
    and ``open`` true for a channel without a window)."""
    caps = channel_capabilities(channel)
    window = caps.service_window if caps is not None else None
    if window is None:
        return {"open": True, "hours": 0, "closes_at": None}
    return {
        "open": within_window(caps, last_customer_message_at, now),  # type: ignore[arg-type]
        "hours": int(window.total_seconds() // 3600),
        "closes_at": last_customer_message_at + window if last_customer_message_at else None,
    }


def _ago(delta: timedelta) -> str:
    hours = int(delta.total_seconds() // 3600)
    return f"{hours // 24} days ago" if hours >= 48 else f"{hours} hours ago"


def _outside_window(channel: str, last: datetime | None, now: datetime, hours: int) -> OutreachRefused:
    when = (
        "the customer has never written to this number"
        if last is None
        else (f"the customer last wrote {_ago(now - last)}")
    )
    label = "WhatsApp" if channel == "whatsapp" else channel
    return OutreachRefused(
        409,
        "outside_customer_service_window",
        f"{label} lets a business send free text only within {hours} hours of the customer's last "
        f"message, and {when}. Send an approved template instead; free text is possible again once the "
        "customer answers.",
    )


async def _whatsapp_account(
    session: AsyncSession, tenant_id: uuid.UUID, channel_account_id: uuid.UUID | None
) -> ChannelAccount:
    query = select(ChannelAccount).where(
        ChannelAccount.tenant_id == tenant_id,
        ChannelAccount.channel == "whatsapp",
        col(ChannelAccount.is_active).is_(True),
    )
    if channel_account_id is not None:
        query = query.where(ChannelAccount.id == channel_account_id)
    accounts = list((await session.exec(query.order_by(col(ChannelAccount.created_at)))).all())
    if channel_account_id is not None and not accounts:
        raise OutreachRefused(
            404, "channel_account_not_found", "no active WhatsApp number of yours has this id"
        )
    if not accounts:
        raise OutreachRefused(422, "no_whatsapp_number", "connect a WhatsApp number first")
    if len(accounts) > 1:
        raise OutreachRefused(
            422,
            "channel_account_required",
            f"you have {len(accounts)} WhatsApp numbers: name the one to write from (channel_account_id)",
        )
    return accounts[0]


def _checked_text(text: str) -> str:
    try:
        return check_text(text, field="text", max_length=TEXT_MAX_CHARS)
    except ValueError as exc:
        raise OutreachRefused(422, "invalid_text", str(exc)) from None


async def start_conversation(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    phone: str,
    template: TemplateChoice | None = None,
    text: str | None = None,
    channel_account_id: uuid.UUID | None = None,
    sender: dict[str, Any] | None = None,
    trace_id: str | None = None,
    now: datetime | None = None,
) -> Sent:
    """Write to a customer by phone on WhatsApp: a template, or free text when their window is open.
    The customer is found by the number or created; their open conversation on the number is used, or
    a new one started. The caller commits, then asks for delivery (``deliver_soon``).

    Args:
        phone: the customer's number in international form (``+34 600 000 000``).
        template / text: exactly one.
        channel_account_id: the number to write from (needed when the tenant has several).
        sender: who sends (``{"sender": "api", "key_id": ...}``), kept on the history row.

    Returns:
        :class:`Sent` (``via`` ``template`` or ``text``).

    Raises:
        OutreachRefused: ``invalid_phone``, ``no_whatsapp_number``, ``channel_account_required`` /
            ``channel_account_not_found``, ``invalid_request`` (neither or both of template and text),
            ``invalid_text``, ``template_not_found`` / ``template_not_approved`` /
            ``template_parameters_invalid`` (422), ``outside_customer_service_window`` (409).
    """
    if (template is None) == (text is None):
        raise OutreachRefused(422, "invalid_request", "send either a template or a text")
    digits = normalize_phone(phone)
    account = await _whatsapp_account(session, tenant_id, channel_account_id)
    part, history = await _template_part(session, account, template) if template else (None, "")
    body = _checked_text(text) if text is not None else ""
    now = now or utcnow()
    # the customer by their number (never merged with anyone); their open conversation on this number
    resolved = await resolve_customer(
        session, tenant_id=tenant_id, identities=[Identity("whatsapp", "wa_id", digits)]
    )
    conversation = await open_conversation(
        session, customer=resolved.customer, channel_account_id=account.id, actor=Actor.api()
    )
    if part is None:
        last = await _last_customer_message(session, resolved.customer, account)
        state = window_state("whatsapp", last, now)
        if not state["open"]:
            raise _outside_window("whatsapp", last, now, state["hours"])
        part, history = OutboundPart(type="text", text=body), body
    rows = await _write(session, conversation, resolved.customer, [part], history, sender, trace_id)
    log.info(
        "outreach_started",
        tenant_id=str(tenant_id),
        conversation_id=str(conversation.id),
        via=part.type,
        created=resolved.created,
    )
    return Sent(conversation.id, resolved.customer.id, rows, resolved.created, part.type)


async def _last_customer_message(
    session: AsyncSession, customer: Customer, account: ChannelAccount
) -> datetime | None:
    """When the customer last wrote to this number, in any of their conversations (the window is
    WhatsApp's, per customer and number, whatever became of the conversation)."""
    return (
        await session.exec(
            select(func.max(Conversation.last_customer_message_at)).where(
                Conversation.tenant_id == customer.tenant_id,
                Conversation.customer_id == customer.id,
                Conversation.channel_account_id == account.id,
            )
        )
    ).one()


async def _template_part(
    session: AsyncSession, account: ChannelAccount, choice: TemplateChoice
) -> tuple[OutboundPart, str]:
    try:
        stored = await find_template(session, account=account, name=choice.name, language=choice.language)
        filled = fill_template(stored, choice.values)
    except TemplateRefused as exc:
        raise OutreachRefused(422, exc.code, str(exc)) from None
    return OutboundPart(type="template", template=filled), filled_text(stored, choice.values)


def _address(customer: Customer) -> str:
    return customer.phone or customer.external_user_id


async def _write(
    session: AsyncSession,
    conversation: Conversation,
    customer: Customer,
    parts: list[OutboundPart],
    history: str,
    sender: dict[str, Any] | None,
    trace_id: str | None,
) -> int:
    proxy = {"sender": "api", **(sender or {}), "relayed_to": _address(customer)}
    append_message(
        session,
        conversation=conversation,
        role=MessageRole.human_agent,
        text=history,
        proxy_metadata=proxy,
        trace_id=trace_id,
    )
    items = [
        OutboxItem(
            conversation_id=conversation.id,
            channel=conversation.channel,
            channel_account_id=conversation.channel_account_id,
            recipient=_address(customer),
            part=part,
            purpose=OutboxPurpose.human_reply,
            proxy=proxy,
        )
        for part in parts
    ]
    return await write_outbox(session, tenant_id=conversation.tenant_id, items=items, trace_id=trace_id)


async def send_message(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    conversation_id: uuid.UUID,
    text: str | None = None,
    interactive: QuickReplies | OptionList | None = None,
    template: TemplateChoice | None = None,
    sender: dict[str, Any] | None = None,
    trace_id: str | None = None,
    now: datetime | None = None,
) -> Sent:
    """Send into a conversation as a person: text, buttons or a list (rendered by the channel within its
    limits, as the assistant's own buttons are: :func:`switchboard.channels.render.render_reply`), or a
    WhatsApp template. The caller commits, then asks for delivery.

    Raises:
        OutreachRefused: ``not_found`` (404), ``conversation_closed`` (409),
            ``outside_customer_service_window`` (409), ``invalid_request`` / ``invalid_text`` and the
            template codes (422).
    """
    if sum(x is not None for x in (text, interactive, template)) == 0:
        raise OutreachRefused(422, "invalid_request", "send a text, buttons, a list or a template")
    if template is not None and (text is not None or interactive is not None):
        raise OutreachRefused(422, "invalid_request", "a template goes alone, without text or buttons")
    conversation = await session.get(Conversation, conversation_id, with_for_update=True)
    if conversation is None or conversation.tenant_id != tenant_id:
        raise OutreachRefused(404, "not_found", "conversation not found")
    if conversation.status == ConversationStatus.closed.value:
        raise OutreachRefused(409, "conversation_closed", "the conversation is closed: start a new one")
    customer = await session.get(Customer, conversation.customer_id)
    assert customer is not None
    now = now or utcnow()
    if template is not None:
        if conversation.channel != "whatsapp" or conversation.channel_account_id is None:
            raise OutreachRefused(422, "invalid_request", "templates are sent on WhatsApp only")
        account = await session.get(ChannelAccount, conversation.channel_account_id)
        assert account is not None
        part, history = await _template_part(session, account, template)
        parts = [part]
    else:
        body = _checked_text(text) if text is not None else ""
        _check_window(conversation, now)
        parts = [
            item.part
            for item in reply_items(
                body,
                [interactive] if interactive is not None else [],
                conversation_id=conversation.id,
                channel=conversation.channel,
                channel_account_id=conversation.channel_account_id,
                recipient="",
            )
        ]
        history = (
            body if interactive is None else "\n\n".join(x for x in (body, _choices_text(interactive)) if x)
        )
    rows = await _write(session, conversation, customer, parts, history, sender, trace_id)
    via = (
        "template" if template else ("interactive" if any(p.type == "interactive" for p in parts) else "text")
    )
    log.info("outreach_sent", tenant_id=str(tenant_id), conversation_id=str(conversation.id), via=via)
    return Sent(conversation.id, customer.id, rows, False, via)


def _choices_text(part: QuickReplies | OptionList) -> str:
    return part.prompt + "\n" + "\n".join(f"- {option.title}" for option in part.options)


def _check_window(conversation: Conversation, now: datetime) -> None:
    """Free text within the channel's window; past it, a person may still answer within the channel's
    human-agent extension (Instagram: 7 days), which the delivery loop tags."""
    caps = channel_capabilities(conversation.channel)
    last = conversation.last_customer_message_at
    if caps is None or caps.service_window is None or within_window(caps, last, now):
        return
    if caps.human_agent_window is not None and last is not None and now - last < caps.human_agent_window:
        return
    hours = int(caps.service_window.total_seconds() // 3600)
    raise _outside_window(conversation.channel, last, now, hours)


ATTACHMENT_TYPES: dict[str, tuple[str, int]] = {
    "image/jpeg": ("image", 5 * 1024 * 1024),
    "image/png": ("image", 5 * 1024 * 1024),
    "application/pdf": ("document", 100 * 1024 * 1024),
}
"""What a person may attach, by the type the file's own bytes say (:func:`switchboard.media.sniff.sniff_mime`)
→ how WhatsApp sends it and its largest size there (Cloud API "supported media types": images 5 MB,
documents 100 MB); the platform's ``MEDIA_MAX_BYTES`` caps both."""


def check_attachment(data: bytes, *, max_bytes: int) -> tuple[str, str]:
    """``(mime, kind)`` of a file a person attaches, from its bytes (the name and the declared type are
    not trusted).

    Raises:
        OutreachRefused: ``unsupported_media_type`` (not a JPEG, PNG or PDF; empty) or ``body_too_large``.
    """
    from switchboard.media.sniff import sniff_mime

    mime = sniff_mime(data) if data else None
    if mime not in ATTACHMENT_TYPES:
        raise OutreachRefused(
            415,
            "unsupported_media_type",
            "attach a JPEG or PNG image, or a PDF document (the file's content says what it is)",
        )
    kind, limit = ATTACHMENT_TYPES[mime]
    limit = min(limit, max_bytes)
    if len(data) > limit:
        raise OutreachRefused(
            413, "body_too_large", f"a {kind} may be at most {limit} bytes; this one is {len(data)}"
        )
    return mime, kind


async def send_attachment(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    conversation_id: uuid.UUID,
    data: bytes,
    filename: str,
    caption: str | None,
    upload: Any,
    max_bytes: int,
    sender: dict[str, Any] | None = None,
    trace_id: str | None = None,
    now: datetime | None = None,
) -> Sent:
    """Send an image or a document into a WhatsApp conversation as a person: checked
    (:func:`check_attachment`), handed to WhatsApp as a media object of the conversation's number, then
    written to the outbox like any message. The caller commits and asks for delivery.

    Args:
        upload: ``async (account, data, mime, filename) -> media id`` (the number's Graph client).
        max_bytes: the platform's largest media file (``MEDIA_MAX_BYTES``).

    Raises:
        OutreachRefused: as :func:`send_message`, ``unsupported_media_type`` (415), ``body_too_large`` (413),
            ``provider_refused`` (502: WhatsApp refused the file or was unreachable).
    """
    mime, kind = check_attachment(data, max_bytes=max_bytes)
    name = re.sub(r"[^\w.\- ]", "_", (filename or "").strip())[:200] or (
        "file.pdf" if kind == "document" else "image"
    )
    caption = _checked_text(caption) if caption else None
    conversation = await session.get(Conversation, conversation_id, with_for_update=True)
    if conversation is None or conversation.tenant_id != tenant_id:
        raise OutreachRefused(404, "not_found", "conversation not found")
    if conversation.status == ConversationStatus.closed.value:
        raise OutreachRefused(409, "conversation_closed", "the conversation is closed: start a new one")
    if conversation.channel != "whatsapp" or conversation.channel_account_id is None:
        raise OutreachRefused(422, "invalid_request", "files are sent on WhatsApp conversations only")
    _check_window(conversation, now or utcnow())
    account = await session.get(ChannelAccount, conversation.channel_account_id)
    customer = await session.get(Customer, conversation.customer_id)
    assert account is not None and customer is not None
    try:
        media_id = await upload(account, data, mime, name)
    except Exception as exc:  # noqa: BLE001 (the Graph client's error, said in words)
        log.warning(
            "outreach_upload_failed",
            conversation_id=str(conversation.id),
            error=type(exc).__name__,
            code=getattr(exc, "code", None),
        )
        raise OutreachRefused(
            502, "provider_refused", "WhatsApp did not take the file; try again later"
        ) from None
    entry = {
        "ref": media_id,
        "kind": kind,
        "mime": mime,
        **({"caption": caption} if caption else {}),
        **({"filename": name} if kind == "document" else {}),
    }
    part = OutboundPart(type="media", media=(entry,))
    rows = await _write(
        session, conversation, customer, [part], caption or f"[{kind}: {name}]", sender, trace_id
    )
    log.info("outreach_sent", tenant_id=str(tenant_id), conversation_id=str(conversation.id), via=kind)
    return Sent(conversation.id, customer.id, rows, False, kind)
