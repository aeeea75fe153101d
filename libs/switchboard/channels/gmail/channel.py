"""Gmail behind :class:`~switchboard.channels.base.Channel`: threaded replies, attachments, capabilities.

* One e-mail carries a whole reply (no splitting in practice: 100,000 characters), at any time (no
  service window), without read receipts or a correlation id echoed back.
* Inbound mail is **untrusted**: :attr:`Capabilities.untrusted_inbound` makes the orchestrator offer
  only read tools while a mail is in the turn's context (:func:`switchboard.tools.policy.offered`).
* A send finds the thread it answers from its outbox row (by correlation id): the conversation's
  newest inbound mail gives ``threadId``, ``Message-ID``, ``References`` and the subject
  (:mod:`switchboard.channels.gmail.send`). Our ``Message-ID`` is recorded before the call.
* Tokens come from :class:`~switchboard.channels.gmail.oauth.TokenSource`; a 401 refreshes once and
  retries. A mailbox that needs re-authorisation fails the send permanently (``needs_reauth``).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import update
from sqlalchemy.dialects.postgresql import insert
from sqlmodel import col, select

from switchboard.channels.base import (
    Capabilities,
    ChannelDeps,
    OutboundPart,
    SendError,
    SendErrorKind,
    register_channel,
)
from switchboard.channels.gmail import csat as csat_mail
from switchboard.channels.gmail.client import GmailApiError, GmailClient, OAuthError
from switchboard.channels.gmail.mime import b64url_decode
from switchboard.channels.gmail.oauth import MailboxNeedsReauth, TokenSource
from switchboard.channels.gmail.send import ReplyContext, build_reply, encode_raw, our_message_id
from switchboard.db.models import (
    Conversation,
    GmailSentMessage,
    Message,
    MessageDirection,
    Outbox,
    OutboxPurpose,
    Tenant,
)
from switchboard.observability import get_logger

if TYPE_CHECKING:
    from sqlmodel.ext.asyncio.session import AsyncSession

    from switchboard.db.models import ChannelAccount

__all__ = ["CAPABILITIES", "GmailChannel", "TEXT_LIMIT_CHARS", "classify"]

log = get_logger(__name__)

TEXT_LIMIT_CHARS = 100_000
"""Longest reply text we send in one mail (Gmail's own limit is the 25 MB message size)."""
CAPABILITIES = Capabilities(
    text_limit=TEXT_LIMIT_CHARS,
    text_unit="chars",
    caption_limit=TEXT_LIMIT_CHARS,
    service_window=None,
    untrusted_inbound=True,
    read_receipts=False,
    correlation_echo=False,
    reply_cap=True,
)
T = TypeVar("T")


def classify(exc: GmailApiError | OAuthError | MailboxNeedsReauth) -> SendError:
    """A Gmail or OAuth failure as the core's :class:`SendError`."""
    if isinstance(exc, MailboxNeedsReauth):
        return SendError(str(exc), kind=SendErrorKind.permanent, code="needs_reauth")
    if isinstance(exc, OAuthError):
        kind = SendErrorKind.transient if exc.is_transient else SendErrorKind.permanent
        return SendError(str(exc), kind=kind, code=f"oauth_{exc.error}"[:32])
    if exc.http_status == 429:
        kind = SendErrorKind.throttled
    elif exc.is_transient:
        kind = SendErrorKind.transient
    else:
        kind = SendErrorKind.permanent
    return SendError(
        str(exc),
        kind=kind,
        code=(exc.reason or str(exc.http_status or "network"))[:32],
        http_status=exc.http_status,
    )


class GmailChannel:
    """The Gmail API as a :class:`~switchboard.channels.base.Channel`."""

    name = "gmail"
    capabilities = CAPABILITIES
    label = "Gmail"
    business_app = "Gmail mailbox"
    reply_identity_kinds = ("email",)
    """Whom a reply is addressed to, best first."""
    account_id_label = None
    chart_colour = "#d93025"

    def __init__(self, deps: ChannelDeps) -> None:
        settings = deps.settings
        self.settings = settings
        self.client: GmailClient = deps.extra.get("gmail_client") or GmailClient(
            settings.resolved_gmail_api_base_url,
            settings.resolved_gmail_token_url,
            timeout_s=settings.gmail_timeout_s,
        )
        # without sessions (a caller that only needs capabilities) every provider call fails loudly
        self.sessions: Any = deps.sessions or _no_sessions
        self.tokens = TokenSource(
            self.sessions, deps.cipher, self.client, margin_s=settings.gmail_token_refresh_margin_s
        )

    async def call(self, account_id: uuid.UUID, fn: Callable[[str], Awaitable[T]]) -> T:
        """``fn(access_token)``; after a 401 the token is refreshed once and ``fn`` tried again.

        Raises:
            GmailApiError, OAuthError, MailboxNeedsReauth: as the client and token source raise them.
        """
        token = await self.tokens.token(account_id)
        try:
            return await fn(token)
        except GmailApiError as exc:
            if exc.http_status != 401:
                raise
            log.info("gmail_token_rejected", channel_account_id=str(account_id))
        return await fn(await self.tokens.token(account_id, force=True))

    async def _reply_context(
        self, session: AsyncSession, correlation_id: str
    ) -> tuple[ReplyContext, bool, str | None]:
        """``(context, automatic, sender_name)`` of the outbox part ``correlation_id``."""
        row = (await session.exec(select(Outbox).where(Outbox.correlation_id == correlation_id))).first()
        if row is None:
            return ReplyContext(thread_id=None, subject="", message_id=None), True, None
        conversation = await session.get(Conversation, row.conversation_id)
        original = (
            await session.exec(
                select(Message)
                .where(
                    Message.conversation_id == row.conversation_id,
                    Message.channel == "gmail",
                    Message.direction == MessageDirection.inbound.value,
                    Message.raw["gmail"].is_not(None),  # type: ignore[index]
                )
                .order_by(col(Message.sent_at).desc(), col(Message.created_at).desc())
                .limit(1)
            )
        ).first()
        facts = ((original.raw or {}).get("gmail") or {}) if original is not None else {}
        tenant = await session.get(Tenant, row.tenant_id)
        sender_name = (
            ((tenant.settings_extensions or {}).get("gmail") or {}).get("sender_name") if tenant else None
        )
        context = ReplyContext(
            thread_id=(conversation.external_thread_id if conversation else None) or facts.get("thread_id"),
            subject=str(facts.get("subject") or ""),
            message_id=facts.get("message_id"),
            references=tuple(facts.get("references") or ()),
        )
        automatic = row.purpose in (OutboxPurpose.reply.value, OutboxPurpose.notice.value)
        return context, automatic, sender_name

    def _text_of(self, part: OutboundPart) -> str:
        """The mail's text: the part's, or the satisfaction question with its signed links.

        Raises:
            SendError: a satisfaction question while ``CONSOLE_PUBLIC_URL`` (where its links open) is
                unset (permanent, ``no_console_url``).
        """
        body = part.interactive or {}
        if body.get("kind") != csat_mail.KIND:
            return part.text
        if not self.settings.console_public_url:
            raise SendError(
                "the satisfaction question's links need CONSOLE_PUBLIC_URL",
                kind=SendErrorKind.permanent,
                code="no_console_url",
            )
        return csat_mail.mail_text(self.settings, self.settings.console_public_url, part.text, body)

    async def send(
        self, account: ChannelAccount, recipient: str, part: OutboundPart, *, correlation_id: str
    ) -> str:
        """Send ``part`` as a reply in the customer's thread; returns the Gmail message id.

        Raises:
            SendError: classified failure (``needs_reauth`` when the grant is gone).
        """
        if not part.text.strip():
            raise SendError("nothing to send: empty part", kind=SendErrorKind.permanent, code="empty_part")
        text = self._text_of(part)
        mailbox = account.external_account_id
        message_id = our_message_id(correlation_id, mailbox)
        async with self.sessions() as session, session.begin():
            context, automatic, sender_name = await self._reply_context(session, correlation_id)
            await session.exec(
                insert(GmailSentMessage.__table__)  # type: ignore[arg-type]
                .values(
                    id=uuid.uuid4(),
                    tenant_id=account.tenant_id,
                    channel_account_id=account.id,
                    rfc_message_id=message_id,
                    thread_id=context.thread_id,
                    correlation_id=correlation_id,
                )
                .on_conflict_do_nothing(constraint="uq_gmail_sent_account_message_id")
            )
        mail = build_reply(
            mailbox=mailbox,
            mailbox_name=sender_name,
            to=recipient,
            text=text[:TEXT_LIMIT_CHARS],
            context=context,
            message_id=message_id,
            automatic=automatic,
        )
        raw = encode_raw(mail)
        try:
            sent = await self.call(
                account.id, lambda token: self.client.send(token, raw=raw, thread_id=context.thread_id)
            )
        except (GmailApiError, OAuthError, MailboxNeedsReauth) as exc:
            raise classify(exc) from exc
        gmail_id = str(sent.get("id") or "")
        async with self.sessions() as session, session.begin():
            await session.exec(
                update(GmailSentMessage)
                .where(
                    col(GmailSentMessage.channel_account_id) == account.id,
                    col(GmailSentMessage.rfc_message_id) == message_id,
                )
                .values(
                    gmail_message_id=gmail_id or None, thread_id=sent.get("threadId") or context.thread_id
                )
            )
        log.info("gmail_reply_sent", threaded=bool(context.thread_id), automatic=automatic)
        return gmail_id or message_id

    async def mark_read(
        self, account: ChannelAccount, external_id: str, *, sender: str | None = None
    ) -> None:
        """No read receipts in e-mail."""

    async def customer_profile(self, account: ChannelAccount, sender: str) -> dict[str, str] | None:
        """None: the ``From`` header names the sender."""
        return None

    async def attachment_bytes(
        self, account_id: uuid.UUID, ref: str, *, max_bytes: int
    ) -> tuple[bytes, str | None]:
        """The bytes of attachment ``ref`` (``<gmail id>/<partId>``): the part is looked up again by its
        stable ``partId`` (attachment ids change between calls).

        Raises:
            MediaUnavailable: transient for network/5xx, permanent for unknown parts or too large ones.
        """
        from switchboard.inbound.media import MediaUnavailable

        gmail_id, _, part_id = ref.partition("/")
        try:
            message = await self.call(account_id, lambda token: self.client.get_message(token, gmail_id))
            part = _find_part(message.get("payload") or {}, part_id)
            if part is None:
                raise MediaUnavailable(f"attachment {ref}: no such part", is_transient=False)
            body = part.get("body") or {}
            if int(body.get("size") or 0) > max_bytes:
                raise MediaUnavailable(f"attachment {ref}: larger than {max_bytes} bytes", is_transient=False)
            data = body.get("data")
            if not data and body.get("attachmentId"):
                attachment = await self.call(
                    account_id,
                    lambda token: self.client.get_attachment(token, gmail_id, str(body["attachmentId"])),
                )
                data = attachment.get("data")
        except (GmailApiError, OAuthError) as exc:
            raise MediaUnavailable(f"attachment {ref}: {exc}", is_transient=exc.is_transient) from exc
        except MailboxNeedsReauth as exc:
            raise MediaUnavailable(f"attachment {ref}: {exc}", is_transient=False) from exc
        if not data:
            raise MediaUnavailable(f"attachment {ref}: no data", is_transient=False)
        return b64url_decode(str(data)), part.get("mimeType")

    async def fetch_media(
        self, account: ChannelAccount, ref: str, *, max_bytes: int
    ) -> tuple[bytes, str | None]:
        """See :meth:`attachment_bytes`."""
        return await self.attachment_bytes(account.id, ref, max_bytes=max_bytes)

    async def on_record_only(self, session: AsyncSession, row: Message, ctx: Any) -> None:
        """Nothing channel-specific happens to recorded mail."""

    def acted_buttons(self, tenant_settings: Any) -> dict[str, str]:
        """E-mail has no buttons."""
        return {}

    def opt_out_reply(self, tenant_settings: Any) -> str:
        return ""

    def auto_reply_cap(self, tenant_settings: Any) -> tuple[int, float] | None:
        """``(replies, window_s)``: the tenant's per-thread cap on automatic replies."""
        section = tenant_settings.gmail
        return int(section.auto_reply_cap), float(section.auto_reply_window_s)

    async def aclose(self) -> None:
        await self.client.aclose()


def _no_sessions() -> Any:
    raise RuntimeError("the Gmail channel was built without database sessions (ChannelDeps.sessions)")


def _find_part(payload: dict[str, Any], part_id: str) -> dict[str, Any] | None:
    if str(payload.get("partId") or "") == part_id:
        return payload
    for child in payload.get("parts") or []:
        found = _find_part(child, part_id)
        if found is not None:
            return found
    return None


register_channel("gmail", GmailChannel)
