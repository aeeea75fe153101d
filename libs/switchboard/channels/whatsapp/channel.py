"""WhatsApp behind :class:`~switchboard.channels.base.Channel`: sends, error classes, media, capabilities.

Numbers and codes come from Meta's Cloud API reference: a text body holds at most
4,096 characters, a caption 1,024; free-form messages may be sent within 24 hours of the customer's
last message, only approved templates outside it; ``biz_opaque_callback_data`` (at most 512
characters) is echoed back on every status callback of the message, which lets the delivery loop
reconcile a send whose answer it never recorded.

Which unit "characters" is: Meta's reference says only "maximum 4096 characters" for ``text.body``
(Cloud API messages reference, ``text`` object) and 1,024 for ``caption``, without naming the unit.
Public clients check it as a JavaScript ``String.length`` (``whatsapp-api-js``, ``messages/text.js``:
``body.length > 4096``), i.e. in UTF-16 code units. We count UTF-16 units: a text within the limit in
UTF-16 units is within it in code points too, so an emoji-heavy part is never over whichever Meta counts.
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
)
from switchboard.channels.whatsapp.send import (
    SERVICE_WINDOW,
    TEXT_LIMIT_CHARS,
    GraphClient,
    GraphSendError,
    MediaTooLarge,
)
from switchboard.egress import EgressPolicy
from switchboard.observability import get_logger

if TYPE_CHECKING:
    from sqlmodel.ext.asyncio.session import AsyncSession

    from switchboard.db.models import ChannelAccount, Message
    from switchboard.media import MediaStore, StoredMedia

__all__ = ["WhatsAppChannel", "CAPABILITIES", "THROTTLE_CODES", "WINDOW_CODES", "classify"]

log = get_logger(__name__)

_EXPIRED_LINK_STATUSES = frozenset({401, 403, 404})
"""A media download answered with one of these: the short-lived URL expired; the id is looked up again."""


def _copy_failure(exc: GraphSendError) -> str:
    """The ``MediaCopyFailed.reason`` of a failed lookup or download: ``too_large``, ``network``,
    ``http_<status>`` (transient), ``refused`` (the address policy), else ``expired`` (Meta no longer
    knows the media id)."""
    if isinstance(exc, MediaTooLarge):
        return "too_large"
    if exc.is_transient:
        return f"http_{exc.http_status}" if exc.http_status else "network"
    if exc.http_status is None:
        return "refused"
    return "expired"


THROTTLE_CODES = frozenset({130429, 131056, 80007, 4})
"""Throughput limits (per number, per pair of numbers, per app): hold the account's sends."""
WINDOW_CODES = frozenset({131047})
"""Re-engagement: more than 24 hours since the customer's last message."""
CAPABILITIES = Capabilities(
    text_limit=TEXT_LIMIT_CHARS,
    text_unit="utf16",
    caption_limit=1024,
    service_window=SERVICE_WINDOW,
    outside_window=frozenset({"template"}),
    untrusted_inbound=False,
    read_receipts=True,
    correlation_echo=True,
    window_error_codes=frozenset(str(code) for code in WINDOW_CODES),
)


def classify(exc: GraphSendError) -> SendError:
    """A :class:`GraphSendError` as the core's :class:`SendError` (throttled / window / transient /
    permanent)."""
    if exc.code in WINDOW_CODES:
        kind = SendErrorKind.window_closed
    elif exc.code in THROTTLE_CODES:
        kind = SendErrorKind.throttled
    elif exc.is_transient:
        kind = SendErrorKind.transient
    else:
        kind = SendErrorKind.permanent
    return SendError(
        str(exc),
        kind=kind,
        code=str(exc.code) if exc.code is not None else None,
        http_status=exc.http_status,
        retry_after_s=exc.retry_after_s,
    )


def _media_kind(media: dict[str, Any]) -> str:
    if media.get("kind"):
        return str(media["kind"])
    mime = str(media.get("mime") or "")
    for prefix, kind in (("image/", "image"), ("audio/", "audio"), ("video/", "video")):
        if mime.startswith(prefix):
            return kind
    return "document"


