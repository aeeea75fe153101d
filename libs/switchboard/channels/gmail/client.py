"""A small async client for the few Gmail REST and OAuth calls we make (httpx, one client per process).

Not google-api-python-client: it is synchronous (httplib2) and loads discovery documents; the
calls here are a handful of documented JSON endpoints (Gmail API REST reference). Every URL is built
from a base URL, so the local sandbox (:mod:`switchboard.standins.gmail`) stands in for
``https://gmail.googleapis.com`` and ``https://oauth2.googleapis.com/token`` offline.

Errors:

* :class:`OAuthError` for the token endpoint (``error`` is Google's code: ``invalid_grant`` means
  the grant was revoked or expired, which no retry fixes);
* :class:`GmailApiError` for the API (``http_status``, Google's ``reason``, ``is_transient``:
  network trouble, 429 and 5xx).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from switchboard.errors import SwitchboardError

__all__ = [
    "GmailApiError",
    "GmailClient",
    "OAuthError",
    "TokenGrant",
    "HISTORY_PAGE_SIZE",
]

HISTORY_PAGE_SIZE = 500
"""``maxResults`` of one ``history.list`` page (Gmail's largest)."""


class OAuthError(SwitchboardError):
    """The OAuth token endpoint refused.

    Attributes:
        error: Google's ``error`` (``invalid_grant``, ``invalid_client``...), or ``network``.
        is_transient: whether trying again later may help (network, 5xx).
    """

    def __init__(self, message: str, *, error: str, is_transient: bool = False) -> None:
        self.error = error
        self.is_transient = is_transient
        super().__init__(message)

    @property
    def is_revoked(self) -> bool:
        """The grant is gone (revoked, password changed, unused for months, Testing app after 7 days)."""
        return self.error == "invalid_grant"


class GmailApiError(SwitchboardError):
    """A Gmail API call failed.

    Attributes:
        http_status: the answer's status (``None``: network error).
        reason: Google's ``error.errors[0].reason`` or ``error.status`` (``notFound``, ``rateLimitExceeded``).
        is_transient: network, 429, 5xx.
    """

    def __init__(
        self, message: str, *, http_status: int | None, reason: str | None, is_transient: bool
    ) -> None:
        self.http_status = http_status
        self.reason = reason
        self.is_transient = is_transient
        super().__init__(message)


@dataclass(frozen=True)
class TokenGrant:
    """An answer of the token endpoint."""

    access_token: str
    expires_in_s: float
    refresh_token: str | None
    """Only on the first exchange (with ``access_type=offline`` and ``prompt=consent``)."""
    scope: str | None


class GmailClient:
    """Gmail REST (``/gmail/v1/users/me/...``) and OAuth token calls.

    Args:
        api_base_url: root of the API, e.g. ``https://gmail.googleapis.com`` or the sandbox URL.
        token_url: the OAuth token endpoint.
        timeout_s: timeout of each call.
    """

    def __init__(self, api_base_url: str, token_url: str, *, timeout_s: float = 20.0) -> None:
        self.api_base_url = api_base_url.rstrip("/")
        self.token_url = token_url
        self._client = httpx.AsyncClient(timeout=timeout_s)

    async def aclose(self) -> None:
        await self._client.aclose()

    # --- OAuth ------------------------------------------------------------------------------------
    async def _token(self, form: dict[str, str]) -> TokenGrant:
        try:
            response = await self._client.post(self.token_url, data=form)
        except httpx.HTTPError as exc:
            raise OAuthError(
                f"token endpoint unreachable: {type(exc).__name__}", error="network", is_transient=True
            ) from exc
        try:
            body = response.json()
        except ValueError:
            body = {}
        if response.status_code >= 400 or "access_token" not in body:
            error = str(body.get("error") or f"http_{response.status_code}")
            raise OAuthError(
                f"token endpoint refused: {error} {body.get('error_description') or ''}".strip(),
                error=error,
                is_transient=response.status_code >= 500,
            )
        return TokenGrant(
            access_token=str(body["access_token"]),
            expires_in_s=float(body.get("expires_in") or 3600),
            refresh_token=body.get("refresh_token"),
            scope=body.get("scope"),
        )

    async def exchange_code(
        self, *, code: str, client_id: str, client_secret: str, redirect_uri: str
    ) -> TokenGrant:
        """Authorization code → tokens (``grant_type=authorization_code``).

        Raises:
            OAuthError: refused (a code is single-use and short-lived).
        """
        return await self._token(
            {
                "grant_type": "authorization_code",
                "code": code,
                "client_id": client_id,
                "client_secret": client_secret,
                "redirect_uri": redirect_uri,
            }
        )

    async def refresh(self, *, refresh_token: str, client_id: str, client_secret: str) -> TokenGrant:
        """A new access token (``grant_type=refresh_token``).

        Raises:
            OAuthError: ``is_revoked`` for ``invalid_grant``.
        """
        return await self._token(
            {
                "grant_type": "refresh_token",
                "refresh_token": refresh_token,
                "client_id": client_id,
                "client_secret": client_secret,
            }
        )

    # --- API --------------------------------------------------------------------------------------
    async def _call(
        self, method: str, path: str, token: str, *, params: Any = None, json: Any = None
    ) -> dict:
        url = f"{self.api_base_url}/gmail/v1/users/me/{path}"
        try:
            response = await self._client.request(
                method, url, params=params, json=json, headers={"Authorization": f"Bearer {token}"}
            )
        except httpx.HTTPError as exc:
            raise GmailApiError(
                f"network error: {type(exc).__name__}", http_status=None, reason=None, is_transient=True
            ) from exc
        try:
            body = response.json() if response.content else {}
        except ValueError:
            body = {}
        if response.status_code < 400:
            return body if isinstance(body, dict) else {}
        error = body.get("error") if isinstance(body, dict) else None
        reason = None
        message = response.text[:200]
        if isinstance(error, dict):
            errors = error.get("errors") or []
            reason = (
                errors[0].get("reason") if errors and isinstance(errors[0], dict) else None
            ) or error.get("status")
            message = str(error.get("message") or message)
        status = response.status_code
        raise GmailApiError(
            f"Gmail API {method} {path.split('?')[0]}: {status} {message}",
            http_status=status,
            reason=reason,
            is_transient=status == 429 or status >= 500,
        )

    async def profile(self, token: str) -> dict:
        """``users.getProfile``: ``{emailAddress, historyId, messagesTotal}``."""
        return await self._call("GET", "profile", token)

    async def history(self, token: str, *, start_history_id: str, page_token: str | None = None) -> dict:
        """One page of ``users.history.list`` (``messageAdded`` only; every label, so our own SENT mail is
        seen and recorded): ``{history?, nextPageToken?, historyId}``.

        Raises:
            GmailApiError: ``http_status == 404`` for a stale or invalid ``startHistoryId``.
        """
        params: dict[str, Any] = {
            "startHistoryId": start_history_id,
            "historyTypes": "messageAdded",
            "maxResults": HISTORY_PAGE_SIZE,
        }
        if page_token:
            params["pageToken"] = page_token
        return await self._call("GET", "history", token, params=params)

    async def list_messages(
        self, token: str, *, query: str, page_token: str | None = None, max_results: int = 100
    ) -> dict:
        """One page of ``users.messages.list``: ``{messages?: [{id, threadId}], nextPageToken?}``."""
        params: dict[str, Any] = {"q": query, "maxResults": max_results}
        if page_token:
            params["pageToken"] = page_token
        return await self._call("GET", "messages", token, params=params)

    async def get_message(self, token: str, message_id: str) -> dict:
        """``users.messages.get`` with ``format=full``."""
        return await self._call("GET", f"messages/{message_id}", token, params={"format": "full"})

    async def get_attachment(self, token: str, message_id: str, attachment_id: str) -> dict:
        """``users.messages.attachments.get``: ``{size, data}`` (``data`` base64url)."""
        return await self._call("GET", f"messages/{message_id}/attachments/{attachment_id}", token)

    async def send(self, token: str, *, raw: str, thread_id: str | None) -> dict:
        """``users.messages.send``: ``{id, threadId, labelIds}``."""
        body: dict[str, Any] = {"raw": raw}
        if thread_id:
            body["threadId"] = thread_id
        return await self._call("POST", "messages/send", token, json=body)

    async def watch(self, token: str, *, topic: str, label_ids: list[str] | None = None) -> dict:
        """``users.watch``: ``{historyId, expiration}`` (expiration: epoch ms, as a string)."""
        return await self._call(
            "POST",
            "watch",
            token,
            json={"topicName": topic, "labelIds": label_ids or ["INBOX"], "labelFilterBehavior": "INCLUDE"},
        )

    async def stop(self, token: str) -> None:
        """``users.stop``: no more push notifications for the mailbox."""
        await self._call("POST", "stop", token)
