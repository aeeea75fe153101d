"""The webhook route of a Meta channel (WhatsApp, Instagram): the subscription handshake (GET) and
deliveries (POST), the same for every Meta channel; what differs is a :class:`MetaWebhook` spec.

Our own route, not pywa's: pywa's answers 200 before the work is durable and de-duplicates in memory.
Outcomes of a POST, and why:

* body over the channel's byte limit → **413** (checked before reading more than the limit);
* ``X-Hub-Signature-256`` missing → **401**, wrong → **403**; nothing is stored or enqueued;
* signed but not JSON, or not the channel's ``object`` → **200 and an error log**: Meta retries every
  non-2xx delivery for days, and a retry cannot fix the body, so we stop it here;
* signed JSON with odd values (NUL, lone surrogates, invalid UTF-8, ``NaN``/``1e400``, huge integers,
  deep nesting) is cleaned before the channel's normalizer sees it (:mod:`switchboard.channels.sanitize`);
  a message that still cannot be processed is stored with its reason, its siblings are unaffected;
* an unknown receiving account → **200 and a warning** with the id (so Meta stops retrying);
* the database is unavailable (a connection-level error only, :func:`~switchboard.db.errors.is_connection_error`)
  → **503** (Meta retries later); a value the database refuses is stored bare with its reason, → 200;
* stored (or duplicate) → **200** after the insert committed; Redis trouble at enqueue time still
  answers 200 because the row is durable and the sweeper enqueues it.

Log events are the same for every channel (``webhook_accepted``, ``webhook_rejected``, ...) with a
``channel`` field, so one query follows every channel.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from switchboard.api.deps import SettingsDep
from switchboard.body_limit import BodyTooLarge, allow_body
from switchboard.channels.accounts import AccountDirectory
from switchboard.channels.handshakes import account_of_verify_token, record_handshake
from switchboard.channels.ingest import NormalizedDelivery, Throttle, ingest_delivery
from switchboard.channels.meta import SIGNATURE_HEADER, challenge_response, signature_is_valid
from switchboard.channels.sanitize import parse_clean_json_body
from switchboard.db.errors import is_connection_error
from switchboard.observability import get_logger, metrics
from switchboard.runtime.resources import Resources
from switchboard.settings import Settings

__all__ = ["LeanRouter", "MetaWebhook", "meta_webhook_router", "read_limited", "account_directory"]

log = get_logger(__name__)


@dataclass(frozen=True)
class MetaWebhook:
    """What one Meta channel's webhook route needs to know."""

    channel: str
    """Channel name (``messages.channel``, log field, URL ``/webhooks/<channel>``)."""
    object_name: str
    """The body's ``object`` Meta sends for this product (``whatsapp_business_account``, ``instagram``)."""
    normalize: Callable[[dict[str, Any]], NormalizedDelivery]
    """Parsed body → every event it carried; must never raise on odd shapes."""
    app_secret: Callable[[Settings], str]
    """The app secret that signs this product's deliveries (may differ per product)."""
    verify_token: Callable[[Settings], str]
    """The token the subscription handshake must present."""
    max_body_bytes: Callable[[Settings], int]
    throttle: Callable[[Settings], Throttle | None] = lambda _settings: None
    """The throughput-limit error codes of this channel and how long its sends then wait."""
    description: str = ""
    """Extra OpenAPI text for the POST route."""


def account_directory(request: Request, resources: Resources, channel: str) -> AccountDirectory:
    """The process's directory of ``channel``'s accounts (cached lookups), built on first use."""
    directories: dict[str, AccountDirectory] = request.app.state.__dict__.setdefault(
        "account_directories", {}
    )
    directory = directories.get(channel)
    if directory is None:
        directory = directories[channel] = AccountDirectory(resources.sessions, channel)
    return directory


async def read_limited(request: Request, limit: int) -> bytes | None:
    """The raw body, or ``None`` as soon as it exceeds ``limit`` bytes (never reads much past it).

    ``limit`` is also this request's body limit for the service (:func:`~switchboard.body_limit.allow_body`),
    so a webhook's own limit may be above or below the service default."""
    allow_body(request, limit)  # past it is answered by the route, in its own words
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
    except BodyTooLarge:
        return None
    return b"".join(chunks)


