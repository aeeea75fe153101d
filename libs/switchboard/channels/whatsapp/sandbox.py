"""A local stand-in for the Graph API's WhatsApp endpoints, for the demo, ``simulate`` and tests.

It records every message sent through it and answers like Meta (``messages[0].id`` wamids, error
bodies ``{"error": {"code", "message", "error_data": {"details"}}}``). Mounted by the WhatsApp
service at ``/_sandbox/graph`` when ``WHATSAPP_SANDBOX_ENABLED`` (default), and pointed to by the
worker when ``WHATSAPP_GRAPH_BASE_URL`` is unset.

Control endpoints (not part of Meta's API; answered only to loopback clients, 403 otherwise):

* ``GET /_control/sent?after=N&phone_number_id=P`` lists recorded sends with ``seq > N`` (of the
  business number ``P`` only, when given), and ``last_seq``.
* ``GET /_control/read?phone_number_id=P`` lists the message ids number ``P`` marked read, in order.
* ``POST /_control/failures`` scripts the next sends, nothing by default. Body
  ``{"to" | "phone_number_id", "times": 1, "mode": "error", "code", "http_status": 400,
  "headers": {...}, "body": ..., "delay_s": 0}``: the next ``times`` sends to ``to`` (or from the
  number ``phone_number_id``) get the scripted answer. Modes:

  - ``error`` (default): not recorded; Meta's error body for ``code`` (or ``body`` as given) with
    ``http_status`` and ``headers`` (e.g. ``{"Retry-After": "7"}``);
  - ``accept_then_500``: the send **is recorded** (Meta accepted it), then the answer is lost: a
    500 that is not a Graph error (what a proxy answers when the upstream dies after accepting);
  - ``accept_then_hang``: recorded, then the answer waits ``delay_s`` (the caller times out first);
  - ``delay``: recorded and answered normally after ``delay_s``.

  ``delay_s`` also delays an ``error`` answer. Scripts for ``to`` are used before scripts for the
  number.
* ``DELETE /_control/failures?to=&phone_number_id=`` drops scripts that were not used.
* ``PUT /_control/media/{id}`` stores bytes served by the media endpoints.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

__all__ = ["GraphSandbox", "ScriptedAnswer", "sandbox_router"]

_ERROR_TEXT = {
    131047: "Re-engagement message",
    131026: "Message undeliverable",
    130429: "Rate limit hit",
    131000: "Something went wrong",
}
_LOOPBACK = {"127.0.0.1", "::1", "localhost", "testclient"}
"""Client hosts allowed on the control endpoints (``testclient``: Starlette's test client)."""

Mode = Literal["error", "accept_then_500", "accept_then_hang", "delay"]


@dataclass(frozen=True)
class ScriptedAnswer:
    """What the sandbox does with one scripted send (see the module docstring)."""

    mode: Mode = "error"
    code: int = 131000
    http_status: int = 400
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    """Raw answer body (JSON value or text) instead of Meta's error body for ``code``."""
    delay_s: float = 0.0


@dataclass
class GraphSandbox:
    """In-memory state of the sandbox: recorded sends, scripted answers and media blobs."""

    sent: list[dict[str, Any]] = field(default_factory=list)
    read_marks: list[str] = field(default_factory=list)
    """Ids of the messages marked read, in order (every number)."""
    read_marks_by_number: dict[str, list[str]] = field(default_factory=dict)
    """The same, per business number (``phone_number_id``)."""
    failures: dict[str, list[ScriptedAnswer]] = field(default_factory=dict)
    """Scripts for sends to one recipient (``to``)."""
    account_failures: dict[str, list[ScriptedAnswer]] = field(default_factory=dict)
    """Scripts for sends from one business number (``phone_number_id``)."""
    media: dict[str, tuple[bytes, str]] = field(default_factory=dict)
    _seq: itertools.count = field(default_factory=lambda: itertools.count(1))

    def sent_by(self, phone_number_id: str) -> list[dict[str, Any]]:
        """Recorded sends from one business number, in order."""
        return [m for m in self.sent if m["phone_number_id"] == phone_number_id]

    def read_marks_of(self, phone_number_id: str) -> list[str]:
        """Ids of the messages one business number marked read, in order."""
        return list(self.read_marks_by_number.get(phone_number_id, []))

    def script(self, answer: ScriptedAnswer, *, to: str | None = None, phone_number_id: str | None = None,
               times: int = 1) -> int:  # fmt: skip
        """Queue ``answer`` for the next ``times`` sends to ``to`` or from ``phone_number_id``.

        Returns:
            How many scripts that queue holds now.

        Raises:
            ValueError: neither or both of ``to`` and ``phone_number_id`` given.
        """
        if (to is None) == (phone_number_id is None):
            raise ValueError("script sends to one recipient (to) or from one number (phone_number_id)")
        table = self.failures if to is not None else self.account_failures
        queue = table.setdefault(str(to if to is not None else phone_number_id), [])
        queue.extend([answer] * times)
        return len(queue)

    def _next_script(self, to: str, phone_number_id: str) -> ScriptedAnswer | None:
        for table, key in ((self.failures, to), (self.account_failures, phone_number_id)):
            queue = table.get(key)
            if queue:
                return queue.pop(0)
        return None


def _error(code: int, http_status: int, headers: dict[str, str] | None = None) -> JSONResponse:
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
        headers=headers,
    )


