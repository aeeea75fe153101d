"""``/webhooks/whatsapp``: the Meta subscription handshake (GET) and webhook deliveries (POST).

Our own route, not pywa's: pywa's answers 200 before the work is durable and de-duplicates in memory
(LIBRARIES.md §4). Outcomes of a POST, and why:

* body over ``WHATSAPP_MAX_BODY_BYTES`` → **413** (checked before reading more than the limit);
* ``X-Hub-Signature-256`` missing → **401**, wrong → **403**; nothing is stored or enqueued;
* signed but not JSON, or not a ``whatsapp_business_account`` object → **200 and an error log**: Meta
  retries every non-2xx delivery for days, and a retry cannot fix the body, so we stop it here;
* an unknown ``phone_number_id`` → **200 and a warning** with the id (so Meta stops retrying);
* the database cannot take the insert → **503** (Meta retries later; nothing was committed);
* stored (or duplicate) → **200** after the insert committed; Redis trouble at enqueue time still
  answers 200 because the row is durable and the sweeper enqueues it.
"""

from __future__ import annotations

import json
import time
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from sqlalchemy.exc import SQLAlchemyError

from switchboard.channels.meta import SIGNATURE_HEADER, challenge_response, signature_is_valid
from switchboard.channels.whatsapp.accounts import AccountDirectory
from switchboard.channels.whatsapp.normalize import normalize_delivery
from switchboard.channels.whatsapp.store import ingest_delivery
from switchboard.observability import get_logger

__all__ = ["webhook_router"]

log = get_logger(__name__)


def _directory(request: Request) -> AccountDirectory:
    state = request.app.state
    directory = getattr(state, "whatsapp_accounts", None)
    if directory is None:
        directory = AccountDirectory(state.resources.sessions)
        state.whatsapp_accounts = directory
    return directory


async def _read_limited(request: Request, limit: int) -> bytes | None:
    """The raw body, or ``None`` as soon as it exceeds ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def webhook_router() -> APIRouter:
    """The router to mount at ``/webhooks/whatsapp``."""
    router = APIRouter(prefix="/webhooks/whatsapp", tags=["whatsapp"])

    @router.get(
        "",
        summary="Meta webhook subscription handshake",
        description="Answers `hub.challenge` as text when `hub.mode=subscribe` and `hub.verify_token` "
        "equals META_VERIFY_TOKEN; otherwise 403.",
        response_class=PlainTextResponse,
    )
    async def handshake(
        request: Request,
        mode: str | None = Query(None, alias="hub.mode"),
        token: str | None = Query(None, alias="hub.verify_token"),
        challenge: str | None = Query(None, alias="hub.challenge"),
    ) -> Response:
        settings = request.app.state.settings
        body = challenge_response(mode, token, challenge, settings.resolved_meta_verify_token())
        if body is None:
            log.warning("whatsapp_handshake_refused", mode=mode, has_token=bool(token))
            return PlainTextResponse("Forbidden", status_code=403)
        log.info("whatsapp_handshake_ok")
        return PlainTextResponse(body)

    @router.post(
        "",
        summary="WhatsApp Cloud API webhook delivery",
        description="Verifies X-Hub-Signature-256, stores every message durably (deduplicated on the wamid), "
        "enqueues one job per new message and answers 200; 401/403 bad signature, 413 too large, 503 when the "
        "database cannot take the delivery (Meta retries).",
    )
    async def deliver(request: Request) -> Response:
        started = time.perf_counter()
        settings = request.app.state.settings
        raw = await _read_limited(request, settings.whatsapp_max_body_bytes)
        if raw is None:
            log.warning("whatsapp_webhook_too_large", limit_bytes=settings.whatsapp_max_body_bytes)
            return JSONResponse({"error": "body too large"}, status_code=413)
        header = request.headers.get(SIGNATURE_HEADER)
        if not header:
            log.warning("whatsapp_webhook_rejected", reason="missing signature")
            return JSONResponse({"error": "missing X-Hub-Signature-256"}, status_code=401)
        if not signature_is_valid(raw, header, settings.resolved_meta_app_secret()):
            log.warning("whatsapp_webhook_rejected", reason="bad signature")
            return JSONResponse({"error": "invalid signature"}, status_code=403)
        try:
            body: Any = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            log.error("whatsapp_webhook_malformed", error=str(exc)[:200], size_bytes=len(raw))
            return JSONResponse({"status": "ignored", "reason": "malformed json"})
        if not isinstance(body, dict) or body.get("object") != "whatsapp_business_account":
            log.error(
                "whatsapp_webhook_unknown_shape",
                object=body.get("object") if isinstance(body, dict) else type(body).__name__,
            )
            return JSONResponse({"status": "ignored", "reason": "unknown object"})
        delivery = normalize_delivery(body)
        resources = request.app.state.resources
        try:
            result = await ingest_delivery(
                delivery=delivery,
                sessions=resources.sessions,
                redis=resources.redis,
                accounts=_directory(request),
                settings=settings,
            )
        except (SQLAlchemyError, OSError) as exc:
            log.error("whatsapp_webhook_store_failed", error=f"{type(exc).__name__}: {exc}"[:300])
            return JSONResponse(
                {"error": "temporarily unavailable"}, status_code=503, headers={"Retry-After": "5"}
            )
        log.info(
            "whatsapp_webhook_accepted",
            stored=len(result.stored_ids),
            duplicates=result.duplicates,
            statuses=result.statuses,
            unknown_accounts=sorted(result.unknown_accounts),
            skipped=delivery.skipped,
            ack_ms=round((time.perf_counter() - started) * 1000, 2),
        )
        return JSONResponse(
            {
                "status": "ok",
                "stored": len(result.stored_ids),
                "duplicates": result.duplicates,
                "statuses": result.statuses,
                "unknown_accounts": sorted(result.unknown_accounts),
            }
        )

    return router
