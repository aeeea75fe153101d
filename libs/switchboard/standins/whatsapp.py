"""A local stand-in for the Graph API's WhatsApp endpoints, for the demo, ``simulate`` and tests.

It records every message sent through it and answers like Meta (``messages[0].id`` wamids, error
bodies ``{"error": {"code", "message", "error_data": {"details"}}}``). Mounted by the WhatsApp
service at ``/_sandbox/graph`` when ``WHATSAPP_SANDBOX_ENABLED`` (default), and pointed to by the
worker when ``WHATSAPP_GRAPH_BASE_URL`` is unset.

Control endpoints (not part of Meta's API; loopback clients only and, when the service passes its
admin token, ``Authorization: Bearer <admin token>``: :func:`switchboard.standins.faults.require_control_access`):

* ``GET /_control/sent?after=N&phone_number_id=P`` lists recorded sends with ``seq > N`` (of the
  business number ``P`` only, when given), and ``last_seq``. An interactive send (buttons, a list, a
  call-to-action URL) is recorded with its ``interactive`` object; one over Meta's limits
  (:func:`switchboard.channels.whatsapp.interactive.limit_problems`) is refused with 131009, as Meta does.
* ``POST /_control/statuses`` ``{"statuses": ["sent", "delivered"], "delay_s": 0.2}``: from now on every
  accepted send gets those status callbacks ``delay_s`` after it was recorded, posted signed to the
  WhatsApp webhook apart from the send's answer, as Meta does (``{"statuses": []}``, the default: none).
* ``GET /_control/read?phone_number_id=P`` lists the message ids number ``P`` marked read, in order.
* ``POST /_control/failures`` scripts faults (:class:`switchboard.standins.faults.FaultSpec`), nothing
  by default:

  - ``{"operation": "send", "to" | "phone_number_id", "times": 1, "after": 0, "mode", "code",
    "http_status", "headers", "body", "delay_s", "statuses"}``: after ``after`` untouched sends,
    the next ``times`` sends to ``to`` (or from the number ``phone_number_id``) get the fault.
    Modes (:data:`switchboard.standins.faults.FaultMode`): ``error`` (default; not recorded; Meta's
    error body for ``code`` or ``body``, with ``http_status`` and ``headers`` such as
    ``{"Retry-After": "7"}``), ``accept_then_500`` (recorded, then a non-Graph 500),
    ``accept_then_hang`` (recorded, the answer waits ``delay_s``), ``delay`` (recorded, answered
    after ``delay_s``), ``status_first`` (recorded, then the ``statuses`` callbacks, default
    ``sent`` and ``delivered``, are posted signed to the WhatsApp webhook *before* the answer; needs
    the service's status sender). Scripts for ``to`` are used before scripts for the number.
  - ``{"operation": "media", "media_id": ID | "*", "times": N, "code", "http_status"}``: the next
    ``N`` lookups of that media id (its URL and its bytes) fail with Meta's error.
* ``DELETE /_control/failures?to=&phone_number_id=&media_id=`` drops scripts that were not used.
* ``PUT /_control/media/{id}`` stores bytes served by the media endpoints; ``POST
  /{version}/{phone_number_id}/media`` (multipart, as Meta) stores an upload and answers its ``id``.
* ``POST /_control/tokens`` ``{"token": T, "code": 190}``: calls made with token ``T`` are refused with
  Meta's error ``code`` (190 invalid token, 10 or 200 permission missing; ``null``: accepted again).

Message templates, as Meta lists them (:mod:`switchboard.channels.whatsapp.templates`):

* ``GET /{version}/{waba_id}/message_templates?limit=&after=``: the account's templates
  (:data:`DEFAULT_TEMPLATES` unless set), pages of ``limit`` with ``paging.cursors.after`` and ``next``.
* ``PUT /_control/templates/{waba_id}`` ``{"data": [...]}``: the templates that account lists from now on.
* A template send of a name some account lists must name one of its languages (else Meta's 132001)
  and give as many body values as it has placeholders (else 132000); other names are accepted.

Connect checks, as Meta answers them (:mod:`switchboard.channels.meta_connect`):

* ``GET /{version}/{phone_number_id}?fields=...`` (any ``fields``): the number's ``verified_name``,
  ``display_phone_number`` and ``quality_rating`` (``GREEN``).
* ``POST /{version}/{waba_id}/subscribed_apps?override_callback_uri=&verify_token=``: does the callback
  handshake first, as Meta does (``GET`` with ``hub.mode=subscribe``, the verify token and a challenge,
  through the service's :data:`Handshaker` to its own ``/webhooks/whatsapp``); a wrong answer is
  Meta's error 2200, else ``{"success": true}`` and the subscription is kept in ``subscriptions``.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import httpx
from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from switchboard.body_limit import SANDBOX_MEDIA_MAX_BYTES, allow_body
from switchboard.channels.meta import SIGNATURE_HEADER, sign_body
from switchboard.observability import get_logger
from switchboard.standins.faults import Fault, FaultScript, FaultSpec, require_control_access

if TYPE_CHECKING:
    from switchboard.settings import Settings

__all__ = [
    "GraphSandbox",
    "AutoStatuses",
    "ScriptedAnswer",
    "StatusSender",
    "Handshaker",
    "sandbox_handshaker",
    "sandbox_router",
    "sandbox_status_sender",
    "status_webhook",
]

log = get_logger(__name__)

Handshaker = Callable[[str, str, str], Awaitable[tuple[int, str]]]
"""``(callback_url, verify_token, challenge) -> (HTTP status, body)`` of the webhook handshake Meta makes
when an app subscribes with a callback; the service builds it (:func:`sandbox_handshaker`)."""

StatusSender = Callable[[dict[str, Any]], Awaitable[None]]
"""Delivers a status webhook body (Meta's shape) to the WhatsApp webhook, signed; the service builds it."""

_ERROR_TEXT = {
    131047: "Re-engagement message",
    131026: "Message undeliverable",
    130429: "Rate limit hit",
    131000: "Something went wrong",
}
DEFAULT_TEMPLATES: tuple[dict[str, Any], ...] = (
    {
        "id": "900000000000001",
        "name": "hello_world",
        "language": "en_US",
        "status": "APPROVED",
        "category": "UTILITY",
        "parameter_format": "POSITIONAL",
        "components": [
            {"type": "HEADER", "format": "TEXT", "text": "Hello World"},
            {"type": "BODY", "text": "Welcome and congratulations!! This message is a template."},
            {"type": "FOOTER", "text": "WhatsApp Business Platform sample message"},
        ],
    },
    {
        "id": "900000000000002",
        "name": "order_update",
        "language": "en_US",
        "status": "APPROVED",
        "category": "UTILITY",
        "parameter_format": "POSITIONAL",
        "components": [
            {"type": "BODY", "text": "Hi {{1}}, your order {{2}} is {{3}}."},
            {
                "type": "BUTTONS",
                "buttons": [
                    {"type": "URL", "text": "Track it", "url": "https://shop.example.com/track/{{1}}"}
                ],
            },
        ],
    },
    {
        "id": "900000000000003",
        "name": "order_update",
        "language": "es",
        "status": "APPROVED",
        "category": "UTILITY",
        "parameter_format": "POSITIONAL",
        "components": [
            {"type": "BODY", "text": "Hola {{1}}, su pedido {{2}} está {{3}}."},
            {
                "type": "BUTTONS",
                "buttons": [
                    {"type": "URL", "text": "Seguirlo", "url": "https://shop.example.com/track/{{1}}"}
                ],
            },
        ],
    },
    {
        "id": "900000000000004",
        "name": "shipping_label",
        "language": "en_US",
        "status": "APPROVED",
        "category": "UTILITY",
        "parameter_format": "NAMED",
        "components": [
            {"type": "HEADER", "format": "DOCUMENT"},
            {"type": "BODY", "text": "Here is the shipping label of order {{order_id}}, {{name}}."},
        ],
    },
    {
        "id": "900000000000005",
        "name": "spring_sale",
        "language": "en_US",
        "status": "PENDING",
        "category": "MARKETING",
        "parameter_format": "POSITIONAL",
        "components": [{"type": "BODY", "text": "Spring sale: {{1}} off everything this week."}],
    },
)
"""What every business account lists until ``PUT /_control/templates/{waba_id}`` says otherwise."""

ScriptedAnswer = Fault
"""What the sandbox does with one scripted call (the channel-neutral :class:`~switchboard.standins.faults.Fault`)."""


@dataclass
class GraphSandbox:
    """In-memory state of the sandbox: recorded sends, scripted answers and media blobs."""

    sent: list[dict[str, Any]] = field(default_factory=list)
    read_marks: list[str] = field(default_factory=list)
    """Ids of the messages marked read, in order (every number)."""
    read_marks_by_number: dict[str, list[str]] = field(default_factory=dict)
    """The same, per business number (``phone_number_id``)."""
    faults: FaultScript = field(default_factory=FaultScript)
    """Scripted faults: ``("send", "to:<recipient>")``, ``("send", "from:<phone_number_id>")``,
    ``("media", "<media id>")``."""
    media: dict[str, tuple[bytes, str]] = field(default_factory=dict)
    auto_statuses: tuple[str, ...] = ()
    """Status callbacks posted for every accepted send, as Meta posts ``sent``/``delivered`` on its own
    (none by default; ``POST /_control/statuses``), whatever the send's answer (a delayed or lost answer
    too): what lets a row left ``sending`` by a killed worker be reconciled instead of sent twice."""
    auto_status_delay_s: float = 0.2
    token_errors: dict[str, int] = field(default_factory=dict)
    """Tokens whose calls are refused, and with which Graph error code (``POST /_control/tokens``)."""
    subscriptions: dict[str, dict[str, str]] = field(default_factory=dict)
    """WhatsApp Business Account id → its app subscription (``callback_url``, ``verify_token``)."""
    templates: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """WhatsApp Business Account id → the templates it lists (else :data:`DEFAULT_TEMPLATES`)."""

    def templates_of(self, waba_id: str) -> list[dict[str, Any]]:
        """The templates account ``waba_id`` lists."""
        return self.templates.get(waba_id, [dict(t) for t in DEFAULT_TEMPLATES])

    def template_problem(self, template: dict[str, Any]) -> tuple[int, str] | None:
        """Meta's error for a template send that names no listed template or fills it wrongly."""
        import re

        name = str(template.get("name") or "")
        language = str((template.get("language") or {}).get("code") or "")
        known = [t for ts in [*self.templates.values(), list(DEFAULT_TEMPLATES)] for t in ts]
        same_name = [t for t in known if t.get("name") == name]
        found = next((t for t in same_name if t.get("language") == language), None)
        if found is None:  # a name no account lists (a tenant's own, e.g. the agent template) is taken
            return (132001, "Template name does not exist in the translation") if same_name else None
        body: dict[str, Any] = next((c for c in found.get("components") or [] if c.get("type") == "BODY"), {})
        wanted = len(set(re.findall(r"\{\{\s*(\w+)\s*\}\}", str(body.get("text") or ""))))
        given = sum(
            len(c.get("parameters") or [])
            for c in template.get("components") or []
            if c.get("type") == "body"
        )
        if wanted != given:
            return 132000, "Number of parameters does not match the expected number of params"
        return None

    _seq: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _callbacks: set[asyncio.Task[None]] = field(default_factory=set)

    def sent_by(self, phone_number_id: str) -> list[dict[str, Any]]:
        """Recorded sends from one business number, in order."""
        return [m for m in self.sent if m["phone_number_id"] == phone_number_id]

    def read_marks_of(self, phone_number_id: str) -> list[str]:
        """Ids of the messages one business number marked read, in order."""
        return list(self.read_marks_by_number.get(phone_number_id, []))

    def script(
        self,
        answer: Fault,
        *,
        to: str | None = None,
        phone_number_id: str | None = None,
        times: int = 1,
        after: int = 0,
    ) -> int:
        """Queue ``answer`` for the next ``times`` sends (after ``after`` untouched ones) to ``to`` or
        from ``phone_number_id``.

        Returns:
            How many entries that queue holds now.

        Raises:
            ValueError: neither or both of ``to`` and ``phone_number_id`` given.
        """
        if (to is None) == (phone_number_id is None):
            raise ValueError("script sends to one recipient (to) or from one number (phone_number_id)")
        key = f"to:{to}" if to is not None else f"from:{phone_number_id}"
        return self.faults.add("send", key, answer, times=times, after=after)

    def script_media(self, answer: Fault, *, media_id: str = "*", times: int = 1, after: int = 0) -> int:
        """Make the next ``times`` lookups of ``media_id`` (``"*"``: any) fail with ``answer``."""
        return self.faults.add("media", media_id, answer, times=times, after=after)

    def _next_script(self, to: str, phone_number_id: str) -> Fault | None:
        return self.faults.next("send", f"to:{to}", f"from:{phone_number_id}")


class AutoStatuses(BaseModel):
    """Body of ``POST /_control/statuses``: the callbacks every accepted send gets (``[]``: none)."""

    model_config = ConfigDict(extra="forbid")

    statuses: list[Literal["sent", "delivered", "read"]] = Field(default_factory=list, max_length=3)
    delay_s: float = Field(0.2, ge=0, le=60)


class TemplateList(BaseModel):
    """Body of ``PUT /_control/templates/{waba_id}``: Meta's template objects."""

    model_config = ConfigDict(extra="forbid")

    data: list[dict[str, Any]] = Field(default_factory=list, max_length=1000)


def status_webhook(record: dict[str, Any], status: str) -> dict[str, Any]:
    """A status webhook body for one recorded send (the shape of ``status_sent.json``), timestamped now."""
    item: dict[str, Any] = {
        "id": record["id"],
        "status": status,
        "timestamp": str(int(time.time())),
        "recipient_id": record["to"],
    }
    if record.get("biz_opaque_callback_data"):
        item["biz_opaque_callback_data"] = record["biz_opaque_callback_data"]
    return {
        "object": "whatsapp_business_account",
        "entry": [
            {
                "id": "102000000000001",
                "changes": [
                    {
                        "value": {
                            "messaging_product": "whatsapp",
                            "metadata": {
                                "display_phone_number": "15550100001",
                                "phone_number_id": record["phone_number_id"],
                            },
                            "statuses": [item],
                        },
                        "field": "messages",
                    }
                ],
            }
        ],
    }


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


def _graph_error(code: int, http_status: int, message: str) -> JSONResponse:
    """Meta's error body for a token, permission or webhook refusal (no WhatsApp ``error_data``)."""
    return JSONResponse(
        {"error": {"message": message, "type": "OAuthException", "code": code, "fbtrace_id": "SANDBOX"}},
        status_code=http_status,
    )


def _scripted_error(answer: ScriptedAnswer) -> Response:
    if answer.body is None:
        return _error(answer.code, answer.http_status, answer.headers)
    if isinstance(answer.body, str):
        return PlainTextResponse(answer.body, status_code=answer.http_status, headers=answer.headers)
    return JSONResponse(answer.body, status_code=answer.http_status, headers=answer.headers)


def sandbox_router(
    sandbox: GraphSandbox | None = None,
    *,
    admin_token: str | None = None,
    status_sender: StatusSender | None = None,
    handshaker: Handshaker | None = None,
) -> APIRouter:
    """Router to mount at ``/_sandbox/graph``.

    Args:
        sandbox: the state (a new one by default; tests keep a reference).
        admin_token: when set, control endpoints also need ``Authorization: Bearer <admin_token>``.
        status_sender: delivers ``status_first`` callbacks; without one that mode answers 422.
        handshaker: makes the callback handshake of ``subscribed_apps``; without one the callback is
            taken as verified.
    """
    state = sandbox or GraphSandbox()

    def _require_loopback(request: Request) -> None:
        require_control_access(request, admin_token)

    router = APIRouter(prefix="/_sandbox/graph", tags=["sandbox"], include_in_schema=False)
    router.sandbox = state  # type: ignore[attr-defined]

    @router.get("/_control/sent")
    async def list_sent(
        request: Request, after: int = 0, phone_number_id: str | None = None
    ) -> dict[str, Any]:
        _require_loopback(request)
        messages = state.sent if phone_number_id is None else state.sent_by(phone_number_id)
        return {"messages": [m for m in messages if m["seq"] > after], "last_seq": len(state.sent)}

    async def _post_statuses(record: dict[str, Any], statuses: tuple[str, ...], delay_s: float) -> None:
        assert status_sender is not None
        await asyncio.sleep(delay_s)  # Meta's callbacks come apart from (and often before) the answer
        for status in statuses:
            try:
                await status_sender(status_webhook(record, status))
            except Exception as exc:  # noqa: BLE001 (the send stands; the log says the callback failed)
                log.warning("sandbox_status_callback_failed", status=status, error=type(exc).__name__)

    @router.post("/_control/statuses")
    async def set_auto_statuses(request: Request, body: AutoStatuses) -> dict[str, Any]:
        _require_loopback(request)
        if body.statuses and status_sender is None:
            raise HTTPException(status_code=422, detail="status callbacks need the service's status sender")
        state.auto_statuses, state.auto_status_delay_s = tuple(body.statuses), body.delay_s
        return {"statuses": list(state.auto_statuses), "delay_s": state.auto_status_delay_s}

    @router.get("/_control/read")
    async def list_read(request: Request, phone_number_id: str) -> dict[str, Any]:
        _require_loopback(request)
        return {"message_ids": state.read_marks_of(phone_number_id)}

    @router.post("/_control/failures")
    async def add_failure(request: Request) -> dict[str, Any]:
        _require_loopback(request)
        try:
            spec = FaultSpec.model_validate(await request.json())
        except ValidationError as exc:
            raise HTTPException(status_code=422, detail=exc.errors(include_url=False)) from None
        if spec.mode == "status_first" and status_sender is None:
            raise HTTPException(status_code=422, detail="status_first needs the service's status sender")
        try:
            if spec.operation == "media":
                if spec.media_id is None:
                    raise ValueError("a media fault names media_id (or '*')")
                queued = state.script_media(
                    spec.fault(), media_id=spec.media_id, times=spec.times, after=spec.after
                )
            elif spec.operation == "send":
                queued = state.script(
                    spec.fault(),
                    to=spec.to,
                    phone_number_id=spec.phone_number_id,
                    times=spec.times,
                    after=spec.after,
                )
            else:
                raise ValueError(f"unknown operation {spec.operation!r} (send, media)")
        except ValueError as exc:
            raise HTTPException(status_code=422, detail=str(exc)) from None
        return {"queued": queued}

    @router.delete("/_control/failures")
    async def clear_failures(
        request: Request,
        to: str | None = None,
        phone_number_id: str | None = None,
        media_id: str | None = None,
    ) -> dict[str, Any]:
        _require_loopback(request)
        dropped = state.faults.clear("send", f"to:{to}") if to else 0
        dropped += state.faults.clear("send", f"from:{phone_number_id}") if phone_number_id else 0
        dropped += state.faults.clear("media", media_id) if media_id else 0
        return {"dropped": dropped}

    @router.put("/_control/media/{media_id}")
    async def put_media(media_id: str, request: Request) -> dict[str, Any]:
        _require_loopback(request)
        allow_body(request, SANDBOX_MEDIA_MAX_BYTES)
        state.media[media_id] = (
            await request.body(),
            request.headers.get("content-type", "application/octet-stream"),
        )
        return {"stored": media_id}

    def _media_fault(media_id: str) -> Response | None:
        fault = state.faults.next("media", media_id)
        if fault is None:
            return None
        return _scripted_error(fault)

    @router.get("/_media/{media_id}")
    async def media_bytes(media_id: str, request: Request) -> Response:
        if not request.headers.get("authorization", "").startswith("Bearer "):
            return Response("<html>login required</html>", status_code=401, media_type="text/html")
        if (failed := _media_fault(media_id)) is not None:
            return failed
        blob = state.media.get(media_id)
        if blob is None:
            return _error(131052, 404)
        return Response(blob[0], media_type=blob[1])

    @router.post("/{version}/{phone_number_id}/media")
    async def upload_media(version: str, phone_number_id: str, request: Request) -> Response:
        if (refused := _token_refused(request)) is not None:
            return refused
        allow_body(request, SANDBOX_MEDIA_MAX_BYTES)
        form = await request.form()
        upload = form.get("file")
        if form.get("messaging_product") != "whatsapp" or upload is None or isinstance(upload, str):
            return _graph_error(100, 400, "(#100) The parameter messaging_product and a file are required")
        media_id = str(int(hashlib.sha256(str(time.time_ns()).encode()).hexdigest(), 16))[:16]
        state.media[media_id] = (await upload.read(), str(form.get("type") or upload.content_type or ""))
        return JSONResponse({"id": media_id})

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
        if body.get("type") == "template":
            problem = state.template_problem(body.get("template") or {})
            if problem is not None:
                return JSONResponse(
                    {
                        "error": {
                            "message": f"(#{problem[0]}) {problem[1]}",
                            "type": "OAuthException",
                            "code": problem[0],
                            "error_data": {"messaging_product": "whatsapp", "details": problem[1]},
                            "fbtrace_id": "SANDBOX",
                        }
                    },
                    status_code=400,
                )
        if body.get("type") == "interactive":
            from switchboard.channels.whatsapp.interactive import limit_problems

            problems = limit_problems(body.get("interactive") or {})
            if problems:  # Meta: 131009 "Parameter value is not valid"
                return JSONResponse(
                    {
                        "error": {
                            "message": "(#131009) Parameter value is not valid: " + "; ".join(problems),
                            "type": "OAuthException",
                            "code": 131009,
                            "fbtrace_id": "SANDBOX",
                        }
                    },
                    status_code=400,
                )
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
            "interactive": body.get("interactive") if kind == "interactive" else None,
            "template": body.get("template") if kind == "template" else None,
            "biz_opaque_callback_data": body.get("biz_opaque_callback_data"),
            "answer": script.mode if script is not None else "ok",
            "body": body,
            "at": time.time(),
        }
        state.sent.append(record)
        if state.auto_statuses and status_sender is not None:
            task = asyncio.create_task(_post_statuses(record, state.auto_statuses, state.auto_status_delay_s))
            state._callbacks.add(task)  # held until done: a detached task may be collected mid-run
            task.add_done_callback(state._callbacks.discard)
        if script is not None and script.mode == "status_first" and status_sender is not None:
            for status in script.statuses:  # delivered before the send's own answer (a real race)
                try:
                    await status_sender(status_webhook(record, status))
                except Exception as exc:  # the sandbox still answers the send; the test sees the log
                    log.warning("sandbox_status_callback_failed", status=status, error=type(exc).__name__)
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

    class TokenFault(BaseModel):
        model_config = ConfigDict(extra="forbid")
        token: str = Field(min_length=1, max_length=4000)
        code: Literal[190, 10, 200] | None = None

    @router.post("/_control/tokens")
    async def set_token_fault(request: Request, body: TokenFault) -> dict[str, Any]:
        _require_loopback(request)
        if body.code is None:
            state.token_errors.pop(body.token, None)
        else:
            state.token_errors[body.token] = body.code
        return {"token_errors": len(state.token_errors)}

    def _token_refused(request: Request) -> Response | None:
        header = request.headers.get("authorization", "")
        if not header.startswith("Bearer "):
            return _graph_error(190, 401, "Invalid OAuth access token - Cannot parse access token")
        code = state.token_errors.get(header.removeprefix("Bearer "))
        if code == 190:
            return _graph_error(190, 401, "Error validating access token: Session has expired")
        if code is not None:
            return _graph_error(code, 403, f"(#{code}) Application does not have permission for this action")
        return None

    @router.put("/_control/templates/{waba_id}")
    async def set_templates(waba_id: str, request: Request) -> dict[str, Any]:
        _require_loopback(request)
        try:
            body = TemplateList.model_validate(await request.json())
        except (ValidationError, ValueError) as exc:
            raise HTTPException(status_code=422, detail=str(exc)[:500]) from None
        state.templates[waba_id] = list(body.data)
        return {"templates": len(body.data)}

    @router.get("/{version}/{waba_id}/message_templates")
    async def list_templates(waba_id: str, version: str, request: Request) -> Response:
        if (refused := _token_refused(request)) is not None:
            return refused
        try:
            limit = max(1, min(int(request.query_params.get("limit") or 25), 100))
            start = int(request.query_params.get("after") or 0)
        except ValueError:
            return _graph_error(100, 400, "(#100) Invalid parameter")
        items = state.templates_of(waba_id)
        page = items[start : start + limit]
        paging: dict[str, Any] = {"cursors": {"before": str(start), "after": str(start + len(page))}}
        if start + limit < len(items):
            paging["next"] = f"{str(request.url).split('?')[0]}?limit={limit}&after={start + limit}"
        return JSONResponse({"data": page, "paging": paging})

    @router.post("/{version}/{waba_id}/subscribed_apps")
    async def subscribe_app(version: str, waba_id: str, request: Request) -> Response:
        if (refused := _token_refused(request)) is not None:
            return refused
        callback = request.query_params.get("override_callback_uri") or ""
        verify_token = request.query_params.get("verify_token") or ""
        if callback and handshaker is not None:
            challenge = hashlib.sha256(f"{waba_id}:{time.time_ns()}".encode()).hexdigest()[:16]
            try:
                answered, text = await handshaker(callback, verify_token, challenge)
            except Exception as exc:  # noqa: BLE001 (Meta's answer: the callback did not verify)
                answered, text = 0, type(exc).__name__
            if answered != 200 or text != challenge:
                return _graph_error(
                    2200,
                    400,
                    "(#2200) Callback verification failed with the following errors: "
                    f"HTTP Status Code = {answered}; HTTP Message = {text[:60]}",
                )
        state.subscriptions[waba_id] = {"callback_url": callback, "verify_token": verify_token}
        return JSONResponse({"success": True})

    @router.get("/{version}/{media_id}")
    async def media_url(version: str, media_id: str, request: Request) -> Response:
        if "fields" in request.query_params and media_id not in state.media:  # a phone number lookup
            if (refused := _token_refused(request)) is not None:
                return refused
            return JSONResponse(
                {
                    "verified_name": f"Sandbox {media_id[-4:]}",
                    "display_phone_number": f"+1 555-010-{media_id[-4:]}",
                    "quality_rating": "GREEN",
                    "id": media_id,
                }
            )
        if (failed := _media_fault(media_id)) is not None:
            return failed
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


