"""Sending through the WhatsApp Cloud API (Graph API ``POST /{version}/{phone_number_id}/messages``).

Our own small Graph client on httpx, with the request shape Meta documents (``{"messaging_product":
"whatsapp", "to", "type": "text", "text": {"body", "preview_url"}}``). pywa is deliberately not a
dependency: it binds the Graph base URL
(graph.facebook.com) and the access token to its httpx session, so one client per tenant is needed
and the worker could not reach the local sandbox in tests and the demo; and
its webhook server acknowledges a delivery before the work is durable, which our routes never do.
Errors become :class:`GraphSendError` with Meta's code and whether a retry can help (Meta's
Cloud API error-code reference).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx

from switchboard.channels.base import text_length
from switchboard.egress import EgressPolicy, EgressRefused, guarded_client
from switchboard.errors import SwitchboardError
from switchboard.observability import get_logger

__all__ = [
    "GraphClient",
    "GraphSendError",
    "MediaInfo",
    "MediaTooLarge",
    "TEXT_LIMIT_CHARS",
    "CAPTION_LIMIT",
    "SERVICE_WINDOW",
    "TRANSIENT_CODES",
    "PERMANENT_RECIPIENT_CODES",
]

log = get_logger(__name__)

TEXT_LIMIT_CHARS = 4096
"""Maximum ``text.body`` length of one WhatsApp text message (Cloud API reference)."""
CAPTION_LIMIT = 1024
"""Maximum media ``caption`` length (Cloud API reference), counted like :data:`TEXT_LIMIT_CHARS`."""
SERVICE_WINDOW = timedelta(hours=24)
"""Free-form replies are allowed within 24 h of the customer's last message (customer-service window)."""
TRANSIENT_CODES = frozenset({130429, 131056, 80007, 4, 131000, 131016, 2, 1})
"""Throughput / temporary errors: retry later with back-off."""
PERMANENT_RECIPIENT_CODES = frozenset({131047, 131026})
"""Outside the 24-hour window (131047) and undeliverable (131026): recorded, never retried as free text."""


class GraphSendError(SwitchboardError):
    """A Graph API call failed.

    Attributes:
        code: Meta's error code (``None`` for network errors / non-JSON answers).
        http_status: HTTP status, or ``None`` for network errors.
        is_transient: whether trying again later can help (5xx, network, throughput codes).
        retry_after_s: the answer's ``Retry-After`` in seconds, when Meta sent one.
    """

    def __init__(
        self,
        message: str,
        *,
        code: int | None,
        http_status: int | None,
        is_transient: bool,
        retry_after_s: float | None = None,
    ) -> None:
        self.code = code
        self.http_status = http_status
        self.is_transient = is_transient
        self.retry_after_s = retry_after_s
        super().__init__(message)


