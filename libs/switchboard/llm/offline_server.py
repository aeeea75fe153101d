"""An offline, OpenAI-compatible model server: the demo model of ``make run`` and the tests' fake provider.

LiteLLM reaches it like any OpenAI-compatible endpoint (``model="openai/<name>"``,
``api_base="http://127.0.0.1:PORT/v1"``), so retries, fallbacks, cooldowns and timeouts run through
LiteLLM's real HTTP path. Endpoints (OpenAI API shapes):

* ``POST /v1/chat/completions``: text or tool calls (non-streaming).
* ``POST /v1/embeddings``: :func:`switchboard.llm.lexical.lexical_embedding`, reported as model
  ``switchboard-lexical-hash-v1`` (feature hashing; not a semantic model).
* ``POST /v1/audio/transcriptions``: deterministic and honest. Uploaded bytes that are UTF-8 text are
  returned as the transcript; a file (e.g. a WAV) containing the marker ``SWITCHBOARD-TRANSCRIPT:``
  returns the text after it (up to a NUL byte or the end); anything else returns
  :data:`UNAVAILABLE_TRANSCRIPT`. It never pretends to understand real audio.
* ``GET /v1/models``.

Two ways to drive it:

1. **Demo mode** (nothing scripted): deterministic behaviour described in :func:`demo_reply`: it
   searches the knowledge base with the customer's words when such a tool is offered and quotes the
   best passage, escalates when the customer asks for a person, otherwise says honestly that it is a
   stand-in. Every answer starts with :data:`OFFLINE_MARKER`.
2. **Scripted** (tests, load tests): per deployment (the request's ``model`` field), queue responses
   (text, tool calls, HTTP 429/500/503, a hang, a context-overflow 400) and set a latency, either
   in-process through :class:`OfflineModelState` or over HTTP via ``/control/...`` (enabled with
   ``enable_control=True``). Every received chat request is recorded for assertions.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

from fastapi import APIRouter, FastAPI, Request, UploadFile
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from switchboard import __version__
from switchboard.llm.config import OFFLINE_DEMO_MODEL
from switchboard.llm.lexical import LEXICAL_MODEL_NAME, lexical_embedding, tokenize
from switchboard.llm.offline_demo import OFFLINE_MARKER, SUMMARY_INSTRUCTION_MARKER, demo_reply

__all__ = [
    "OFFLINE_MARKER",
    "OFFLINE_DEMO_MODEL",
    "SUMMARY_INSTRUCTION_MARKER",
    "UNAVAILABLE_TRANSCRIPT",
    "TRANSCRIPT_MARKER",
    "ScriptedResponse",
    "DeploymentScript",
    "OfflineModelState",
    "create_offline_app",
    "demo_reply",
]

TRANSCRIPT_MARKER = b"SWITCHBOARD-TRANSCRIPT:"
UNAVAILABLE_TRANSCRIPT = (
    "[offline transcription unavailable: the offline model server cannot transcribe audio; "
    "configure a provider key for real transcription]"
)
CHARS_PER_TOKEN = 4
"""Rough token estimate for ``usage`` (OpenAI's rule of thumb: ~4 characters of English per token)."""
HANG_MAX_S = 600.0
"""A scripted hang ends after this long at the latest (the client times out well before)."""
HANG_POLL_S = 0.05


class ScriptedResponse(BaseModel):
    """One queued behaviour of a deployment, consumed by one chat request.

    ``kind``: ``text`` (``content``), ``tool_calls`` (``tool_calls``: ``[{"name", "arguments"}]``,
    arguments a dict or a raw string, which may be malformed JSON on purpose), ``error`` (HTTP
    ``status`` 429/500/503...), ``overflow`` (400 ``context_length_exceeded``), ``hang`` (no answer
    until ``HANG_MAX_S``), ``demo`` (the demo behaviour for this request).
    """

    kind: Literal["text", "tool_calls", "error", "overflow", "hang", "demo"] = "text"
    content: str | None = None
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    status: int = 500
    latency_s: float = 0.0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


@dataclass
class DeploymentScript:
    """What one deployment (a ``model`` name) will answer, and what it received."""

    queue: deque[ScriptedResponse] = field(default_factory=deque)
    latency_s: float = 0.0
    """Delay before every answer (seconds), added to a response's own ``latency_s``."""
    default: ScriptedResponse | None = None
    """Answer when the queue is empty; ``None`` means the demo behaviour."""
    requests: list[dict[str, Any]] = field(default_factory=list)
    """Every chat request body received, in order."""
    authorizations: list[str] = field(default_factory=list)
    """The ``Authorization`` header of each request (tests check per-tenant keys)."""
    in_flight: int = 0
    max_in_flight: int = 0
    record_requests: bool = True

    def push(self, *responses: ScriptedResponse) -> None:
        self.queue.extend(responses)


class OfflineModelState:
    """Scripts per deployment name; created by the test or the app factory and shared with the app."""

    def __init__(self) -> None:
        self._scripts: dict[str, DeploymentScript] = {}
        self.release_hangs = threading.Event()
        """Set it to end every pending and future scripted hang (the server may run in another thread)."""

    def script(self, model: str) -> DeploymentScript:
        """The script of deployment ``model`` (created on first use)."""
        return self._scripts.setdefault(model, DeploymentScript())

    def names(self) -> list[str]:
        return sorted(self._scripts)

    def reset(self) -> None:
        self._scripts.clear()


def _usage(
    messages: list[dict[str, Any]], completion: str, scripted: ScriptedResponse | None
) -> dict[str, int]:
    prompt_chars = sum(len(json.dumps(m.get("content") or "")) for m in messages)
    prompt = (
        scripted.prompt_tokens if scripted and scripted.prompt_tokens is not None else prompt_chars // 4 + 1
    )
    done = (
        scripted.completion_tokens
        if scripted and scripted.completion_tokens is not None
        else len(completion) // CHARS_PER_TOKEN + 1
    )
    return {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done}


def _completion_body(
    model: str, *, content: str | None, tool_calls: list[dict[str, Any]], usage: dict[str, int]
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    finish = "stop"
    if tool_calls:
        message["tool_calls"] = [
            {
                "id": call.get("id") or f"call_{uuid.uuid4().hex[:16]}",
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": call["arguments"]
                    if isinstance(call.get("arguments"), str)
                    else json.dumps(call.get("arguments") or {}),
                },
            }
            for call in tool_calls
        ]
        finish = "tool_calls"
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    }


