"""A local stand-in for Instagram's Graph endpoints and its media CDN, for the demo, ``simulate`` and tests.

It records every message sent through it and answers like Meta (``{"recipient_id", "message_id"}``;
errors ``{"error": {"message", "type", "code", "error_subcode", "fbtrace_id"}}``). Mounted by the
Instagram service at ``/_sandbox/instagram`` when ``INSTAGRAM_SANDBOX_ENABLED`` (default) and no
``INSTAGRAM_GRAPH_BASE_URL`` is set; the worker sends to it then.

Meta's side:

* ``POST /{version}/{account_id}/messages``: a message (recorded, answered with a new ``mid``; its
  ``quick_replies`` and a generic ``template`` payload are recorded as such, and one over Meta's
  limits, :func:`switchboard.channels.instagram.replies.limit_problems`, is refused with error 100) or a
  ``sender_action`` (``mark_seen``, ``typing_on``: recorded in ``actions``);
* ``GET /{version}/{igsid}``: a profile put with ``PUT /_control/profiles/{igsid}`` (else error 100);
  asked for ``fields`` with ``account_type`` and not a stored profile, the professional account itself
  (``username`` ``sandbox_<last 4 digits>``), as the console's connect check asks for it;
* ``POST /_control/tokens`` ``{"token": T, "code": 190}``: calls with token ``T`` are refused with
  Meta's error ``code`` (190 invalid token, 10 or 200 permission missing; ``null``: accepted again);
* with ``echo_to`` set (the Instagram service sets its own webhook), every recorded message is echoed
  back as Meta does (``is_echo``, a moment later), so ``make run`` exercises echo matching;
* ``GET /_cdn/{asset}``: bytes put with ``PUT /_control/cdn/{asset}`` (served **without** a content
  type, as Instagram's audio is); ``DELETE /_control/cdn/{asset}`` makes the link die (403 like an
  expired signed URL).

Control endpoints (loopback clients only, 403 otherwise), as in the WhatsApp sandbox:
``GET /_control/sent?after=N&account_id=A``, ``GET /_control/actions?account_id=A``,
``POST /_control/failures`` (``{"to" | "account_id", "times", "mode", "code", "subcode",
"http_status", "headers", "body", "delay_s"}``; modes as
:class:`~switchboard.standins.whatsapp.ScriptedAnswer`), ``DELETE /_control/failures``.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from switchboard.body_limit import SANDBOX_MEDIA_MAX_BYTES, allow_body
from switchboard.channels.meta import post_signed
from switchboard.standins.faults import require_control_access
from switchboard.standins.whatsapp import ScriptedAnswer

__all__ = ["InstagramSandbox", "instagram_sandbox_router"]

_ERRORS: dict[int, tuple[str, int | None]] = {
    10: ("This message is sent outside of allowed window.", 2018278),
    551: ("This person isn't available right now.", 1545041),
    190: ("Error validating access token: Session has expired.", 463),
    4: ("Application request limit reached", None),
    200: ("(#200) Permissions error", None),
    613: ("Calls to this api have exceeded the rate limit.", None),
    100: ("Invalid parameter", None),
    2: ("An unexpected error has occurred. Please retry your request later.", None),
}


@dataclass
class InstagramSandbox:
    """In-memory state: recorded sends and sender actions, scripted answers, profiles, CDN blobs."""

    sent: list[dict[str, Any]] = field(default_factory=list)
    actions: list[dict[str, Any]] = field(default_factory=list)
    failures: dict[str, list[tuple[ScriptedAnswer, int | None]]] = field(default_factory=dict)
    account_failures: dict[str, list[tuple[ScriptedAnswer, int | None]]] = field(default_factory=dict)
    profiles: dict[str, dict[str, Any]] = field(default_factory=dict)
    cdn: dict[str, bytes] = field(default_factory=dict)
    token_errors: dict[str, int] = field(default_factory=dict)
    """Tokens whose calls are refused, and with which Graph error code (``POST /_control/tokens``)."""
    echo_to: tuple[str, str] | None = None
    """``(webhook URL, app secret)``: post Meta's echo of every recorded message there, as Instagram does
    (the Instagram service points it at its own ``/webhooks/instagram``); ``None``: no echoes."""
    _seq: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def sent_by(self, account_id: str) -> list[dict[str, Any]]:
        """Recorded messages from one professional account, in order."""
        return [m for m in self.sent if m["account_id"] == account_id]

    def actions_of(self, account_id: str) -> list[dict[str, Any]]:
        return [a for a in self.actions if a["account_id"] == account_id]

    def script(
        self,
        answer: ScriptedAnswer,
        *,
        to: str | None = None,
        account_id: str | None = None,
        times: int = 1,
        subcode: int | None = None,
    ) -> int:
        """Queue ``answer`` for the next ``times`` sends to ``to`` or from ``account_id``.

        Raises:
            ValueError: neither or both of ``to`` and ``account_id`` given.
        """
        if (to is None) == (account_id is None):
            raise ValueError("script sends to one recipient (to) or from one account (account_id)")
        table = self.failures if to is not None else self.account_failures
        queue = table.setdefault(str(to if to is not None else account_id), [])
        queue.extend([(answer, subcode)] * times)
        return len(queue)

    def _next_script(self, to: str, account_id: str) -> tuple[ScriptedAnswer, int | None] | None:
        for table, key in ((self.failures, to), (self.account_failures, account_id)):
            queue = table.get(key)
            if queue:
                return queue.pop(0)
        return None


def _error(
    code: int, http_status: int, subcode: int | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    text, default_sub = _ERRORS.get(code, ("Error", None))
    error: dict[str, Any] = {"message": text, "type": "OAuthException", "code": code, "fbtrace_id": "SANDBOX"}
    if (subcode or default_sub) is not None:
        error["error_subcode"] = subcode or default_sub
    return JSONResponse({"error": error}, status_code=http_status, headers=headers)


async def _post_echo(
    state: InstagramSandbox, account_id: str, to: str, mid: str, message: dict[str, Any]
) -> None:
    """Meta's ``is_echo`` webhook for a message the account sent (a moment later, as Meta does)."""
    assert state.echo_to is not None
    url, secret = state.echo_to
    await asyncio.sleep(0.2)
    now_ms = int(time.time() * 1000)
    echo: dict[str, Any] = {"mid": mid, "is_echo": True}
    if message.get("text"):
        echo["text"] = message["text"]
    if message.get("attachment"):
        echo["attachments"] = [message["attachment"]]
    body = {
        "object": "instagram",
        "entry": [
            {
                "id": account_id,
                "time": now_ms,
                "messaging": [
                    {
                        "sender": {"id": account_id},
                        "recipient": {"id": to},
                        "timestamp": now_ms,
                        "message": echo,
                    }
                ],
            }
        ],
    }
    raw = json.dumps(body, separators=(",", ":")).encode()
    try:
        async with httpx.AsyncClient(timeout=10) as client:
            await post_signed(client, url, raw, secret)
    except httpx.HTTPError:
        pass  # the sandbox's courtesy: a lost echo is what Meta's own flakiness looks like