class MediaTooLarge(GraphSendError):
    """A media download over the caller's byte limit (permanent: the same file stays too large)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code=None, http_status=200, is_transient=False)


@dataclass(frozen=True)
class MediaInfo:
    """``GET /{media_id}``: a short-lived download URL (about 5 minutes) and facts about the file."""

    url: str
    mime_type: str | None
    sha256: str | None
    file_size: int | None


class GraphClient:
    """Async Graph API client for one process (one ``httpx.AsyncClient``, token per call).

    Args:
        base_url: Graph API root without version, e.g. ``https://graph.facebook.com`` or the sandbox URL.
        api_version: version segment, e.g. ``v23.0``.
        timeout_s: timeout of each call.
        transport: optional httpx transport (tests may pass ``httpx.MockTransport``).
        egress: the outbound-address policy media download links (the provider hands them to us)
            must pass, connected to pinned (:mod:`switchboard.egress`); ``None``: the Graph client's
            own connection (a test's transport).
    """

    def __init__(
        self,
        base_url: str,
        api_version: str,
        *,
        timeout_s: float = 15.0,
        transport: httpx.AsyncBaseTransport | None = None,
        egress: EgressPolicy | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_version = api_version
        self._client = httpx.AsyncClient(timeout=timeout_s, transport=transport, follow_redirects=True)
        self._media = (
            self._client
            if egress is None
            else guarded_client(egress, timeout=timeout_s, follow_redirects=True)
        )

    async def aclose(self) -> None:
        await self._client.aclose()
        if self._media is not self._client:
            await self._media.aclose()

    async def _request(self, method: str, path: str, token: str, **kwargs: Any) -> dict:
        """One Graph call (``path`` under the version) with the Bearer token: Meta's answer as JSON, or
        :class:`GraphSendError` (Meta's error, or a transient network error)."""
        url = f"{self.base_url}/{self.api_version}/{path}"
        try:
            response = await self._client.request(
                method, url, headers={"Authorization": f"Bearer {token}"}, **kwargs
            )
        except httpx.HTTPError as exc:
            raise GraphSendError(
                f"network error: {type(exc).__name__}", code=None, http_status=None, is_transient=True
            ) from exc
        return self._check(response)

    async def _post(self, path: str, token: str, body: dict) -> dict:
        return await self._request("POST", path, token, json=body)

    @staticmethod
    def _check(response: httpx.Response) -> dict:
        try:
            data = response.json()
        except ValueError:
            data = {}
        if response.status_code < 400 and "error" not in data:
            return data
        error = data.get("error") if isinstance(data.get("error"), dict) else {}
        code = error.get("code") if isinstance(error.get("code"), int) else None
        transient = response.status_code >= 500 or response.status_code == 429 or code in TRANSIENT_CODES
        if code in PERMANENT_RECIPIENT_CODES:
            transient = False
        message = str(error.get("message") or f"HTTP {response.status_code}")[:300]
        retry_after = response.headers.get("retry-after", "")
        raise GraphSendError(
            message,
            code=code,
            http_status=response.status_code,
            is_transient=transient,
            retry_after_s=float(retry_after) if retry_after.replace(".", "", 1).isdigit() else None,
        )

    async def send_text(
        self,
        *,
        phone_number_id: str,
        token: str,
        to: str,
        text: str,
        reply_to: str | None = None,
        tracker: str | None = None,
    ) -> str:
        """Send one text message (at most :data:`TEXT_LIMIT_CHARS` characters). Returns the new wamid.

        Raises:
            GraphSendError: Meta refused it or could not be reached.
            ValueError: ``text`` is empty or too long.
        """
        if not text or text_length(text, "utf16") > TEXT_LIMIT_CHARS:
            raise ValueError(
                f"text must be 1..{TEXT_LIMIT_CHARS} UTF-16 units, got {text_length(text, 'utf16')}"
            )
        body: dict = {
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": to,
            "type": "text",
            "text": {"body": text, "preview_url": False},
        }
        if reply_to:
            body["context"] = {"message_id": reply_to}
        if tracker:
            body["biz_opaque_callback_data"] = tracker[:512]
        data = await self._post(f"{phone_number_id}/messages", token, body)
        messages = data.get("messages") if isinstance(data.get("messages"), list) else []
        if not messages or not isinstance(messages[0], dict) or not messages[0].get("id"):
            raise GraphSendError(
                "answer without messages[0].id", code=None, http_status=200, is_transient=False
            )
        return str(messages[0]["id"])

    async def _send(self, phone_number_id: str, token: str, body: dict, tracker: str | None = None) -> str:
        if tracker:
            body = {**body, "biz_opaque_callback_data": tracker[:512]}
        data = await self._post(
            f"{phone_number_id}/messages", token, {"messaging_product": "whatsapp", **body}
        )
        messages = data.get("messages") if isinstance(data.get("messages"), list) else []
        if not messages or not isinstance(messages[0], dict) or not messages[0].get("id"):
            raise GraphSendError(
                "answer without messages[0].id", code=None, http_status=200, is_transient=False
            )
        return str(messages[0]["id"])

    async def send_media(
        self,
        *,
        phone_number_id: str,
        token: str,
        to: str,
        kind: str,
        media_id: str,
        caption: str | None = None,
        filename: str | None = None,
        tracker: str | None = None,
    ) -> str:
        """Send media by the id of a media object of this number (``{kind: {"id", "caption"?}}``).

        ``kind`` is ``image``, ``audio``, ``video``, ``document`` or ``sticker``; captions go with image,
        video and document only (Cloud API message reference). Returns the new wamid.

        Raises:
            GraphSendError: as :meth:`send_text`.
        """
        media: dict = {"id": media_id}
        if caption and kind in ("image", "video", "document"):
            if text_length(caption, "utf16") > CAPTION_LIMIT:
                raise ValueError(
                    f"caption over {CAPTION_LIMIT} UTF-16 units (the outbox writer moves the rest out)"
                )
            media["caption"] = caption
        if filename and kind == "document":
            media["filename"] = filename
        return await self._send(
            phone_number_id,
            token,
            {"recipient_type": "individual", "to": to, "type": kind, kind: media},
            tracker,
        )

    async def send_interactive(
        self, *, phone_number_id: str, token: str, to: str, interactive: dict, tracker: str | None = None
    ) -> str:
        """Send one interactive message (reply buttons, a list, a call-to-action URL): ``interactive`` is
        the Cloud API's ``interactive`` object (:mod:`switchboard.channels.whatsapp.interactive`).

        Raises:
            GraphSendError: as :meth:`send_text`.
            ValueError: the object is over Meta's limits (``limit_problems``).
        """
        from switchboard.channels.whatsapp.interactive import limit_problems

        problems = limit_problems(interactive)
        if problems:
            raise ValueError("interactive part over the limits: " + "; ".join(problems))
        body = {"recipient_type": "individual", "to": to, "type": "interactive", "interactive": interactive}
        return await self._send(phone_number_id, token, body, tracker)

    async def send_template(
        self,
        *,
        phone_number_id: str,
        token: str,
        to: str,
        name: str,
        language: str,
        components: list[dict] | None = None,
        tracker: str | None = None,
    ) -> str:
        """Send an approved template (the only way to write outside the 24-hour window), with the
        ``components`` that fill it (:func:`switchboard.channels.whatsapp.templates.fill_template`).

        Raises:
            GraphSendError: as :meth:`send_text`.
        """
        template: dict = {"name": name, "language": {"code": language}}
        if components:
            template["components"] = components
        body = {"to": to, "type": "template", "template": template}
        return await self._send(phone_number_id, token, body, tracker)

    async def upload_media(
        self, *, phone_number_id: str, token: str, data: bytes, mime: str, filename: str
    ) -> str:
        """``POST /{version}/{phone_number_id}/media`` (multipart: ``messaging_product``, ``type``,
        ``file``): a media object of the number, usable in sends for 30 days. Returns its id.

        Raises:
            GraphSendError: Meta refused the file or could not be reached.
        """
        answer = await self._request(
            "POST",
            f"{phone_number_id}/media",
            token,
            data={"messaging_product": "whatsapp", "type": mime},
            files={"file": (filename, data, mime)},
        )
        if not answer.get("id"):
            raise GraphSendError("media answer without id", code=None, http_status=200, is_transient=False)
        return str(answer["id"])

    async def list_templates(self, *, waba_id: str, token: str, max_pages: int = 50) -> list[dict]:
        """``GET /{version}/{waba_id}/message_templates``, every page (``paging.cursors.after``) up to
        ``max_pages`` of 100: Meta's template objects (``name``, ``language``, ``status``, ``category``,
        ``components``...).

        Raises:
            GraphSendError: Meta refused (token, permission) or could not be reached.
        """
        params: dict[str, str] = {"limit": "100"}
        out: list[dict] = []
        for _ in range(max_pages):
            data = await self._request("GET", f"{waba_id}/message_templates", token, params=params)
            out += [item for item in data.get("data") or [] if isinstance(item, dict)]
            after = ((data.get("paging") or {}).get("cursors") or {}).get("after")
            if not (data.get("paging") or {}).get("next") or not after:
                break
            params = {"limit": "100", "after": str(after)}
        return out

    async def mark_read(self, *, phone_number_id: str, token: str, message_id: str) -> None:
        """Mark an inbound message as read (blue ticks).

        Raises:
            GraphSendError: as :meth:`send_text`.
        """
        await self._post(
            f"{phone_number_id}/messages",
            token,
            {"messaging_product": "whatsapp", "status": "read", "message_id": message_id},
        )

    async def media_info(self, *, media_id: str, token: str) -> MediaInfo:
        """``GET /{version}/{media_id}`` → download URL and metadata.

        Raises:
            GraphSendError: unknown/expired media id or network trouble.
        """
        data = await self._request("GET", media_id, token)
        if not data.get("url"):
            raise GraphSendError("media answer without url", code=None, http_status=200, is_transient=False)
        size = data.get("file_size")
        return MediaInfo(
            url=str(data["url"]),
            mime_type=data.get("mime_type"),
            sha256=data.get("sha256"),
            file_size=int(size) if isinstance(size, (int, str)) and str(size).isdigit() else None,
        )

    async def download(self, *, url: str, token: str, max_bytes: int = 25_000_000) -> bytes:
        """The bytes behind a media URL (same Bearer header; without it Meta answers an HTML 401), read
        as a stream and never past ``max_bytes``.

        Raises:
            MediaTooLarge: the file is over ``max_bytes`` (declared or counted; permanent).
            GraphSendError: HTTP error, network trouble, or the outbound-address policy refused the
                link (permanent).
        """
        try:
            async with self._media.stream(
                "GET", url, headers={"Authorization": f"Bearer {token}"}
            ) as response:
                if response.status_code >= 400:
                    raise GraphSendError(
                        f"media download HTTP {response.status_code}",
                        code=None,
                        http_status=response.status_code,
                        is_transient=response.status_code >= 500 or response.status_code == 429,
                    )
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > max_bytes:
                    raise MediaTooLarge(f"media of {declared} bytes is over {max_bytes}")
                chunks: list[bytes] = []
                size = 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > max_bytes:
                        raise MediaTooLarge(f"media is over {max_bytes} bytes")
                    chunks.append(chunk)
        except EgressRefused as exc:
            log.warning("media_link_refused", error=str(exc))
            raise GraphSendError(
                f"media link refused: {exc}", code=None, http_status=None, is_transient=False
            ) from None
        except httpx.HTTPError as exc:
            raise GraphSendError(
                f"network error: {type(exc).__name__}", code=None, http_status=None, is_transient=True
            ) from exc
        return b"".join(chunks)
