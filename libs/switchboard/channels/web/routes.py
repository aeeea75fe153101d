"""The visitor's side of the website chat, served by the ``web`` service (every path under ``/web``).

* ``GET /widget.js``: the widget (one vendored file, no framework, no CDN);
* ``GET /v1/config?key=``: the widget's colour, greetings and title, and whether the team answers now
  (``availability``: the next opening when closed, for the out-of-hours notice);
* ``POST /v1/messages``: a visitor's messages and the delivery states of replies
  (:mod:`switchboard.channels.web.normalize`), stored by the same ingest as every channel's webhook;
* ``POST /v1/files``: one image (JPEG, PNG, GIF, WebP) or PDF document, recognized by its bytes;
* ``GET /v1/stream?key=&visitor=``: the visitor's stream as Server-Sent Events, resumed after
  ``Last-Event-ID`` (or ``?after=``) (:mod:`switchboard.channels.web.stream`).

Every request must come from one of the tenant's ``web.allowed_origins`` (the ``Origin`` header):
missing → 401, another → 403, and only an allowed origin gets CORS headers. A preflight (``OPTIONS``)
carries no widget key, so it is answered for an origin some widget allows; the request itself is then
checked against its own widget. Limits: bodies (``read_limited``), text length, file size and type,
messages per visitor and per network address per minute (429 with ``Retry-After``). Outcomes are the
webhook's: an unknown widget key is acknowledged with ``unknown_accounts`` (and logged), a database
that cannot take the message → 503.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from importlib import resources as package_files
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from sqlalchemy import text

from switchboard.channels.accounts import AccountDirectory
from switchboard.channels.ingest import NormalizedDelivery, ingest_delivery
from switchboard.channels.sanitize import parse_clean_json_body
from switchboard.channels.web.normalize import CLIENT_ID, VisitorIdentity, normalize_visitor_post
from switchboard.channels.web.settings import normalize_origin
from switchboard.channels.web.stream import append_event, events_after, live_channel, notify
from switchboard.channels.web.widgets import (
    CHANNEL,
    Widget,
    WidgetDirectory,
    origin_allowed,
    over_rate,
    valid_visitor_id,
    verified_user,
)
from switchboard.channels.webhook import read_limited
from switchboard.contracts import InboundMessage, MediaRef
from switchboard.crypto import CredentialCipher
from switchboard.db.errors import is_connection_error
from switchboard.observability import get_logger
from switchboard.runtime.resources import Resources
from switchboard.settings import Settings
from switchboard.tenant_settings import TenantSettings

__all__ = ["ALLOWED_FILE_TYPES", "web_router", "widget_script"]

log = get_logger(__name__)

ALLOWED_FILE_TYPES = {
    "image/jpeg": "image",
    "image/png": "image",
    "image/gif": "image",
    "image/webp": "image",
    "application/pdf": "document",
}
"""What a visitor may attach, by the type its bytes show (never the name or the declared type)."""
_JSON_OVERHEAD = 64 * 1024
_PREFLIGHT_ORIGINS = text(
    "SELECT 1 FROM tenants t JOIN channel_accounts a ON a.tenant_id = t.id "
    "WHERE a.channel = 'web' AND a.is_active AND t.settings_extensions -> 'web' -> 'allowed_origins' ? :origin "
    "LIMIT 1"
)


def widget_script() -> bytes:
    """The widget's JavaScript, as vendored in this package."""
    return (package_files.files("switchboard.channels.web") / "static" / "widget.js").read_bytes()


def _error(status: int, words: str, origin: str | None = None, **headers: str) -> JSONResponse:
    response = JSONResponse({"error": words}, status_code=status, headers=headers)
    if origin:
        _cors(response, origin)
    return response


def _cors(response: Response, origin: str) -> Response:
    response.headers["Access-Control-Allow-Origin"] = origin
    response.headers["Vary"] = "Origin"
    return response


class _Denied(Exception):
    def __init__(self, response: Response) -> None:
        self.response = response


