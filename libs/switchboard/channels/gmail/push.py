"""``POST /webhooks/gmail``: a Pub/Sub push notification → stored, a sync enqueued, 2xx fast.

Verification (Google Cloud Pub/Sub docs, "Authenticate push subscriptions"):

* with ``GMAIL_PUSH_AUDIENCE`` set, the request must carry ``Authorization: Bearer <OIDC JWT>`` signed by
  Google (keys from ``GMAIL_OIDC_CERTS_URL``, cached :data:`CERTS_TTL_S`), with that ``aud``, issuer
  ``accounts.google.com`` and, when ``GMAIL_PUSH_SERVICE_ACCOUNT`` is set, that verified ``email``
  (``google.auth.jwt.decode`` checks signature, ``exp``, ``iat``, ``aud``);
* otherwise the push URL must carry ``?token=<GMAIL_PUSH_SECRET>`` (compared in constant time).

Outcomes: missing credentials **401**, wrong **403** (nothing stored); body over
``GMAIL_MAX_BODY_BYTES`` **413**; not a push envelope, or data without ``emailAddress`` → **200** and
an error log (Pub/Sub would redeliver a body no retry can fix); an unknown mailbox → **200** and a
warning ``webhook_unknown_account`` (``channel=gmail``, as every channel's webhook); the database failing → **503** (Pub/Sub redelivers); stored (or
a redelivery of a stored one) → **200** after the insert committed. The notification never carries
mail: it only moves the sync (``sync_gmail_mailbox`` on the background queue).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import json
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from google.auth import exceptions as google_exceptions
from google.auth import jwt as google_jwt
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import select

from switchboard.api.deps import ResourcesDep, SettingsDep
from switchboard.channels.gmail.jobs import enqueue_sync
from switchboard.channels.webhook import read_limited
from switchboard.db.models import ChannelAccount, GmailPushNotification
from switchboard.observability import get_logger, metrics
from switchboard.settings import Settings

__all__ = ["CERTS_TTL_S", "GOOGLE_ISSUERS", "PushEnvelope", "parse_envelope", "push_router", "verify_push"]

log = get_logger(__name__)

CERTS_TTL_S = 3600.0
"""How long fetched signing keys are reused (Google rotates them over days)."""
GOOGLE_ISSUERS = frozenset({"accounts.google.com", "https://accounts.google.com"})
_certs: dict[str, tuple[float, dict[str, str]]] = {}
_certs_lock = asyncio.Lock()


class PushEnvelope:
    """The facts of one push: Pub/Sub message id, mailbox, the mailbox's newest history id, when."""

    def __init__(
        self, message_id: str, email: str, history_id: str | None, published_at: datetime | None
    ) -> None:
        self.message_id = message_id
        self.email = email
        self.history_id = history_id
        self.published_at = published_at


def parse_envelope(body: Any) -> PushEnvelope | None:
    """A push body (``{"message": {"data": base64(JSON {emailAddress, historyId}), "messageId" |
    "message_id", "publishTime" | "publish_time"}, "subscription"}``) → :class:`PushEnvelope`, or
    ``None`` when it is not one."""
    if not isinstance(body, dict) or not isinstance(body.get("message"), dict):
        return None
    message = body["message"]
    message_id = message.get("messageId") or message.get("message_id")
    try:
        data = json.loads(base64.b64decode(str(message.get("data") or ""), altchars=b"-_", validate=False))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None
    if not message_id or not isinstance(data, dict) or not data.get("emailAddress"):
        return None
    published = message.get("publishTime") or message.get("publish_time")
    try:
        published_at = datetime.fromisoformat(str(published).replace("Z", "+00:00")) if published else None
    except ValueError:
        published_at = None
    history = data.get("historyId")
    return PushEnvelope(
        message_id=str(message_id),
        email=str(data["emailAddress"]).strip().lower(),
        history_id=str(history) if history is not None else None,
        published_at=published_at.astimezone(UTC) if published_at else None,
    )


async def _signing_keys(settings: Settings, http: httpx.AsyncClient) -> dict[str, str]:
    url = settings.resolved_gmail_certs_url
    hit = _certs.get(url)
    if hit is not None and hit[0] > time.monotonic():
        return hit[1]
    async with _certs_lock:
        response = await http.get(url, timeout=10.0)
        response.raise_for_status()
        keys = {str(k): str(v) for k, v in response.json().items()}
        _certs[url] = (time.monotonic() + CERTS_TTL_S, keys)
        return keys


async def verify_push(
    request: Request, settings: Settings, http: httpx.AsyncClient
) -> tuple[int, str] | None:
    """``None`` when the push is authentic, else ``(status, reason)`` (module docstring)."""
    audience = settings.gmail_push_audience
    if audience:
        header = request.headers.get("authorization") or ""
        if not header.lower().startswith("bearer "):
            return 401, "missing bearer token"
        token = header.split(" ", 1)[1].strip()
        try:
            keys = await _signing_keys(settings, http)
        except (httpx.HTTPError, ValueError) as exc:
            log.error("gmail_push_certs_unavailable", error=str(exc)[:200])
            return 503, "signing keys unavailable"
        try:
            claims = google_jwt.decode(token, certs=keys, audience=audience)
        except (google_exceptions.GoogleAuthError, ValueError) as exc:
            return 403, f"invalid token: {str(exc)[:120]}"
        if claims.get("iss") not in GOOGLE_ISSUERS:
            return 403, "invalid token: issuer"
        wanted = settings.gmail_push_service_account
        if wanted and (claims.get("email") != wanted or not claims.get("email_verified")):
            return 403, "invalid token: service account"
        return None
    given = request.query_params.get("token")
    if not given:
        return 401, "missing token"
    if not hmac.compare_digest(given.encode(), settings.secret("gmail_push_secret").encode()):
        return 403, "invalid token"
    return None


