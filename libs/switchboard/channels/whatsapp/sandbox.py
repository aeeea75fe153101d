"""A local stand-in for the Graph API's WhatsApp endpoints, for the demo, ``simulate`` and tests.

It records every message sent through it and answers like Meta (``messages[0].id`` wamids, error
bodies ``{"error": {"code", "message", "error_data": {"details"}}}``). Mounted by the WhatsApp
service at ``/_sandbox/graph`` when ``WHATSAPP_SANDBOX_ENABLED`` (default), and pointed to by the
worker when ``WHATSAPP_GRAPH_BASE_URL`` is unset.

Control endpoints (not part of Meta's API): ``GET /_control/sent?after=N`` lists recorded sends with
``seq > N``; ``POST /_control/failures`` queues failures ``{"to", "code", "http_status", "times"}`` for
the next sends to ``to``; ``PUT /_control/media/{id}`` stores bytes served by the media endpoints.
"""

from __future__ import annotations

import hashlib
import itertools
import time
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

__all__ = ["GraphSandbox", "sandbox_router"]

_ERROR_TEXT = {
    131047: "Re-engagement message",
    131026: "Message undeliverable",
    130429: "Rate limit hit",
    131000: "Something went wrong",
}


@dataclass
class GraphSandbox:
    """In-memory state of the sandbox: recorded sends, queued failures and media blobs."""

    sent: list[dict[str, Any]] = field(default_factory=list)
    read_marks: list[str] = field(default_factory=list)
    failures: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    media: dict[str, tuple[bytes, str]] = field(default_factory=dict)
    _seq: itertools.count = field(default_factory=lambda: itertools.count(1))


def _error(code: int, http_status: int) -> JSONResponse:
    title = _ERROR_TEXT.get(code, "Error")
    return JSONResponse(
        {
            "error": {
                "message": f"(#{code}) {title}",
                "type": "OAuthException",
                "code": code,
                "error_data": {"messaging_product": "whatsapp", "details": title},
                "fbtrace_id": "SANDBOX",
            }
        },
        status_code=http_status,
    )


def sandbox_router(sandbox: GraphSandbox | None = None) -> APIRouter:
    """Router to mount at ``/_sandbox/graph`` (state in ``sandbox``, a new one by default)."""
    state = sandbox or GraphSandbox()
    router = APIRouter(prefix="/_sandbox/graph", tags=["sandbox"], include_in_schema=False)
    router.sandbox = state  # type: ignore[attr-defined]

    @router.get("/_control/sent")
    async def list_sent(after: int = 0) -> dict[str, Any]:
        return {"messages": [m for m in state.sent if m["seq"] > after], "last_seq": len(state.sent)}

    @router.post("/_control/failures")
    async def add_failure(request: Request) -> dict[str, Any]:
        spec = await request.json()
        queue = state.failures.setdefault(str(spec["to"]), [])
        queue.extend([(int(spec["code"]), int(spec.get("http_status", 400)))] * int(spec.get("times", 1)))
        return {"queued": len(queue)}

    @router.put("/_control/media/{media_id}")
    async def put_media(media_id: str, request: Request) -> dict[str, Any]:
        state.media[media_id] = (
            await request.body(),
            request.headers.get("content-type", "application/octet-stream"),
        )
        return {"stored": media_id}

    @router.get("/_media/{media_id}")
    async def media_bytes(media_id: str, request: Request) -> Response:
        if not request.headers.get("authorization", "").startswith("Bearer "):
            return Response("<html>login required</html>", status_code=401, media_type="text/html")
        blob = state.media.get(media_id)
        if blob is None:
            return _error(131052, 404)
        return Response(blob[0], media_type=blob[1])

    @router.post("/{version}/{phone_number_id}/messages")
    async def send(version: str, phone_number_id: str, request: Request) -> Response:
        if not request.headers.get("authorization", "").startswith("Bearer "):
            return _error(190, 401)
        body = await request.json()
        if body.get("status") == "read":
            state.read_marks.append(str(body.get("message_id")))
            return JSONResponse({"success": True})
        to = str(body.get("to", ""))
        queued = state.failures.get(to)
        if queued:
            code, http_status = queued.pop(0)
            return _error(code, http_status)
        seq = next(state._seq)
        wamid = "wamid.SANDBOX" + hashlib.sha256(f"{seq}:{time.time_ns()}".encode()).hexdigest()[:24].upper()
        kind = body.get("type", "text")
        record = {
            "seq": seq,
            "id": wamid,
            "phone_number_id": phone_number_id,
            "to": to,
            "type": kind,
            "text": (body.get(kind) or {}).get("body") if kind == "text" else None,
            "reply_to": (body.get("context") or {}).get("message_id"),
            "body": body,
            "at": time.time(),
        }
        state.sent.append(record)
        return JSONResponse(
            {
                "messaging_product": "whatsapp",
                "contacts": [{"input": to, "wa_id": to}],
                "messages": [{"id": wamid}],
            }
        )

    @router.get("/{version}/{media_id}")
    async def media_url(version: str, media_id: str, request: Request) -> Response:
        blob = state.media.get(media_id)
        if blob is None:
            return _error(100, 400)
        base = str(request.base_url).rstrip("/")
        return JSONResponse(
            {
                "url": f"{base}/_sandbox/graph/_media/{media_id}",
                "mime_type": blob[1],
                "sha256": hashlib.sha256(blob[0]).hexdigest(),
                "file_size": len(blob[0]),
                "id": media_id,
                "messaging_product": "whatsapp",
            }
        )

    return router