def sandbox_status_sender(settings: Settings, *, timeout_s: float = 10.0) -> StatusSender:
    """The WhatsApp service's :data:`StatusSender`: POSTs a status body to its own
    ``/webhooks/whatsapp``, signed with the Meta app secret as Meta signs (``X-Hub-Signature-256``)."""
    url = settings.service_url(settings.whatsapp_port) + "/webhooks/whatsapp"

    async def send(body: dict[str, Any]) -> None:
        raw = json.dumps(body, separators=(",", ":")).encode()
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: sign_body(raw, settings.secret("meta_app_secret")),
        }
        async with httpx.AsyncClient(timeout=timeout_s) as client:
            response = await client.post(url, content=raw, headers=headers)
        log.info("sandbox_status_callback", status_code=response.status_code)

    return send


def sandbox_handshaker(settings: Settings, *, timeout_s: float = 10.0) -> Handshaker:
    """The WhatsApp service's :data:`Handshaker`: Meta's handshake GET to its own ``/webhooks/whatsapp``
    (whatever host the callback names: the sandbox never calls out; another path is answered 404)."""
    url = settings.service_url(settings.whatsapp_port) + "/webhooks/whatsapp"

    async def handshake(callback_url: str, verify_token: str, challenge: str) -> tuple[int, str]:
        if not callback_url.rstrip("/").endswith("/webhooks/whatsapp"):
            return 404, "Not Found"
        params = {"hub.mode": "subscribe", "hub.verify_token": verify_token, "hub.challenge": challenge}
        async with httpx.AsyncClient(timeout=timeout_s) as client:
            response = await client.get(url, params=params)
        log.info("sandbox_callback_handshake", status_code=response.status_code)
        return response.status_code, response.text

    return handshake