Availability = Callable[[TenantSettings], dict[str, Any]]
"""Whether a tenant's team answers now: ``{"open": bool, ...}`` (the service passes
``switchboard.handoff.hours.availability``, a layer above the channels)."""


def _always_open(_: TenantSettings) -> dict[str, Any]:
    return {"open": True}


def web_router(settings: Settings, *, availability: Availability = _always_open) -> APIRouter:
    """The router of the web service (see the module docstring); ``availability`` feeds the config's
    out-of-hours notice."""
    router = APIRouter(tags=["web"])
    script = widget_script()
    cipher = CredentialCipher.from_settings(settings)
    preflight_cache: dict[str, tuple[float, bool]] = {}

    def resources_of(request: Request) -> Resources:
        return request.app.state.resources  # type: ignore[no-any-return]

    def directory_of(request: Request) -> WidgetDirectory:
        state = request.app.state
        if getattr(state, "widget_directory", None) is None:
            state.widget_directory = WidgetDirectory(resources_of(request).sessions, cipher)
        return state.widget_directory  # type: ignore[no-any-return]

    def accounts_of(request: Request) -> AccountDirectory:
        state = request.app.state
        if getattr(state, "web_accounts", None) is None:
            state.web_accounts = AccountDirectory(resources_of(request).sessions, CHANNEL)
        return state.web_accounts  # type: ignore[no-any-return]

    def check_origin(request: Request, widget: Widget) -> str:
        """The request's allowed origin. Raises _Denied: 401 without ``Origin``, 403 for another one."""
        origin = request.headers.get("origin")
        if not origin:
            log.warning("web_rejected", reason="no origin", widget=widget.key)
            raise _Denied(_error(401, "This chat runs only on the business's website."))
        if not origin_allowed(origin, widget.origins):
            log.warning("web_rejected", reason="origin not allowed", widget=widget.key, origin=origin[:200])
            raise _Denied(_error(403, "This website may not use this chat."))
        return origin

    def identify(widget: Widget, data: Any) -> VisitorIdentity:
        """The visitor (and the verified user, when the signature matches). Raises _Denied: 400."""
        visitor = data.get("visitor") if hasattr(data, "get") else None
        if not isinstance(visitor, str) or not valid_visitor_id(visitor):
            raise _Denied(_error(400, "The visitor id is missing or malformed."))
        user_id, given = data.get("user_id"), data.get("user_hash")
        user = verified_user(
            widget.secret,
            user_id if isinstance(user_id, str) else None,
            given if isinstance(given, str) else None,
        )
        if user_id and user is None:
            log.warning("web_identity_refused", widget=widget.key)  # never linked; anonymous instead
        name = data.get("name")
        return VisitorIdentity(visitor, user, name[:200] if isinstance(name, str) and name.strip() else None)

    async def rate_check(
        request: Request,
        widget: Widget,
        who: VisitorIdentity,
        count: int,
        origin: str,
        *,
        statuses: bool = False,
    ) -> None:
        """Raises _Denied: 429 when the visitor or the address sent too much this minute (a post of
        delivery states alone counts once, for the address)."""
        if count <= 0 and not statuses:
            return
        redis = resources_of(request).redis
        address = request.client.host if request.client else "unknown"
        limits = [(f"a:{address}", settings.web_address_messages_per_minute, max(count, 1))]
        if count:
            limits.insert(
                0, (f"v:{widget.account_id}:{who.visitor}", settings.web_visitor_messages_per_minute, count)
            )
        for key, limit, amount in limits:
            if await over_rate(redis, key, limit, amount=amount):
                log.warning("web_rate_limited", widget=widget.key, scope=key.split(":", 1)[0])
                raise _Denied(
                    _error(429, "Too many messages; please wait a moment.", origin, **{"Retry-After": "60"})
                )

    async def store(
        request: Request, widget_key: str, delivery: NormalizedDelivery, *, cleaned: bool
    ) -> dict[str, Any] | Response:
        resources = resources_of(request)
        try:
            result = await ingest_delivery(
                delivery=delivery,
                sessions=resources.sessions,
                redis=resources.redis,
                accounts=accounts_of(request),
                debounce_s=settings.inbound_debounce_s,
                cleaned=cleaned,
                driver=resources.driver,
            )
        except Exception as exc:
            if not is_connection_error(exc):
                raise
            log.error("webhook_store_failed", channel=CHANNEL, error=f"{type(exc).__name__}: {exc}"[:300])
            return _error(503, "The chat is briefly unavailable; please try again.", **{"Retry-After": "5"})
        return {
            "status": "ok",
            "stored": len(result.stored_ids),
            "duplicates": result.duplicates,
            "statuses": result.statuses,
            "unknown_accounts": sorted(result.unknown_accounts),
        }

    async def echo_to_stream(
        request: Request, widget: Widget, who: VisitorIdentity, messages: list[InboundMessage]
    ) -> None:
        """The visitor's own messages into their stream (their other tabs, a reload) — once each."""
        if not messages:
            return
        resources = resources_of(request)
        async with resources.sessions() as session, session.begin():
            for msg in messages:
                payload: dict[str, Any] = {"text": msg.text}
                if msg.media:
                    payload["media"] = [
                        {"mime": m.mime, "filename": m.filename, "kind": msg.kind} for m in msg.media
                    ]
                await append_event(
                    session,
                    tenant_id=widget.tenant_id,
                    account_id=widget.account_id,
                    address=who.address,
                    kind="visitor",
                    external_id=msg.external_id[:64],
                    payload=payload,
                )
        try:
            await notify(resources.redis, widget.account_id, who.address, {"type": "new"})
        except Exception as exc:  # noqa: BLE001 (the stream polls too)
            log.warning("web_notify_failed", error=f"{type(exc).__name__}: {exc}"[:200])

    @router.get("/widget.js", summary="The website chat widget (JavaScript)", include_in_schema=True)
    async def widget_js() -> Response:
        return Response(
            script,
            media_type="text/javascript; charset=utf-8",
            headers={"Cache-Control": "public, max-age=300", "X-Content-Type-Options": "nosniff"},
        )

    async def some_widget_allows(request: Request, origin: str) -> bool:
        """Whether any active widget allows ``origin`` (cached a few seconds): for requests that name no
        widget yet (a preflight, an unreadable body)."""
        try:
            normalized = normalize_origin(origin)
        except ValueError:
            return False
        loop = asyncio.get_running_loop()
        hit = preflight_cache.get(normalized)
        if hit is None or hit[0] < loop.time():
            async with resources_of(request).sessions() as session:
                found = (await session.exec(_PREFLIGHT_ORIGINS, params={"origin": normalized})).first()  # type: ignore[call-overload]
            hit = preflight_cache[normalized] = (loop.time() + 5.0, found is not None)
        return hit[1]

    @router.options("/v1/{path:path}", include_in_schema=False)
    async def preflight(request: Request, path: str) -> Response:
        origin = request.headers.get("origin") or ""
        if not await some_widget_allows(request, origin):
            return Response(status_code=403)
        response = Response(status_code=204)
        response.headers["Access-Control-Allow-Methods"] = "GET, POST"
        response.headers["Access-Control-Allow-Headers"] = "Content-Type, Last-Event-ID"
        response.headers["Access-Control-Max-Age"] = "600"
        return _cors(response, origin)

    @router.get("/v1/config", summary="The widget's look: colour, greetings, title")
    async def config(request: Request, key: str = "") -> Response:
        widget = await directory_of(request).resolve(key)
        if widget is None:
            return _error(404, "No chat with this key.")
        try:
            origin = check_origin(request, widget)
        except _Denied as denied:
            return denied.response
        look = widget.settings
        body = {
            "colour": look.colour,
            "greeting": {"en": look.greeting_en, "es": look.greeting_es},
            "title": look.title or widget.tenant_name,
            "max_text_chars": settings.web_max_text_chars,
            "max_file_bytes": settings.web_max_file_bytes,
            "file_types": sorted(ALLOWED_FILE_TYPES),
            "availability": availability(widget.tenant_settings),
        }
        return _cors(JSONResponse(body, headers={"Cache-Control": "no-store"}), origin)

    @router.post("/v1/messages", summary="A visitor's messages and the delivery states of replies")
    async def messages(request: Request) -> Response:
        """Outcomes as a webhook's: 413 over the body limit, 401 without ``Origin``, 403 from a website no
        widget allows; otherwise 200, also for what cannot be read (``ignored``, logged: sending the
        same bytes again cannot help) and for an unknown key (``unknown_accounts``). A message over
        ``WEB_MAX_TEXT_CHARS`` is not stored and its id is listed in ``too_long``; 429 past a rate limit."""
        limit = settings.web_max_text_chars * 4 * 10 + _JSON_OVERHEAD  # ten messages of the longest text
        raw = await read_limited(request, limit)
        if raw is None:
            return _error(413, "The message is too long.")
        origin = request.headers.get("origin")
        if not origin:
            log.warning("web_rejected", reason="no origin")
            return _error(401, "This chat runs only on the business's website.")
        body, malformed = parse_clean_json_body(raw)
        key = body.get("key") if isinstance(body, dict) and isinstance(body.get("key"), str) else None
        widget = await directory_of(request).resolve(key[:100]) if key else None
        if widget is None:
            if not await some_widget_allows(request, origin):
                log.warning("web_rejected", reason="origin not allowed", origin=origin[:200])
                return _error(403, "This website may not use this chat.")
            if key is None:
                log.error("web_unreadable", error=malformed or "no widget key", size_bytes=len(raw))
                return _cors(JSONResponse({"status": "ignored", "reason": "not a chat message"}), origin)
            # acknowledged and logged as every channel's unknown account
            log.warning("webhook_unknown_account", channel=CHANNEL, account_id=key[:100])
            return _cors(
                JSONResponse(
                    {
                        "status": "ok",
                        "stored": 0,
                        "duplicates": 0,
                        "statuses": 0,
                        "unknown_accounts": [key[:100]],
                    }
                ),
                origin,
            )
        try:
            origin = check_origin(request, widget)
            try:
                who = identify(widget, body)
            except _Denied:
                log.error("web_unreadable", error="no visitor id", widget=widget.key)
                return _cors(JSONResponse({"status": "ignored", "reason": "no visitor id"}), origin)
            delivery = normalize_visitor_post(body, key=widget.key, who=who)
            too_long = [m.external_id for m in delivery.messages if len(m.text) > settings.web_max_text_chars]
            delivery.messages = [m for m in delivery.messages if m.external_id not in too_long]
            await rate_check(
                request, widget, who, len(delivery.messages), origin, statuses=bool(delivery.statuses)
            )
        except _Denied as denied:
            return denied.response
        outcome = await store(request, widget.key, delivery, cleaned=True)
        if isinstance(outcome, Response):
            return _cors(outcome, origin)
        await echo_to_stream(request, widget, who, delivery.messages)
        outcome["verified"] = who.user_id is not None
        outcome["too_long"] = too_long
        return _cors(JSONResponse(outcome), origin)

    @router.post("/v1/files", summary="One image or PDF document from a visitor")
    async def files(request: Request) -> Response:
        limit = settings.web_max_file_bytes + _JSON_OVERHEAD
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > limit:
            return _error(413, "The file is too large.")
        from switchboard.body_limit import BodyTooLarge, allow_body

        allow_body(request, limit)
        try:
            form = await request.form(max_files=1, max_fields=10, max_part_size=limit)
        except BodyTooLarge:
            return _error(413, "The file is too large.")
        except Exception:  # noqa: BLE001 (a malformed multipart body)
            return _error(400, "The request is not a file upload.")
        key = str(form.get("key") or "")[:100]
        widget = await directory_of(request).resolve(key)
        if widget is None:
            return _error(404, "No chat with this key.")
        try:
            origin = check_origin(request, widget)
            who = identify(widget, form)
            client_id = str(form.get("id") or "")
            if not CLIENT_ID.match(client_id):
                raise _Denied(_error(400, "The message id is missing or malformed.", origin))
            upload = form.get("file")
            if upload is None or isinstance(upload, str):
                raise _Denied(_error(400, "No file was attached.", origin))
            data = await upload.read(settings.web_max_file_bytes + 1)
            if len(data) > settings.web_max_file_bytes:
                raise _Denied(
                    _error(
                        413,
                        f"A file may be at most {settings.web_max_file_bytes // (1024 * 1024)} MB.",
                        origin,
                    )
                )
            from switchboard.media import MediaStore, sniff_mime

            mime = sniff_mime(data)
            kind = ALLOWED_FILE_TYPES.get(mime or "")
            if kind is None:
                raise _Denied(_error(415, "Send an image (JPEG, PNG, GIF, WebP) or a PDF document.", origin))
            caption = str(form.get("caption") or "")[: settings.web_max_text_chars]
            await rate_check(request, widget, who, 1, origin)
        except _Denied as denied:
            return denied.response
        stored = await MediaStore.from_settings(settings).put(
            data, namespace=f"web/{widget.tenant_id}", mime=mime
        )
        filename = (getattr(upload, "filename", None) or "file")[:200]
        message = InboundMessage(
            channel="web",
            account_id=key,
            kind=kind,
            external_id=client_id,
            sender_id=who.address,
            sent_at=datetime.now(UTC),
            text=caption,
            media=[
                MediaRef(
                    ref=stored.ref,
                    mime=mime,
                    filename=filename,
                    caption=caption or None,
                    size_bytes=len(data),
                )
            ],
            identities=who.identities,
            sender_name=who.name,
            raw={"web": {"client_id": client_id, "verified": bool(who.user_id)}},
        )
        outcome = await store(request, key, NormalizedDelivery(messages=[message]), cleaned=False)
        if isinstance(outcome, Response):
            return _cors(outcome, origin)
        await echo_to_stream(request, widget, who, [message])
        return _cors(JSONResponse(outcome), origin)

    @router.get("/v1/stream", summary="The visitor's stream of replies (Server-Sent Events)")
    async def stream(request: Request, key: str = "", after: int = 0) -> Response:
        widget = await directory_of(request).resolve(key)
        if widget is None:
            return _error(404, "No chat with this key.")
        try:
            origin = check_origin(request, widget)
            who = identify(widget, request.query_params)
        except _Denied as denied:
            return denied.response
        last = request.headers.get("last-event-id", "")
        start = max(after, int(last) if last.isdigit() else 0)
        resources = resources_of(request)

        async def events() -> AsyncIterator[bytes]:
            seen = start
            pubsub = resources.redis.pubsub()
            await pubsub.subscribe(live_channel(widget.account_id, who.address))
            try:
                yield f"retry: 2000\nevent: hello\ndata: {json.dumps({'verified': who.user_id is not None})}\n\n".encode()
                while True:
                    for event in await events_after(resources.sessions, widget.account_id, who.address, seen):
                        seen = event.seq
                        yield f"id: {event.seq}\ndata: {event.to_json()}\n\n".encode()
                    try:
                        notice = await pubsub.get_message(
                            ignore_subscribe_messages=True, timeout=settings.web_stream_poll_s
                        )
                    except Exception:  # noqa: BLE001 (Redis went away: poll the database instead)
                        notice = None
                        await asyncio.sleep(settings.web_stream_poll_s)
                    if notice is None:
                        yield b": keep-alive\n\n"
                        continue
                    data = json.loads(notice["data"])
                    if data.get("type") in ("seen", "typing"):
                        yield f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode()
            finally:
                try:
                    await pubsub.unsubscribe()
                    await pubsub.aclose()
                except Exception:  # noqa: BLE001 (closing a connection that is gone)
                    pass

        response = StreamingResponse(
            events(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )
        return _cors(response, origin)

    return router
