"""Instagram Direct behind :class:`~switchboard.channels.base.Channel`: sends, error classes, media,
capabilities.

Numbers and codes (Meta's Instagram Messaging docs: the Send API and Messenger Platform error reference): a text
holds at most 1,000 characters (counted in UTF-16 units, :data:`~switchboard.channels.instagram.send.TEXT_LIMIT`);
there are no captions (a media part sends its text first, then each attachment by URL); standard
messages may be sent within 24 hours of the customer's last message, and a *person's* reply up to 7
days after it with the ``HUMAN_AGENT`` tag (the delivery loop decides, :mod:`switchboard.outbox.policy`);
there are no templates. Meta echoes no correlation id of ours, but echoes every message we send
(``is_echo``): :mod:`switchboard.outbox.echoes` records those on our outbox row.

Error codes → the core's outcomes (:func:`classify`): 4, 17, 32, 613 (rate limits) → throttled; 10 with
subcode 2018278 / 2534022 (outside the allowed window) → window closed; 551 (the person is not
available), 100 with subcode 2018001 / 2534014 (no such user) and 190 (token expired or revoked) →
permanent; 1, 2, 5xx, 429 and network errors → transient; anything else → permanent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from switchboard.channels.accounts import access_token_of
from switchboard.channels.base import (
    Capabilities,
    ChannelDeps,
    OutboundPart,
    SendError,
    SendErrorKind,
    register_channel,
    split_text,
)
from switchboard.channels.instagram.send import (
    HUMAN_AGENT_WINDOW,
    SERVICE_WINDOW,
    TEXT_LIMIT,
    InstagramGraphClient,
    InstagramSendError,
)
from switchboard.egress import EgressPolicy
from switchboard.observability import get_logger

if TYPE_CHECKING:
    from sqlmodel.ext.asyncio.session import AsyncSession

    from switchboard.db.models import ChannelAccount, Message
    from switchboard.media import MediaStore

__all__ = [
    "CAPABILITIES",
    "InstagramChannel",
    "THROTTLE_CODES",
    "TRANSIENT_CODES",
    "WINDOW_SUBCODES",
    "classify",
    "quick_replies_of",
]

log = get_logger(__name__)

CAPABILITIES = Capabilities(
    text_limit=TEXT_LIMIT,
    text_unit="utf16",
    caption_limit=TEXT_LIMIT,
    service_window=SERVICE_WINDOW,
    outside_window=frozenset(),
    human_agent_window=HUMAN_AGENT_WINDOW,
    human_agent_tag="HUMAN_AGENT",
    untrusted_inbound=False,
    read_receipts=True,
    correlation_echo=False,
)
THROTTLE_CODES = frozenset({4, 17, 32, 613})
"""Application / page / account rate limits: hold the account's sends for a while."""
TRANSIENT_CODES = frozenset({1, 2})
"""Meta's "unknown" and "service temporarily unavailable": retry with back-off."""
WINDOW_SUBCODES = frozenset({2018278, 2534022})
"""``code 10``: "This message is sent outside of allowed window"."""
UNAVAILABLE = {(551, None), (100, 2018001), (100, 2534014)}
"""The person is not available / no matching user (their account is gone or blocks the business)."""
_MEDIA_TYPES = (("image/", "image"), ("video/", "video"), ("audio/", "audio"))


def classify(exc: InstagramSendError) -> SendError:
    """An :class:`InstagramSendError` as the core's :class:`SendError`."""
    code, subcode, status = exc.code, exc.subcode, exc.http_status
    if code == 10 and (subcode in WINDOW_SUBCODES or subcode is None):
        kind, label = SendErrorKind.window_closed, "window_closed"
    elif code in THROTTLE_CODES:
        kind, label = SendErrorKind.throttled, "rate_limited"
    elif (code, subcode) in UNAVAILABLE or (code == 551):
        kind, label = SendErrorKind.permanent, "user_unavailable"
    elif code == 190:
        kind, label = SendErrorKind.permanent, "token_expired"
    elif code in TRANSIENT_CODES or status is None or status >= 500 or status == 429:
        kind, label = SendErrorKind.transient, "transient"
    else:
        kind, label = SendErrorKind.permanent, "refused"
    if label == "token_expired":
        log.error("instagram_token_expired", code=code, subcode=subcode)
    return SendError(
        f"{label}: {exc}",
        kind=kind,
        code=str(code) if code is not None else None,
        http_status=status,
        retry_after_s=exc.retry_after_s,
    )


