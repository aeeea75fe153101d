"""The Instagram Send API and profile lookups: our own small Graph client on httpx (no
Instagram library is well kept; instagrapi uses the private API).

* ``POST /{version}/{ig_user_id}/messages`` with ``{"recipient": {"id": <IGSID>}, "message": {...}}``
  (host ``graph.instagram.com`` with an Instagram-Login token, ``graph.facebook.com`` with a Page token;
  the path is the same) → ``{"recipient_id", "message_id"}``. Text messages hold at most
  :data:`TEXT_LIMIT` characters; quick replies at most 13, titles at most 20 characters; an attachment
  is sent by URL (``{"attachment": {"type", "payload": {"url"}}}``).
* ``sender_action`` ``mark_seen`` / ``typing_on`` (same endpoint, no ``message``).
* A person's reply after the 24-hour window, within 7 days, carries ``"messaging_type": "MESSAGE_TAG",
  "tag": "HUMAN_AGENT"`` (Meta's human-agent policy; never sent for the AI, see
  :mod:`switchboard.outbox.policy`).
* ``GET /{version}/{igsid}?fields=name,username`` → the customer's name and username.

Errors are Meta's ``{"error": {"code", "error_subcode", "message"}}``; :class:`InstagramSendError`
carries both codes, and :func:`switchboard.channels.instagram.channel.classify` maps them to the core's
outcomes.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx

from switchboard.errors import SwitchboardError

__all__ = [
    "HUMAN_AGENT_WINDOW",
    "InstagramGraphClient",
    "InstagramSendError",
    "QUICK_REPLY_LIMIT",
    "QUICK_REPLY_TITLE_LIMIT",
    "SERVICE_WINDOW",
    "TEXT_LIMIT",
]

TEXT_LIMIT = 1000
"""Longest text of one Instagram message; counted in UTF-16 code units, the way Meta's servers count
(an emoji outside the BMP is two), which never exceeds the documented 1,000 characters."""
SERVICE_WINDOW = timedelta(hours=24)
"""Standard replies are allowed within 24 h of the customer's last message."""
HUMAN_AGENT_WINDOW = timedelta(days=7)
"""A person (never the AI) may reply up to 7 days after the customer's last message, tagged HUMAN_AGENT."""
QUICK_REPLY_LIMIT = 13
QUICK_REPLY_TITLE_LIMIT = 20


class InstagramSendError(SwitchboardError):
    """A Graph API call failed.

    Attributes:
        code: Meta's ``error.code`` (``None`` for network errors / non-JSON answers).
        subcode: Meta's ``error.error_subcode``.
        http_status: HTTP status, ``None`` for network errors.
        retry_after_s: the answer's ``Retry-After`` in seconds, when sent.
    """

    def __init__(
        self,
        message: str,
        *,
        code: int | None,
        subcode: int | None = None,
        http_status: int | None,
        retry_after_s: float | None = None,
    ) -> None:
        self.code = code
        self.subcode = subcode
        self.http_status = http_status
        self.retry_after_s = retry_after_s
        super().__init__(message)