def _scripted_error(answer: ScriptedAnswer) -> Response:
    if answer.body is None:
        return _error(answer.code, answer.http_status, answer.headers)
    if isinstance(answer.body, str):
        return PlainTextResponse(answer.body, status_code=answer.http_status, headers=answer.headers)
    return JSONResponse(answer.body, status_code=answer.http_status, headers=answer.headers)


def _require_loopback(request: Request) -> None:
    host = request.client.host if request.client else ""
    if host not in _LOOPBACK:
        raise HTTPException(status_code=403, detail="sandbox control endpoints answer loopback clients only")


def sandbox_router(sandbox: GraphSandbox | None = None) -> APIRouter:
    """Router to mount at ``/_sandbox/graph`` (state in ``sandbox``, a new one by default)."""
    state = sandbox or GraphSandbox()
    router = APIRouter(prefix="/_sandbox/graph", tags=["sandbox"], include_in_schema=False)
    router.sandbox = state  # type: ignore[attr-defined]

    @router.get("/_control/sent")
    async def list_sent(
        request: Request, after: int = 0, phone_number_id: str | None = None
    ) -> dict[str, Any]:
        _require_loopback(request)
        messages = state.sent if phone_number_id is None else state.sent_by(phone_number_id)
        return {"messages": [m for m in messages if m["seq"] > after], "last_seq": len(state.sent)}

    @router.get("/_control/read")
    async def list_read(request: Request, phone_number_id: str) -> dict[str, Any]:
        _require_loopback(request)
        return {"message_ids": state.read_marks_of(phone_number_id)}

    @router.post("/_control/failures")
    async def add_failure(request: Request) -> dict[str, Any]:
        _require_loopback(request)
        spec = await request.json()
        answer = ScriptedAnswer(
            mode=spec.get("mode", "error"),
            code=int(spec.get("code", 131000)),
            http_status=int(spec.get("http_status", 500 if spec.get("mode") == "accept_then_500" else 400)),
            headers={str(k): str(v) for k, v in (spec.get("headers") or {}).items()},
            body=spec.get("body"),
            delay_s=float(spec.get("delay_s", 0.0)),
        )
        if answer.mode not in ("error", "accept_then_500", "accept_then_hang", "delay"):
            raise HTTPException(status_code=422, detail=f"unknown mode {answer.mode!r}")
        try:
            queued = state.script(
                answer,
                to=spec.get("to"),
                phone_number_id=spec.get("phone_number_id"),
                times=int(spec.get("times", 1)),
            )
        except ValueError as exc:
            raise HTTPException(status_code=422, detail=str(exc)) from None
        return {"queued": queued}

    @router.delete("/_control/failures")
    async def clear_failures(
        request: Request, to: str | None = None, phone_number_id: str | None = None
    ) -> dict[str, Any]:
        _require_loopback(request)
        dropped = len(state.failures.pop(to, [])) if to else 0
        dropped += len(state.account_failures.pop(phone_number_id, [])) if phone_number_id else 0
        return {"dropped": dropped}

    @router.put("/_control/media/{media_id}")
    async def put_media(media_id: str, request: Request) -> dict[str, Any]:
        _require_loopback(request)
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
            state.read_marks_by_number.setdefault(phone_number_id, []).append(str(body.get("message_id")))
            return JSONResponse({"success": True})
        to = str(body.get("to", ""))
        script = state._next_script(to, phone_number_id)
        if script is not None and script.mode == "error":
            if script.delay_s:
                await asyncio.sleep(script.delay_s)
            return _scripted_error(script)
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
            "biz_opaque_callback_data": body.get("biz_opaque_callback_data"),
            "answer": script.mode if script is not None else "ok",
            "body": body,
            "at": time.time(),
        }
        state.sent.append(record)
        if script is not None and script.delay_s:
            await asyncio.sleep(script.delay_s)
        if script is not None and script.mode in ("accept_then_500", "accept_then_hang"):
            text = script.body if isinstance(script.body, str) else "upstream connection lost"
            return PlainTextResponse(text, status_code=script.http_status, headers=script.headers)
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