def _new_mid(seq: int) -> str:
    raw = f"ig_item:1:IGMessage:sandbox:{seq}:{time.time_ns()}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")  # "aWdf...": base64 of "ig_", like Meta's


def instagram_sandbox_router(
    sandbox: InstagramSandbox | None = None, *, admin_token: str | None = None
) -> APIRouter:
    """Router to mount at ``/_sandbox/instagram`` (state in ``sandbox``, a new one by default).

    Args:
        admin_token: when set, the ``/_control`` endpoints also need ``Authorization: Bearer <admin_token>``
            (they always answer loopback clients only: :func:`~switchboard.standins.faults.require_control_access`).
    """
    state = sandbox or InstagramSandbox()
    router = APIRouter(prefix="/_sandbox/instagram", tags=["sandbox"], include_in_schema=False)
    router.sandbox = state  # type: ignore[attr-defined]

    @router.get("/_control/sent")
    async def list_sent(request: Request, after: int = 0, account_id: str | None = None) -> dict[str, Any]:
        require_control_access(request, admin_token)
        messages = state.sent if account_id is None else state.sent_by(account_id)
        return {"messages": [m for m in messages if m["seq"] > after], "last_seq": len(state.sent)}

    @router.get("/_control/actions")
    async def list_actions(request: Request, account_id: str) -> dict[str, Any]:
        require_control_access(request, admin_token)
        return {"actions": state.actions_of(account_id)}

    @router.post("/_control/failures")
    async def add_failure(request: Request) -> dict[str, Any]:
        require_control_access(request, admin_token)
        spec = await request.json()
        answer = ScriptedAnswer(
            mode=spec.get("mode", "error"),
            code=int(spec.get("code", 2)),
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
                account_id=spec.get("account_id"),
                times=int(spec.get("times", 1)),
                subcode=spec.get("subcode"),
            )
        except ValueError as exc:
            raise HTTPException(status_code=422, detail=str(exc)) from None
        return {"queued": queued}

    @router.delete("/_control/failures")
    async def clear_failures(
        request: Request, to: str | None = None, account_id: str | None = None
    ) -> dict[str, Any]:
        require_control_access(request, admin_token)
        dropped = len(state.failures.pop(to, [])) if to else 0
        dropped += len(state.account_failures.pop(account_id, [])) if account_id else 0
        return {"dropped": dropped}

    @router.put("/_control/profiles/{igsid}")
    async def put_profile(igsid: str, request: Request) -> dict[str, Any]:
        require_control_access(request, admin_token)
        state.profiles[igsid] = await request.json()
        return {"stored": igsid}

    @router.put("/_control/cdn/{asset}")
    async def put_cdn(asset: str, request: Request) -> dict[str, Any]:
        require_control_access(request, admin_token)
        allow_body(request, SANDBOX_MEDIA_MAX_BYTES)
        state.cdn[asset] = await request.body()
        return {
            "stored": asset,
            "url": f"{str(request.base_url).rstrip('/')}/_sandbox/instagram/_cdn/{asset}",
        }

    @router.delete("/_control/cdn/{asset}")
    async def expire_cdn(asset: str, request: Request) -> dict[str, Any]:
        require_control_access(request, admin_token)
        return {"expired": state.cdn.pop(asset, None) is not None}

    @router.get("/_cdn/{asset}")
    async def cdn(asset: str) -> Response:
        blob = state.cdn.get(asset)
        if blob is None:
            return PlainTextResponse("URL signature expired", status_code=403)
        return Response(blob, media_type=None)  # Instagram's audio comes without a type

    @router.post("/{version}/{account_id}/messages")
    async def send(version: str, account_id: str, request: Request) -> Response:
        if not request.headers.get("authorization", "").startswith("Bearer "):
            return _error(190, 401)
        body = await request.json()
        to = str((body.get("recipient") or {}).get("id", ""))
        if body.get("sender_action"):
            state.actions.append({"account_id": account_id, "to": to, "action": body["sender_action"]})
            return JSONResponse({"recipient_id": to})
        scripted = state._next_script(to, account_id)
        script, subcode = scripted if scripted is not None else (None, None)
        if script is not None and script.mode == "error":
            if script.delay_s:
                await asyncio.sleep(script.delay_s)
            if script.body is not None:
                if isinstance(script.body, str):
                    return PlainTextResponse(
                        script.body, status_code=script.http_status, headers=script.headers
                    )
                return JSONResponse(script.body, status_code=script.http_status, headers=script.headers)
            return _error(script.code, script.http_status, subcode, script.headers)
        message = body.get("message") or {}
        from switchboard.channels.instagram.replies import limit_problems

        problems = limit_problems(message)
        if problems:  # Meta refuses a message over its limits ("(#100) param ... must be ...")
            return JSONResponse(
                {
                    "error": {
                        "message": "(#100) " + "; ".join(problems),
                        "type": "OAuthException",
                        "code": 100,
                        "fbtrace_id": "SANDBOX",
                    }
                },
                status_code=400,
            )
        seq = next(state._seq)
        mid = _new_mid(seq)
        attachment = message.get("attachment") or {}
        state.sent.append(
            {
                "seq": seq,
                "id": mid,
                "account_id": account_id,
                "to": to,
                "type": attachment.get("type") or "text",
                "text": message.get("text"),
                "url": (attachment.get("payload") or {}).get("url"),
                "quick_replies": message.get("quick_replies"),
                "tag": body.get("tag"),
                "template": (attachment.get("payload") or {})
                if attachment.get("type") == "template"
                else None,
                "messaging_type": body.get("messaging_type"),
                "answer": script.mode if script is not None else "ok",
                "body": body,
                "at": time.time(),
            }
        )
        if state.echo_to is not None:
            task = asyncio.create_task(_post_echo(state, account_id, to, mid, message))
            state._tasks.add(task)
            task.add_done_callback(state._tasks.discard)
        if script is not None and script.delay_s:
            await asyncio.sleep(script.delay_s)
        if script is not None and script.mode in ("accept_then_500", "accept_then_hang"):
            text = script.body if isinstance(script.body, str) else "upstream connection lost"
            return PlainTextResponse(text, status_code=script.http_status, headers=script.headers)
        return JSONResponse({"recipient_id": to, "message_id": mid})

    @router.post("/_control/tokens")
    async def set_token_fault(request: Request) -> dict[str, Any]:
        require_control_access(request, admin_token)
        spec = await request.json()
        token, code = str(spec.get("token") or ""), spec.get("code")
        if not token or code not in (None, 190, 10, 200):
            raise HTTPException(status_code=422, detail="a token, and code 190, 10, 200 or null")
        if code is None:
            state.token_errors.pop(token, None)
        else:
            state.token_errors[token] = int(code)
        return {"token_errors": len(state.token_errors)}

    @router.get("/{version}/{igsid}")
    async def profile(version: str, igsid: str, request: Request) -> Response:
        if not request.headers.get("authorization", "").startswith("Bearer "):
            return _error(190, 401)
        refused = state.token_errors.get(request.headers["authorization"].removeprefix("Bearer "))
        if refused is not None:
            return _error(refused, 401 if refused == 190 else 403)
        found = state.profiles.get(igsid)
        if found is None and "account_type" in request.query_params.get("fields", ""):
            return JSONResponse(
                {
                    "user_id": igsid,
                    "username": f"sandbox_{igsid[-4:]}",
                    "name": f"Sandbox {igsid[-4:]}",
                    "account_type": "BUSINESS",
                    "id": igsid,
                }
            )
        if found is None:
            return _error(100, 400)
        return JSONResponse({**found, "id": igsid})

    return router