class WhatsAppChannel:
    """The WhatsApp Cloud API as a :class:`~switchboard.channels.base.Channel`."""

    name = "whatsapp"
    capabilities = CAPABILITIES
    label = "WhatsApp"
    business_app = "WhatsApp Business app"
    reply_identity_kinds = ("wa_id", "bsuid")
    """Whom a reply is addressed to, best first."""
    account_id_label = "phone_number_id"
    chart_colour = "#1f9d55"

    @staticmethod
    def render_structured(text: str, parts: Sequence[Any]) -> list[OutboundPart]:
        """Buttons, lists and product cards as interactive messages
        (:func:`switchboard.channels.whatsapp.interactive.render_structured`; imported on use, it
        imports the channel-neutral reply shapes)."""
        from switchboard.channels.whatsapp.interactive import render_structured

        return render_structured(text, parts)

    def __init__(self, deps: ChannelDeps) -> None:
        settings = deps.settings
        self._settings = settings
        self._cipher = deps.cipher
        self._injected: GraphClient | None = deps.extra.get("whatsapp_graph")
        self._graphs: dict[str, GraphClient] = {}
        self.graph: GraphClient = self._injected or self._client_for(
            settings.resolved_whatsapp_graph_base_url
        )
        self._store: MediaStore | None = deps.extra.get("media_store")

    @property
    def store(self) -> MediaStore:
        """The media storage (built on first use: a worker that never touches media opens none)."""
        if self._store is None:
            from switchboard.media import MediaStore

            self._store = MediaStore.from_settings(self._settings)
        return self._store

    def _client_for(self, base_url: str) -> GraphClient:
        if base_url not in self._graphs:
            self._graphs[base_url] = GraphClient(
                base_url,
                self._settings.whatsapp_api_version,
                timeout_s=self._settings.whatsapp_send_timeout_s,
                egress=EgressPolicy.for_channels(self._settings),
            )
        return self._graphs[base_url]

    def graph_for(self, account: ChannelAccount) -> GraphClient:
        """The Graph client of ``account``'s API root (``channel_accounts.api_base_url``: the real API,
        this deployment's sandbox, or a URL), one per root; an injected client (tests) serves every account."""
        if self._injected is not None:
            return self._injected
        return self._client_for(self._settings.channel_api_base_url("whatsapp", account.api_base_url))

    def _token(self, account: ChannelAccount) -> str:
        # the sandbox accepts any bearer token; a real number always has one stored
        return access_token_of(account, self._cipher) or "sandbox-token"

    async def send(
        self, account: ChannelAccount, recipient: str, part: OutboundPart, *, correlation_id: str
    ) -> str:
        """Send one part; a media part sends its text first (if any), then each media item; an
        ``interactive`` part is one interactive message (its ``interactive`` is Meta's object).

        Returns the wamid of the last message sent.

        Raises:
            SendError: classified Graph API failure.
        """
        phone_number_id, token = account.external_account_id, self._token(account)
        try:
            if part.type == "template":
                template = part.template or {}
                return await self.graph_for(account).send_template(
                    phone_number_id=phone_number_id,
                    token=token,
                    to=recipient,
                    name=str(template.get("name")),
                    language=str(template.get("language") or "en"),
                    components=template.get("components") or None,
                    tracker=correlation_id,
                )
            if part.type == "interactive" and part.interactive:
                return await self.graph_for(account).send_interactive(
                    phone_number_id=phone_number_id,
                    token=token,
                    to=recipient,
                    interactive=dict(part.interactive),
                    tracker=correlation_id,
                )
            wamid: str | None = None
            if part.text:
                wamid = await self.graph_for(account).send_text(
                    phone_number_id=phone_number_id,
                    token=token,
                    to=recipient,
                    text=part.text,
                    tracker=correlation_id,
                )
            for media in part.media:
                wamid = await self.graph_for(account).send_media(
                    phone_number_id=phone_number_id,
                    token=token,
                    to=recipient,
                    kind=_media_kind(media),
                    media_id=await self._sendable_id(account, media),
                    caption=media.get("caption"),
                    filename=media.get("filename"),
                    tracker=correlation_id,
                )
        except GraphSendError as exc:
            raise classify(exc) from exc
        except ValueError as exc:  # over a limit or empty: sending it again would fail the same way
            raise SendError(str(exc), kind=SendErrorKind.permanent, code="invalid_part") from exc
        if wamid is None:
            raise SendError("nothing to send: empty part", kind=SendErrorKind.permanent, code="empty_part")
        return wamid

    async def mark_read(
        self, account: ChannelAccount, external_id: str, *, sender: str | None = None
    ) -> None:
        """Blue ticks on the customer's message.

        Raises:
            SendError: Meta refused.
        """
        try:
            await self.graph_for(account).mark_read(
                phone_number_id=account.external_account_id,
                token=self._token(account),
                message_id=external_id,
            )
        except GraphSendError as exc:
            raise classify(exc) from exc

    async def _sendable_id(self, account: ChannelAccount, media: dict[str, Any]) -> str:
        """The media id a send names: a WhatsApp media id as it is; our copy (``store:<key>``, a
        customer's file copied at arrival and relayed now) uploaded to the number first.

        Raises:
            GraphSendError: the stored copy is gone (permanent), or Meta refused the upload.
        """
        from switchboard.media import MediaCopyFailed, is_stored, key_of, sniff_mime

        ref = str(media["ref"])
        if not is_stored(ref):
            return ref
        try:
            data = await self.store.get(ref)
        except MediaCopyFailed as exc:
            raise GraphSendError(str(exc), code=None, http_status=404, is_transient=False) from exc
        mime = str(media.get("mime") or sniff_mime(data) or "application/octet-stream")
        filename = str(media.get("filename") or key_of(ref).rsplit("/", 1)[-1])
        return await self.graph_for(account).upload_media(
            phone_number_id=account.external_account_id,
            token=self._token(account),
            data=data,
            mime=mime,
            filename=filename,
        )

    async def copy_media(self, account: ChannelAccount, ref: str, *, kind: str | None = None) -> StoredMedia:
        """Media id → a short-lived URL (``GET /{media_id}``, about 5 minutes) → the bytes (same token,
        never past ``MEDIA_MAX_BYTES``) → our media storage, content-addressed under
        ``whatsapp/<tenant id>/``; ``store:<key>`` of a copy is read back from there.

        A download answered 401, 403 or 404 (the URL expired between the lookup and the download, as
        Meta's URLs do after about five minutes) looks the media id up once more and downloads the
        fresh URL: the id itself stays valid for about 30 days.

        Raises:
            MediaCopyFailed: ``expired`` (Meta no longer knows the id, or the fresh URL died too),
                ``too_large``, ``refused`` (permanent); ``network`` or ``http_<status>`` (transient).
        """
        from switchboard.media import MediaCopyFailed

        store = self.store
        token = self._token(account)
        graph = self.graph_for(account)
        try:
            info = await graph.media_info(media_id=ref, token=token)
            if info.file_size is not None and info.file_size > store.max_bytes:
                raise MediaTooLarge(f"media of {info.file_size} bytes is over {store.max_bytes}")
            try:
                data = await graph.download(url=info.url, token=token, max_bytes=store.max_bytes)
            except GraphSendError as exc:
                if exc.http_status not in _EXPIRED_LINK_STATUSES:
                    raise
                log.info("whatsapp_media_link_expired", media_id=ref, http_status=exc.http_status)
                info = await graph.media_info(media_id=ref, token=token)
                data = await graph.download(url=info.url, token=token, max_bytes=store.max_bytes)
        except GraphSendError as exc:
            raise MediaCopyFailed(
                f"media {ref}: {exc}", is_transient=exc.is_transient, reason=_copy_failure(exc)
            ) from exc
        return await store.put(
            data, namespace=f"whatsapp/{account.tenant_id}", mime=info.mime_type, kind=kind
        )

    async def fetch_media(
        self, account: ChannelAccount, ref: str, *, max_bytes: int
    ) -> tuple[bytes, str | None]:
        """The bytes of a media ref: our copy (``store:<key>``, made when the message arrived), or,
        when the copy job has not run yet, the media id copied now (:meth:`copy_media`: both write the
        same content-addressed object).

        Raises:
            MediaUnavailable: transient for network and 5xx; permanent for an unknown or expired id, a
                missing copy, or a file over ``max_bytes``.
        """
        from switchboard.inbound.media import MediaUnavailable
        from switchboard.media import MediaCopyFailed, is_stored, sniff_mime

        try:
            if is_stored(ref):
                data = await self.store.get(ref)
                mime = sniff_mime(data)
            else:
                stored = await self.copy_media(account, ref)
                data, mime = await self.store.get(stored.ref), stored.mime
        except MediaCopyFailed as exc:
            raise MediaUnavailable(
                f"whatsapp media: {exc}", is_transient=exc.is_transient, reason=exc.reason
            ) from exc
        if len(data) > max_bytes:
            raise MediaUnavailable(
                f"whatsapp media of {len(data)} bytes is over {max_bytes}",
                is_transient=False,
                reason="too_large",
            )
        return data, mime

    async def on_record_only(self, session: AsyncSession, row: Message, ctx: Any) -> None:
        """A ``user_changed_number`` system message moves the customer to the new number."""
        from switchboard.channels.whatsapp.hooks import record_only

        await record_only(session, row, ctx)

    async def customer_profile(self, account: ChannelAccount, sender: str) -> dict[str, str] | None:
        """None: WhatsApp webhooks carry the customer's profile name."""
        return None

    def acted_buttons(self, tenant_settings: Any) -> dict[str, str]:
        """Opt-out payloads of the tenant's ``whatsapp`` section → ``opt_out``."""
        section = getattr(tenant_settings, "whatsapp", None)
        payloads = getattr(section, "opt_out_payloads", None) or []
        return {p.strip().lower(): "opt_out" for p in payloads if p.strip()}

    def opt_out_reply(self, tenant_settings: Any) -> str:
        """The one confirmation sent after an opt-out button (tenant's ``whatsapp.opt_out_reply``)."""
        return str(tenant_settings.whatsapp.opt_out_reply)

    def auto_reply_cap(self, tenant_settings: Any) -> tuple[int, float] | None:
        """None: no cap on automatic replies (:attr:`Capabilities.reply_cap` is off)."""
        return None

    async def aclose(self) -> None:
        for graph in {id(g): g for g in [self.graph, *self._graphs.values()]}.values():
            await graph.aclose()


register_channel("whatsapp", WhatsAppChannel)