class InstagramGraphClient:
    """Async Instagram Graph client for one process (one ``httpx.AsyncClient``, token per call).

    Args:
        base_url: Graph root without version (``https://graph.instagram.com`` or the sandbox URL).
        api_version: version segment, e.g. ``v23.0``.
        timeout_s: timeout of each call.
    """

    def __init__(
        self,
        base_url: str,
        api_version: str,
        *,
        timeout_s: float = 15.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_version = api_version
        self._client = httpx.AsyncClient(timeout=timeout_s, transport=transport, follow_redirects=True)

    async def aclose(self) -> None:
        await self._client.aclose()

    def _url(self, path: str) -> str:
        return f"{self.base_url}/{self.api_version}/{path}"

    @staticmethod
    def _check(response: httpx.Response) -> dict[str, Any]:
        try:
            data = response.json()
        except ValueError:
            data = {}
        if not isinstance(data, dict):
            data = {}
        if response.status_code < 400 and "error" not in data:
            return data
        error = data.get("error") if isinstance(data.get("error"), dict) else {}
        code = error.get("code") if isinstance(error.get("code"), int) else None
        subcode = error.get("error_subcode") if isinstance(error.get("error_subcode"), int) else None
        retry_after = response.headers.get("retry-after", "")
        raise InstagramSendError(
            str(error.get("message") or f"HTTP {response.status_code}")[:300],
            code=code,
            subcode=subcode,
            http_status=response.status_code,
            retry_after_s=float(retry_after) if retry_after.replace(".", "", 1).isdigit() else None,
        )

    async def _call(self, method: str, path: str, token: str, **kwargs: Any) -> dict[str, Any]:
        try:
            response = await self._client.request(
                method, self._url(path), headers={"Authorization": f"Bearer {token}"}, **kwargs
            )
        except httpx.HTTPError as exc:
            raise InstagramSendError(
                f"network error: {type(exc).__name__}", code=None, http_status=None
            ) from exc
        return self._check(response)

    async def send_message(
        self,
        *,
        account_id: str,
        token: str,
        recipient: str,
        message: dict[str, Any],
        tag: str | None = None,
    ) -> str:
        """Send one message body (``{"text"}``, ``{"attachment"}``, ``quick_replies``...). Returns its mid.

        Raises:
            InstagramSendError: Meta refused it or could not be reached.
        """
        body: dict[str, Any] = {"recipient": {"id": recipient}, "message": message}
        if tag:
            body.update(messaging_type="MESSAGE_TAG", tag=tag)
        data = await self._call("POST", f"{account_id}/messages", token, json=body)
        if not data.get("message_id"):
            raise InstagramSendError("answer without message_id", code=None, http_status=200)
        return str(data["message_id"])

    async def send_text(
        self,
        *,
        account_id: str,
        token: str,
        recipient: str,
        text: str,
        quick_replies: list[dict[str, str]] | None = None,
        tag: str | None = None,
    ) -> str:
        """Send one text (1..:data:`TEXT_LIMIT` UTF-16 units), with quick replies when given.

        Raises:
            InstagramSendError: as :meth:`send_message`.
            ValueError: empty or too long text.
        """
        units = len(text.encode("utf-16-le")) // 2
        if not text or units > TEXT_LIMIT:
            raise ValueError(f"text must be 1..{TEXT_LIMIT} UTF-16 units, got {units}")
        message: dict[str, Any] = {"text": text}
        if quick_replies:
            message["quick_replies"] = [
                {
                    "content_type": "text",
                    "title": q["title"][:QUICK_REPLY_TITLE_LIMIT],
                    "payload": q["payload"],
                }
                for q in quick_replies[:QUICK_REPLY_LIMIT]
            ]
        return await self.send_message(
            account_id=account_id, token=token, recipient=recipient, message=message, tag=tag
        )

    async def send_attachment(
        self, *, account_id: str, token: str, recipient: str, kind: str, url: str, tag: str | None = None
    ) -> str:
        """Send an ``image`` / ``video`` / ``audio`` / ``file`` by a URL Meta can fetch. Returns its mid.

        Raises:
            InstagramSendError: as :meth:`send_message`.
        """
        message = {"attachment": {"type": kind, "payload": {"url": url}}}
        return await self.send_message(
            account_id=account_id, token=token, recipient=recipient, message=message, tag=tag
        )

    async def sender_action(self, *, account_id: str, token: str, recipient: str, action: str) -> None:
        """``mark_seen`` / ``typing_on`` / ``typing_off`` for the thread with ``recipient``.

        Raises:
            InstagramSendError: as :meth:`send_message`.
        """
        await self._call(
            "POST",
            f"{account_id}/messages",
            token,
            json={"recipient": {"id": recipient}, "sender_action": action},
        )

    async def profile(self, *, igsid: str, token: str) -> dict[str, Any]:
        """``GET /{igsid}?fields=name,username`` → ``{"name"?, "username"?}``.

        Raises:
            InstagramSendError: Meta refused (the profile is optional: callers log and go on).
        """
        data = await self._call("GET", igsid, token, params={"fields": "name,username"})
        return {k: data[k] for k in ("name", "username") if isinstance(data.get(k), str) and data[k]}