def _error(status: int, message: str, err_type: str, code: str | None = None) -> JSONResponse:
    return JSONResponse(
        {"error": {"message": message, "type": err_type, "param": None, "code": code}}, status_code=status
    )


# --- HTTP app ------------------------------------------------------------------------------------


class ScriptBody(BaseModel):
    """``POST /control/{model}``: replace or extend a deployment's script."""

    responses: list[ScriptedResponse] = Field(default_factory=list)
    latency_s: float | None = None
    default: ScriptedResponse | None = None
    replace: bool = False


def _transcript(data: bytes) -> str:
    marker = data.find(TRANSCRIPT_MARKER)
    if marker >= 0:
        tail = data[marker + len(TRANSCRIPT_MARKER) :].split(b"\x00", 1)[0]
        text = tail.decode("utf-8", errors="replace").strip()
        return text or UNAVAILABLE_TRANSCRIPT
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return UNAVAILABLE_TRANSCRIPT
    printable = sum(ch.isprintable() or ch in "\n\r\t" for ch in text)
    if text.strip() and printable / len(text) > 0.95:
        return text.strip()
    return UNAVAILABLE_TRANSCRIPT


def create_offline_app(state: OfflineModelState | None = None, *, enable_control: bool = False) -> FastAPI:
    """The offline model server as an ASGI app.

    Args:
        state: scripts shared with the caller (tests keep a reference); a new one when ``None``.
        enable_control: expose ``/control/...`` for scripting over HTTP (tests, load tests; off in
            ``switchboard run``).
    """
    state = state or OfflineModelState()
    app = FastAPI(
        title="switchboard-model-server",
        description="Offline OpenAI-compatible model server (demo stand-in and test fake).",
    )
    app.state.offline = state
    v1 = APIRouter(prefix="/v1", tags=["openai-compatible"])

    @v1.post("/chat/completions", summary="Chat completion (text or tool calls), OpenAI shape")
    async def chat_completions(request: Request) -> JSONResponse:
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return _error(400, "request body is not JSON", "invalid_request_error")
        model = str(body.get("model") or OFFLINE_DEMO_MODEL)
        messages = body.get("messages") or []
        script = state.script(model)
        if script.record_requests:
            script.requests.append(body)
            script.authorizations.append(request.headers.get("authorization", ""))
        scripted = script.queue.popleft() if script.queue else script.default
        script.in_flight += 1
        script.max_in_flight = max(script.max_in_flight, script.in_flight)
        try:
            delay = script.latency_s + (scripted.latency_s if scripted else 0.0)
            if delay > 0:
                await asyncio.sleep(delay)
            if scripted is None or scripted.kind == "demo":
                answer = demo_reply(messages, body.get("tools"))
                content = answer.get("content")
                return JSONResponse(
                    _completion_body(
                        model,
                        content=content,
                        tool_calls=answer.get("tool_calls", []),
                        usage=_usage(messages, content or "", scripted),
                    )
                )
            if scripted.kind == "hang":
                deadline = time.monotonic() + HANG_MAX_S
                while not state.release_hangs.is_set() and time.monotonic() < deadline:  # noqa: ASYNC110 (set from another thread)
                    await asyncio.sleep(HANG_POLL_S)
                return _error(504, "scripted hang ended", "timeout")
            if scripted.kind == "error":
                kind = "rate_limit_error" if scripted.status == 429 else "server_error"
                return _error(scripted.status, f"scripted error {scripted.status}", kind)
            if scripted.kind == "overflow":
                return _error(
                    400,
                    "This model's maximum context length is 8192 tokens. However, your messages resulted "
                    "in 9000 tokens. Please reduce the length of the messages.",
                    "invalid_request_error",
                    "context_length_exceeded",
                )
            content = scripted.content
            body = _completion_body(
                model,
                content=content,
                tool_calls=scripted.tool_calls if scripted.kind == "tool_calls" else [],
                usage=_usage(messages, content or "", scripted),
            )
            # ASCII-escaped like OpenAI's API, so a scripted lone surrogate arrives as "\ud83d" (it
            # cannot be encoded as UTF-8), the way a real model's broken output does
            return Response(json.dumps(body), media_type="application/json")
        finally:
            script.in_flight -= 1

    @v1.post("/embeddings", summary="Deterministic lexical (feature-hashing) embeddings")
    async def embeddings(request: Request) -> JSONResponse:
        body = await request.json()
        raw = body.get("input")
        inputs = [raw] if isinstance(raw, str) else list(raw or [])
        if not all(isinstance(item, str) for item in inputs):
            return _error(400, "input must be a string or a list of strings", "invalid_request_error")
        dims = int(body.get("dimensions") or 1536)
        data = [
            {"object": "embedding", "index": i, "embedding": lexical_embedding(text, dims)}
            for i, text in enumerate(inputs)
        ]
        tokens = sum(len(tokenize(text)) for text in inputs)
        return JSONResponse(
            {
                "object": "list",
                "data": data,
                "model": LEXICAL_MODEL_NAME,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    @v1.post("/audio/transcriptions", summary="Deterministic transcription (text marker or UTF-8 only)")
    async def transcriptions(request: Request) -> JSONResponse:
        form = await request.form()
        upload = form.get("file")
        if not isinstance(upload, UploadFile) and not hasattr(upload, "read"):
            return _error(400, "multipart field 'file' is required", "invalid_request_error")
        data = await upload.read()  # type: ignore[union-attr]
        return JSONResponse({"text": _transcript(data)})

    @v1.get("/models", summary="Models this server answers for")
    async def models() -> JSONResponse:
        names = sorted({OFFLINE_DEMO_MODEL, LEXICAL_MODEL_NAME, *state.names()})
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {"id": n, "object": "model", "created": 0, "owned_by": "switchboard"} for n in names
                ],
            }
        )

    app.include_router(v1)

    @app.get("/healthz", tags=["health"], summary="Liveness of the model server")
    async def healthz() -> dict[str, str]:
        return {"service": "model_server", "version": __version__, "status": "ok"}

    if enable_control:
        control = APIRouter(prefix="/control", tags=["control"])

        @control.post("/{model}", summary="Queue responses / set latency for one deployment")
        async def set_script(model: str, body: ScriptBody) -> dict[str, Any]:
            script = state.script(model)
            if body.replace:
                script.queue.clear()
            script.push(*body.responses)
            if body.latency_s is not None:
                script.latency_s = body.latency_s
            if body.default is not None:
                script.default = body.default
            return {"model": model, "queued": len(script.queue)}

        @control.get("/{model}", summary="Requests one deployment received")
        async def get_script(model: str) -> dict[str, Any]:
            script = state.script(model)
            return {
                "model": model,
                "queued": len(script.queue),
                "requests": script.requests,
                "max_in_flight": script.max_in_flight,
            }

        app.include_router(control)
    return app