_PUSH_OUTCOMES = {
    200: "accepted",
    401: "missing_signature",
    403: "bad_signature",
    413: "too_large",
    503: "unavailable",
}
"""``switchboard_webhook_acks_total`` outcome of a push answer by status (a 200 that ignored the body: ``malformed``)."""


def push_router() -> APIRouter:
    """The router of ``/webhooks/gmail``."""
    router = APIRouter(prefix="/webhooks/gmail", tags=["gmail"])

    async def deliver(request: Request, settings: SettingsDep, resources: ResourcesDep) -> Response:
        started = time.perf_counter()
        response = await _answer(request, settings, resources)
        outcome = _PUSH_OUTCOMES.get(response.status_code, "error")
        if outcome == "accepted" and b'"ignored"' in bytes(response.body):
            outcome = "malformed"
        metrics.WEBHOOK_ACKS.labels("gmail", outcome).inc()
        metrics.WEBHOOK_ACK_SECONDS.labels("gmail").observe(time.perf_counter() - started)
        return response

    router.post(
        "",
        summary="Gmail push notification (Pub/Sub push)",
        description="Verifies the Pub/Sub OIDC token (GMAIL_PUSH_AUDIENCE) or the `?token=` push secret, stores "
        "the notification (deduplicated on the Pub/Sub message id), enqueues a sync of the mailbox and answers "
        "200; 401/403 bad credentials, 413 too large, 503 when the database cannot take it (Pub/Sub redelivers).",
    )(deliver)

    async def _answer(request: Request, settings: Settings, resources: Any) -> JSONResponse:
        started = time.perf_counter()
        raw = await read_limited(request, settings.gmail_max_body_bytes)
        if raw is None:
            return JSONResponse({"error": "body too large"}, status_code=413)
        http = getattr(request.app.state, "gmail_http", None)
        if http is None:
            http = request.app.state.gmail_http = httpx.AsyncClient()
        refused = await verify_push(request, settings, http)
        if refused is not None:
            log.warning("gmail_push_rejected", reason=refused[1])
            return JSONResponse({"error": refused[1]}, status_code=refused[0])
        try:
            envelope = parse_envelope(json.loads(raw))
        except (UnicodeDecodeError, json.JSONDecodeError):
            envelope = None
        if envelope is None:
            log.error("gmail_push_malformed", size_bytes=len(raw))
            return JSONResponse({"status": "ignored", "reason": "not a push envelope"})
        try:
            async with resources.sessions() as session, session.begin():
                account = (
                    await session.exec(
                        select(ChannelAccount).where(
                            ChannelAccount.channel == "gmail",
                            ChannelAccount.external_account_id == envelope.email,
                            ChannelAccount.is_active.is_(True),  # type: ignore[attr-defined]
                        )
                    )
                ).first()
                if account is None:
                    log.warning("webhook_unknown_account", channel="gmail", account_id=envelope.email)
                    return JSONResponse(
                        {"status": "ok", "stored": 0, "duplicates": 0, "unknown_accounts": [envelope.email]}
                    )
                inserted = (
                    await session.exec(
                        insert(GmailPushNotification.__table__)  # type: ignore[arg-type]
                        .values(
                            id=uuid.uuid4(),
                            tenant_id=account.tenant_id,
                            channel_account_id=account.id,
                            pubsub_message_id=envelope.message_id[:255],
                            history_id=envelope.history_id,
                            published_at=envelope.published_at,
                        )
                        .on_conflict_do_nothing(constraint="uq_gmail_push_pubsub_message")
                        .returning(GmailPushNotification.__table__.c.id)  # type: ignore[attr-defined]
                    )
                ).scalar_one_or_none()
        except (SQLAlchemyError, OSError) as exc:
            log.error("gmail_push_store_failed", error=f"{type(exc).__name__}: {exc}"[:300])
            return JSONResponse(
                {"error": "temporarily unavailable"}, status_code=503, headers={"Retry-After": "5"}
            )
        if inserted is not None and resources.redis is not None:
            try:
                await enqueue_sync(resources.redis, account.id, reason="push", key=envelope.message_id)
            except Exception as exc:  # noqa: BLE001 (stored; the poll syncs the mailbox anyway)
                log.error("gmail_sync_enqueue_failed", error=str(exc)[:200])
        log.info(
            "gmail_push_accepted",
            tenant_id=str(account.tenant_id),
            duplicate=inserted is None,
            ack_ms=round((time.perf_counter() - started) * 1000, 2),
        )
        return JSONResponse(
            {
                "status": "ok",
                "stored": int(inserted is not None),
                "duplicates": int(inserted is None),
                "unknown_accounts": [],
            }
        )

    return router