def quick_replies_of(interactive: dict[str, Any] | None) -> list[dict[str, str]]:
    """Buttons of an interactive part as quick replies ``[{title, payload}]``.

    Accepts ``{"buttons": [{"id", "title"}]}`` and WhatsApp's reply-button body
    (``action.buttons[].reply{id, title}``), so a reply written for either channel shows its buttons.
    """
    if not interactive:
        return []
    buttons = interactive.get("buttons")
    if buttons is None:
        buttons = [b.get("reply") or {} for b in (interactive.get("action") or {}).get("buttons") or []]
    out = []
    for button in buttons or []:
        if isinstance(button, dict) and button.get("title"):
            out.append({"title": str(button["title"]), "payload": str(button.get("id") or button["title"])})
    return out


def _attachment_type(media: dict[str, Any]) -> str:
    kind = str(media.get("kind") or "")
    if kind in ("image", "video", "audio"):
        return kind
    mime = str(media.get("mime") or "")
    for prefix, name in _MEDIA_TYPES:
        if mime.startswith(prefix):
            return name
    return "file"


class InstagramChannel:
    """Instagram Direct (Instagram Login or a Page-linked account) as a :class:`Channel`."""

    name = "instagram"
    capabilities = CAPABILITIES
    label = "Instagram"
    business_app = "Instagram app"
    reply_identity_kinds = ("igsid",)
    """Whom a reply is addressed to, best first."""
    account_id_label = "Instagram account"
    chart_colour = "#c13584"

    @staticmethod
    def render_structured(text: str, parts: Sequence[Any]) -> list[OutboundPart]:
        """Buttons and lists as quick replies, product cards as generic templates
        (:func:`switchboard.channels.instagram.replies.render_structured`; imported on use)."""
        from switchboard.channels.instagram.replies import render_structured

        return render_structured(text, parts)

    def __init__(self, deps: ChannelDeps) -> None:
        settings = deps.settings
        self._settings = settings
        self._cipher = deps.cipher
        self._http = deps.http
        self._injected: InstagramGraphClient | None = deps.extra.get("instagram_graph")
        self._graphs: dict[str, InstagramGraphClient] = {}
        self.graph: InstagramGraphClient = self._injected or self._client_for(
            settings.resolved_instagram_graph_base_url
        )
        self._store: MediaStore | None = deps.extra.get("media_store")

    def _client_for(self, base_url: str) -> InstagramGraphClient:
        if base_url not in self._graphs:
            self._graphs[base_url] = InstagramGraphClient(
                base_url,
                self._settings.instagram_api_version,
                timeout_s=self._settings.instagram_send_timeout_s,
            )
        return self._graphs[base_url]

    def graph_for(self, account: ChannelAccount) -> InstagramGraphClient:
        """The Graph client of ``account``'s API root (``channel_accounts.api_base_url``: the real API,
        this deployment's sandbox, or a URL); an injected client (tests) serves every account."""
        if self._injected is not None:
            return self._injected
        return self._client_for(self._settings.channel_api_base_url("instagram", account.api_base_url))

    @property
    def store(self) -> MediaStore:
        """The media storage (built on first use: a worker that never touches media opens none)."""
        if self._store is None:
            from switchboard.media import MediaStore

            self._store = MediaStore.from_settings(self._settings)
        return self._store

    def _token(self, account: ChannelAccount) -> str:
        # the sandbox accepts any bearer token; a real account always has one stored
        return access_token_of(account, self._cipher) or "sandbox-token"

    def _media_link(self, ref: str) -> str:
        from switchboard.media import is_stored
        from switchboard.media.links import media_url

        if not is_stored(ref):
            return ref  # already a URL Meta can fetch
        base = self._settings.media_public_base_url or self._settings.service_url(
            self._settings.instagram_port
        )
        return media_url(self._settings, ref, base_url=base)

    async def send(
        self, account: ChannelAccount, recipient: str, part: OutboundPart, *, correlation_id: str
    ) -> str:
        """Send one part: its text (split under the limit if a relay is longer; quick replies on the last
        piece), then each media item by URL; an ``interactive`` part holding a template ``attachment``
        (a product card) is sent as that message. Returns the mid of the last message sent.

        Raises:
            SendError: classified Graph API failure.
        """
        account_id, token = account.external_account_id, self._token(account)
        mid: str | None = None
        try:
            if part.type == "interactive" and part.interactive and "attachment" in part.interactive:
                return await self.graph.send_message(
                    account_id=account_id,
                    token=token,
                    recipient=recipient,
                    message=dict(part.interactive),
                    tag=part.tag,
                )
            if part.text:
                pieces = split_text(part.text, TEXT_LIMIT, "utf16")
                buttons = quick_replies_of(part.interactive)
                for index, piece in enumerate(pieces):
                    mid = await self.graph_for(account).send_text(
                        account_id=account_id,
                        token=token,
                        recipient=recipient,
                        text=piece,
                        quick_replies=buttons if index == len(pieces) - 1 else None,
                        tag=part.tag,
                    )
            for media in part.media:
                mid = await self.graph_for(account).send_attachment(
                    account_id=account_id,
                    token=token,
                    recipient=recipient,
                    kind=_attachment_type(media),
                    url=self._media_link(str(media["ref"])),
                    tag=part.tag,
                )
        except InstagramSendError as exc:
            raise classify(exc) from exc
        if mid is None:
            raise SendError("nothing to send: empty part", kind=SendErrorKind.permanent, code="empty_part")
        return mid

    async def mark_read(
        self, account: ChannelAccount, external_id: str, *, sender: str | None = None
    ) -> None:
        """``mark_seen`` on the thread with ``sender`` (Instagram marks threads, not single messages).

        Raises:
            SendError: Meta refused.
        """
        if not sender:
            return
        try:
            await self.graph_for(account).sender_action(
                account_id=account.external_account_id,
                token=self._token(account),
                recipient=sender,
                action="mark_seen",
            )
        except InstagramSendError as exc:
            raise classify(exc) from exc

    async def fetch_media(
        self, account: ChannelAccount, ref: str, *, max_bytes: int
    ) -> tuple[bytes, str | None]:
        """The bytes of a media ref: our copy (``store:<key>``, made at ingest), or — when the copy job
        has not run yet — the CDN URL, copied now. The MIME type is sniffed from the bytes (Instagram
        sends none for audio).

        Raises:
            MediaUnavailable: transient for network and 5xx; permanent for an expired link, a missing
                copy or a file over the limit.
        """
        from switchboard.inbound.media import MediaUnavailable
        from switchboard.media import MediaCopyFailed, is_stored, sniff_mime

        try:
            if is_stored(ref):
                data = await self.store.get(ref)
                return data, sniff_mime(data)
            stored = await self.store.copy_url(
                self._http,
                ref,
                namespace=f"instagram/{account.tenant_id}",
                timeout_s=self._settings.instagram_send_timeout_s,
                egress=EgressPolicy.for_channels(self._settings),
            )
            return await self.store.get(stored.ref), stored.mime
        except MediaCopyFailed as exc:
            raise MediaUnavailable(
                f"instagram media: {exc}", is_transient=exc.is_transient, reason=exc.reason
            ) from exc

    async def on_record_only(self, session: AsyncSession, row: Message, ctx: Any) -> None:
        """Nothing Instagram-only: echoes are matched to our sends by the core (:mod:`switchboard.outbox.echoes`)."""

    async def customer_profile(self, account: ChannelAccount, sender: str) -> dict[str, str] | None:
        """``GET /{igsid}?fields=name,username`` (the webhooks carry no name).

        Raises:
            SendError: Meta refused (no permission, the user is gone).
        """
        try:
            return await self.graph_for(account).profile(igsid=sender, token=self._token(account))
        except InstagramSendError as exc:
            raise classify(exc) from exc

    def acted_buttons(self, tenant_settings: Any) -> dict[str, str]:
        """None of its own: quick replies and ice breakers that hand over are ``handoff.button_payloads``."""
        return {}

    def opt_out_reply(self, tenant_settings: Any) -> str:
        """Instagram has no marketing templates to opt out of; the WhatsApp text is reused if ever asked."""
        return str(tenant_settings.whatsapp.opt_out_reply)

    def auto_reply_cap(self, tenant_settings: Any) -> tuple[int, float] | None:
        """None: no cap on automatic replies (:attr:`Capabilities.reply_cap` is off)."""
        return None

    async def aclose(self) -> None:
        for graph in {id(g): g for g in [self.graph, *self._graphs.values()]}.values():
            await graph.aclose()


register_channel("instagram", InstagramChannel)
