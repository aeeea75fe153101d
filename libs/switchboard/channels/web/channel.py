"""Website chat behind :class:`~switchboard.channels.base.Channel`: a send appends to the visitor's stream.

There is no provider: "sending" is appending the part to the visitor's persisted stream
(:mod:`switchboard.channels.web.stream`) and waking their open connections, so the delivery loop,
the outbox statuses, retries and the handoff work as on every channel. The widget reports
``delivered`` and ``read`` back (:mod:`switchboard.channels.web.normalize`). Capabilities: no service
window (a business may answer a website visitor at any time), 4,000 characters per message (the
widget shows any length; the limit keeps one bubble readable), read receipts (the visitor sees
"Read" under their message when the answer is on its way). Inbound text is the visitor's own words,
not external content. Buttons, lists and product cards are drawn by the widget itself
(:meth:`WebChannel.render_structured`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from switchboard.channels.base import (
    Capabilities,
    ChannelDeps,
    OutboundPart,
    SendError,
    SendErrorKind,
    register_channel,
)
from switchboard.channels.web.stream import append_event, event_external_id, mark_visitor_read, notify
from switchboard.channels.web.widgets import USER_PREFIX, user_address, valid_visitor_id
from switchboard.i18n import N_
from switchboard.observability import get_logger

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from sqlmodel.ext.asyncio.session import AsyncSession

    from switchboard.db.models import ChannelAccount, Message
    from switchboard.media import MediaStore

__all__ = ["CAPABILITIES", "TEXT_LIMIT", "WEB_PREFIX", "WebChannel", "public_url"]

log = get_logger(__name__)

TEXT_LIMIT = 4000
CAPABILITIES = Capabilities(
    text_limit=TEXT_LIMIT,
    text_unit="chars",
    caption_limit=TEXT_LIMIT,
    service_window=None,
    read_receipts=True,
)


WEB_PREFIX = "/web"
"""Every route of the web service is under this path (the edge forwards ``/web/*`` to it as it is)."""


def public_url(settings: Any) -> str:
    """Where visitors' browsers reach the web service, ``/web`` included: ``WEB_PUBLIC_URL``, else
    ``PUBLIC_BASE_URL/web``, else this machine's ``WEB_PORT``."""
    if settings.web_public_url:
        return str(settings.web_public_url).rstrip("/")
    if settings.public_base_url:
        return f"{str(settings.public_base_url).rstrip('/')}{WEB_PREFIX}"
    return f"{settings.service_url(settings.web_port)}{WEB_PREFIX}"


def _structured(part: Any) -> dict[str, Any]:
    return dict(part.model_dump(mode="json", exclude_none=True))


class WebChannel:
    """The website chat widget as a :class:`Channel`."""

    name = "web"
    capabilities = CAPABILITIES
    label = N_("Website chat")
    """Translated where people read it (the console, the agents' notices stay English)."""
    business_app = "website chat"
    reply_identity_kinds = ("web_user", "visitor")
    """A verified user's replies go to their user stream (every browser they sign in on), else the visitor's."""
    account_id_label = None
    """Widgets are created in the console (a key and a secret), not connected by an id and a token."""
    chart_colour = "#0f766e"

    @staticmethod
    def address_of(kind: str, value: str) -> str:
        """A verified user (identity ``web_user``) is streamed at ``user:<id>`` (every browser they sign
        in on); a visitor at their visitor id."""
        return user_address(value) if kind == "web_user" else value

    @staticmethod
    def show_address(address: str) -> str:
        """How people (an agent on WhatsApp) see a visitor: ``user 42`` for a verified user (``user:42`` or
        the bare id a customer is keyed by); anything shaped like a visitor id as ``visitor`` and four hex
        digits of its SHA-256, never the id itself (it is the visitor's only key to their stream)."""
        user = address.removeprefix(USER_PREFIX)
        if user == address and valid_visitor_id(address):
            return "visitor " + hashlib.sha256(address.encode()).hexdigest()[:4]
        return "user " + user

    @staticmethod
    def render_structured(text: str, parts: Sequence[Any]) -> list[OutboundPart]:
        """The text, then each buttons / list / product part as one ``interactive`` part whose body is the
        part itself (``{"kind": "buttons", "prompt", "options": [...]}``): the widget draws it natively."""
        out = [OutboundPart(type="text", text=text.strip())] if text.strip() else []
        for part in parts:
            body = _structured(part)
            out.append(
                OutboundPart(
                    type="interactive",
                    text=str(body.get("prompt") or body.get("title") or ""),
                    interactive=body,
                )
            )
        return out

    def __init__(self, deps: ChannelDeps) -> None:
        self._settings = deps.settings
        self._sessions = deps.sessions
        self._redis: Redis | None = deps.extra.get("redis")
        self._own_redis = self._redis is None
        self._store: MediaStore | None = deps.extra.get("media_store")

    @property
    def store(self) -> MediaStore:
        if self._store is None:
            from switchboard.media import MediaStore

            self._store = MediaStore.from_settings(self._settings)
        return self._store

    def _redis_client(self) -> Redis:
        if self._redis is None:
            from redis.asyncio import Redis

            from switchboard.runtime.resources import require_redis_url

            self._redis = Redis.from_url(require_redis_url(self._settings))
        return self._redis

    def _media(self, media: dict[str, Any]) -> dict[str, Any]:
        from switchboard.media import is_stored
        from switchboard.media.links import media_url

        ref = str(media.get("ref") or "")
        url = media_url(self._settings, ref, base_url=public_url(self._settings)) if is_stored(ref) else ref
        item = {
            "url": url,
            "mime": media.get("mime"),
            "filename": media.get("filename"),
            "caption": media.get("caption"),
            "kind": media.get("kind"),
        }
        return {k: v for k, v in item.items() if v}

    async def send(
        self, account: ChannelAccount, recipient: str, part: OutboundPart, *, correlation_id: str
    ) -> str:
        """Append ``part`` to ``recipient``'s stream (once per ``correlation_id``) and wake their widget.
        Returns the event's id (``web.<hash>``), which the widget reports ``delivered`` and ``read`` for.

        Raises:
            SendError: permanent for an empty part; transient when the database cannot take the append
                (a notification that fails is only logged: the widget finds the event on its next look).
        """
        if not part.text and not part.media and not part.interactive:
            raise SendError("nothing to send: empty part", kind=SendErrorKind.permanent, code="empty_part")
        if self._sessions is None:
            raise SendError(
                "no database sessions in this process", kind=SendErrorKind.transient, code="no_db"
            )
        payload: dict[str, Any] = {"text": part.text}
        if part.media:
            payload["media"] = [self._media(m) for m in part.media]
        if part.interactive:
            payload["interactive"] = dict(part.interactive)
        external_id = event_external_id(correlation_id)
        try:
            async with self._sessions() as session, session.begin():
                seq = await append_event(
                    session,
                    tenant_id=account.tenant_id,
                    account_id=account.id,
                    address=recipient,
                    kind="reply",
                    external_id=external_id,
                    payload=payload,
                )
        except Exception as exc:  # noqa: BLE001 (any database failure: the delivery loop retries)
            raise SendError(
                f"transient: {type(exc).__name__}", kind=SendErrorKind.transient, code="store"
            ) from exc
        try:
            await notify(self._redis_client(), account.id, recipient, {"type": "new", "seq": seq})
        except Exception as exc:  # noqa: BLE001 (the stream polls too)
            log.warning("web_notify_failed", error=f"{type(exc).__name__}: {exc}"[:200])
        return external_id

    async def mark_read(
        self, account: ChannelAccount, external_id: str, *, sender: str | None = None
    ) -> None:
        """Tell the visitor's widget their message ``external_id`` was read: recorded on the message's
        stream event (a reloaded widget still shows it read), then a live ``seen`` notice."""
        if not sender:
            return
        try:
            async with self._sessions() as session, session.begin():
                await mark_visitor_read(
                    session, account_id=account.id, address=sender, external_id=external_id
                )
        except Exception as exc:  # noqa: BLE001 (any database failure: the delivery loop retries)
            raise SendError(f"store: {type(exc).__name__}", kind=SendErrorKind.transient) from exc
        try:
            await notify(self._redis_client(), account.id, sender, {"type": "seen", "id": external_id})
        except Exception as exc:  # noqa: BLE001 (a courtesy)
            raise SendError(f"notify: {type(exc).__name__}", kind=SendErrorKind.transient) from exc

    async def fetch_media(
        self, account: ChannelAccount, ref: str, *, max_bytes: int
    ) -> tuple[bytes, str | None]:
        """The bytes of a visitor's file (stored by the web service when it arrived).

        Raises:
            MediaUnavailable: permanent when the copy is missing or over ``max_bytes``.
        """
        from switchboard.inbound.media import MediaUnavailable
        from switchboard.media import MediaCopyFailed, sniff_mime

        try:
            data = await self.store.get(ref)
        except MediaCopyFailed as exc:
            raise MediaUnavailable(
                f"web media: {exc}", is_transient=exc.is_transient, reason=exc.reason
            ) from exc
        if len(data) > max_bytes:
            raise MediaUnavailable("web media: over the limit", is_transient=False, reason="too_large")
        return data, sniff_mime(data)

    async def on_record_only(self, session: AsyncSession, row: Message, ctx: Any) -> None:
        """Nothing web-only."""

    async def customer_profile(self, account: ChannelAccount, sender: str) -> dict[str, str] | None:
        """None: a verified page passes the name with the message."""
        return None

    def acted_buttons(self, tenant_settings: Any) -> dict[str, str]:
        """None of its own (buttons that hand over are ``handoff.button_payloads``)."""
        return {}

    def opt_out_reply(self, tenant_settings: Any) -> str:
        """The website chat has no marketing messages to opt out of; the WhatsApp text if ever asked."""
        return str(tenant_settings.whatsapp.opt_out_reply)

    def auto_reply_cap(self, tenant_settings: Any) -> tuple[int, float] | None:
        """None: no cap on automatic replies."""
        return None

    async def aclose(self) -> None:
        if self._redis is not None and self._own_redis:
            await self._redis.aclose()


register_channel("web", WebChannel)