class LeanRouter(APIRouter):
    """An ``APIRouter`` some of whose POST routes the service app may also serve on a lean path.

    ``lean_posts`` maps an exact path to a handler ``(Request) -> Response`` that does everything the
    route does (the route calls it too, so OpenAPI and a test app mounting the router see the same
    route). :func:`switchboard.service_app.create_service_app` calls it straight from the ASGI entry,
    before FastAPI's middleware, routing and dependency solving: on the webhook hot path they cost
    more CPU than the durable work itself (py-spy on ``loadtests/webhook_vs_floor.py``).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lean_posts: dict[str, Callable[[Request], Awaitable[Response]]] = {}


def meta_webhook_router(spec: MetaWebhook) -> LeanRouter:
    """The router to mount at ``/webhooks/<spec.channel>``."""
    channel = spec.channel
    router = LeanRouter(prefix=f"/webhooks/{channel}", tags=[channel])
    # the metric children of this channel, looked up once (``labels()`` takes a lock per call)
    acks: dict[str, Any] = {}
    ack_seconds = metrics.WEBHOOK_ACK_SECONDS.labels(channel)

    @router.get(
        "",
        summary="Meta webhook subscription handshake",
        description="Answers `hub.challenge` as text when `hub.mode=subscribe` and `hub.verify_token` "
        "equals the configured verify token or a connected account's own one "
        "(`switchboard.channels.handshakes`); otherwise 403.",
        response_class=PlainTextResponse,
        operation_id=f"{channel}_webhook_handshake",
    )
    async def handshake(
        request: Request,
        settings: SettingsDep,
        mode: str | None = Query(None, alias="hub.mode"),
        token: str | None = Query(None, alias="hub.verify_token"),
        challenge: str | None = Query(None, alias="hub.challenge"),
    ) -> Response:
        secret = spec.verify_token(settings)
        body = challenge_response(mode, token, challenge, secret)
        account = None
        if body is None and (account := account_of_verify_token(secret, channel, token)) is not None:
            body = challenge_response(mode, token, challenge, token or "")  # an account's own token
        if body is None:
            log.warning("webhook_handshake_refused", channel=channel, mode=mode, has_token=bool(token))
            return PlainTextResponse("Forbidden", status_code=403)
        log.info("webhook_handshake_ok", channel=channel, account_id=account)
        resources = getattr(request.app.state, "resources", None)
        await record_handshake(getattr(resources, "redis", None), channel, account)
        return PlainTextResponse(body)

    async def receive_delivery(request: Request) -> Response:
        """One POST: every outcome of the module docstring. Called by the route below and, without
        FastAPI's routing, middleware and dependency solving, by the lean path (:class:`LeanRouter`)."""
        started = time.perf_counter()

        def ack(outcome: str, response: Response) -> Response:
            """Count the answer (``switchboard_webhook_acks_total``, ``..._ack_seconds``) and return it."""
            counter = acks.get(outcome)
            if counter is None:
                counter = acks[outcome] = metrics.WEBHOOK_ACKS.labels(channel, outcome)
            counter.inc()
            ack_seconds.observe(time.perf_counter() - started)
            return response

        state = request.app.state
        settings: Settings = state.settings
        resources: Resources = state.resources
        limit = spec.max_body_bytes(settings)
        raw = await read_limited(request, limit)
        if raw is None:
            log.warning("webhook_too_large", channel=channel, limit_bytes=limit)
            return ack("too_large", JSONResponse({"error": "body too large"}, status_code=413))
        header = request.headers.get(SIGNATURE_HEADER)
        if not header:
            log.warning("webhook_rejected", channel=channel, reason="missing signature")
            return ack(
                "missing_signature", JSONResponse({"error": f"missing {SIGNATURE_HEADER}"}, status_code=401)
            )
        if not signature_is_valid(raw, header, spec.app_secret(settings)):
            log.warning("webhook_rejected", channel=channel, reason="bad signature")
            return ack("bad_signature", JSONResponse({"error": "invalid signature"}, status_code=403))
        body, malformed = parse_clean_json_body(raw)
        if malformed is not None:
            log.error("webhook_malformed", channel=channel, error=malformed, size_bytes=len(raw))
            return ack("malformed", JSONResponse({"status": "ignored", "reason": "malformed json"}))
        if not isinstance(body, dict) or body.get("object") != spec.object_name:
            log.error(
                "webhook_unknown_shape",
                channel=channel,
                object=str(body.get("object"))[:100] if isinstance(body, dict) else type(body).__name__,
            )
            return ack("unknown_shape", JSONResponse({"status": "ignored", "reason": "unknown object"}))
        try:
            delivery = spec.normalize(body)
        except Exception as exc:  # noqa: BLE001 (a normalizer bug: a retry of the same bytes cannot help)
            log.exception(
                "webhook_normalize_failed", channel=channel, error=f"{type(exc).__name__}: {exc}"[:300]
            )
            return ack("unreadable", JSONResponse({"status": "ignored", "reason": "unreadable"}))
        try:
            result = await ingest_delivery(
                delivery=delivery,
                sessions=resources.sessions,
                redis=resources.redis,
                accounts=account_directory(request, resources, channel),
                debounce_s=settings.inbound_debounce_s,
                throttle=spec.throttle(settings),
                cleaned=True,
                driver=resources.driver,
            )
        except Exception as exc:
            if not is_connection_error(exc):
                raise
            log.error("webhook_store_failed", channel=channel, error=f"{type(exc).__name__}: {exc}"[:300])
            return ack(
                "unavailable",
                JSONResponse(
                    {"error": "temporarily unavailable"}, status_code=503, headers={"Retry-After": "5"}
                ),
            )
        # debug: one log line per delivery costs more than the rest of the 200 (counted by the metrics)
        log.debug(
            "webhook_accepted",
            channel=channel,
            stored=len(result.stored_ids),
            duplicates=result.duplicates,
            statuses=result.statuses,
            unknown_accounts=sorted(result.unknown_accounts),
            skipped=delivery.skipped,
            ack_ms=round((time.perf_counter() - started) * 1000, 2),
        )
        return ack(
            "accepted",
            JSONResponse(
                {
                    "status": "ok",
                    "stored": len(result.stored_ids),
                    "duplicates": result.duplicates,
                    "statuses": result.statuses,
                    "unknown_accounts": sorted(result.unknown_accounts),
                }
            ),
        )

    @router.post(
        "",
        summary=f"{channel} webhook delivery",
        description="Verifies X-Hub-Signature-256, stores every message durably (deduplicated on the provider's "
        "message id), enqueues one job per new message and answers 200; 401/403 bad signature, 413 too large, "
        "503 when the database cannot take the delivery (Meta retries). " + spec.description,
        operation_id=f"{channel}_webhook_delivery",
    )
    async def deliver(request: Request) -> Response:
        return await receive_delivery(request)

    router.lean_posts[router.prefix] = receive_delivery
    return router
