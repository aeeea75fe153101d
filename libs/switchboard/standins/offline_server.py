"""An offline, OpenAI-compatible model server: the demo model of ``make run`` and the tests' fake provider.

LiteLLM reaches it like any OpenAI-compatible endpoint (``model="openai/<name>"``,
``api_base="http://127.0.0.1:PORT/v1"``), so retries, fallbacks, cooldowns and timeouts run through
LiteLLM's real HTTP path. Endpoints (OpenAI API shapes):

* ``POST /v1/chat/completions``: text or tool calls (non-streaming).
* ``POST /v1/embeddings``: :func:`switchboard.llm.lexical.lexical_embedding`, reported as model
  ``switchboard-lexical-hash-v1`` (feature hashing; not a semantic model).
* ``POST /v1/audio/transcriptions``: deterministic and honest. Uploaded bytes that are UTF-8 text are
  returned as the transcript; a file (e.g. a WAV) containing the marker ``SWITCHBOARD-TRANSCRIPT:``
  returns the text after it (up to a NUL byte or the end); a WAV of pure silence (every sample zero)
  returns no words, as a real model does; anything else returns :data:`UNAVAILABLE_TRANSCRIPT`. It never pretends to understand real audio. Containers listed in
  :attr:`OfflineModelState.transcription_refuses` are refused with ``400 Invalid file format``.
* ``GET /v1/models``.

Two ways to drive it:

1. **Demo mode** (nothing scripted): deterministic behaviour described in :func:`demo_reply`: it
   searches the knowledge base with the customer's words when such a tool is offered and quotes the
   best passage, escalates when the customer asks for a person, otherwise says honestly that it is a
   stand-in. Every answer starts with :data:`OFFLINE_MARKER`.
2. **Scripted** (tests, load tests): per deployment (the request's ``model`` field), queue responses
   (text, tool calls, HTTP 429/500/503, a hang, a context-overflow 400) and set a latency, either
   in-process through :class:`OfflineModelState` or over HTTP via ``/control/...`` (enabled with
   ``enable_control=True``; under ``switchboard run`` with ``MODEL_SERVER_CONTROL=true``, loopback
   only, behind the admin token). Scripted errors carry a status, headers (``Retry-After``) and a
   body; ``empty`` answers a blank completion. The newest ``max_recorded`` (200) chat requests of
   each deployment are recorded for assertions, at most ``max_scripts`` deployments (bounded memory).
"""

from __future__ import annotations

import asyncio
import io
import json
import threading
import time
import uuid
import wave
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from fastapi import APIRouter, Depends, FastAPI, Request, UploadFile
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel, Field

from switchboard import __version__
from switchboard.body_limit import BodyLimitMiddleware
from switchboard.docs_ui import mount_local_docs
from switchboard.llm.config import OFFLINE_DEMO_MODEL
from switchboard.llm.lexical import LEXICAL_MODEL_NAME, lexical_embedding, tokenize
from switchboard.media.sniff import sniff_mime
from switchboard.observability import get_logger
from switchboard.observability.metrics import mount_metrics
from switchboard.observability.tracing import instrument_app
from switchboard.standins.offline_demo import OFFLINE_MARKER, SUMMARY_INSTRUCTION_MARKER, demo_reply

__all__ = [
    "ControlRefused",
    "control_refusal",
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
OFFLINE_MAX_BODY_BYTES = 64 * 1024 * 1024
"""Largest request body the offline model server reads (64 MiB: long prompts, embedding batches, audio)."""
DEFAULT_RECORDED_REQUESTS = 200
"""Chat requests each deployment's script remembers (oldest forgotten first): bounded memory."""


class ScriptedResponse(BaseModel):
    """One queued behaviour of a deployment, consumed by one chat request.

    ``kind``: ``text`` (``content``), ``tool_calls`` (``tool_calls``: ``[{"name", "arguments"}]``,
    arguments a dict or a raw string, which may be malformed JSON on purpose), ``error`` (HTTP
    ``status`` 429/500/503..., with ``headers`` such as ``{"Retry-After": "47"}`` and ``body``
    replacing the OpenAI error JSON), ``overflow`` (400 ``context_length_exceeded`` stating
    ``context_limit_tokens``), ``hang`` (no answer until ``HANG_MAX_S``), ``empty`` (a 200 completion
    whose content is ``content`` or ``""``: a provider's empty or whitespace answer), ``demo`` (the
    demo behaviour for this request).
    """

    kind: Literal["text", "tool_calls", "error", "overflow", "hang", "empty", "demo"] = "text"
    content: str | None = None
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    status: int = 500
    headers: dict[str, str] = Field(default_factory=dict)
    """Extra response headers (``Retry-After``, ``x-ratelimit-*``), for every kind."""
    body: dict[str, Any] | str | None = None
    """``error``: the response body instead of ``{"error": {...}}`` (a string is sent as text/plain)."""
    context_limit_tokens: int = Field(8192, gt=0)
    """``overflow``: the context window the error message states."""
    latency_s: float = Field(0.0, ge=0, le=HANG_MAX_S)
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
    max_recorded: int = DEFAULT_RECORDED_REQUESTS
    requests: list[dict[str, Any]] = field(default_factory=list)
    """The newest ``max_recorded`` chat request bodies received, oldest first."""
    authorizations: list[str] = field(default_factory=list)
    """The ``Authorization`` header of each recorded request (tests check per-tenant keys)."""
    received: int = 0
    """Chat requests received in all (recorded or not)."""
    in_flight: int = 0
    max_in_flight: int = 0
    record_requests: bool = True

    def record(self, body: dict[str, Any], authorization: str) -> None:
        """Count a request and, when recording, remember it (bounded by ``max_recorded``)."""
        self.received += 1
        if self.record_requests and self.max_recorded > 0:
            self.requests.append(body)
            self.authorizations.append(authorization)
            if len(self.requests) > self.max_recorded:  # amortised: trim a batch once over the bound
                del self.requests[: -self.max_recorded]
                del self.authorizations[: -self.max_recorded]

    def push(self, *responses: ScriptedResponse) -> None:
        self.queue.extend(responses)


class OfflineModelState:
    """Scripts per deployment name; created by the test or the app factory and shared with the app."""

    def __init__(self, *, max_recorded: int = DEFAULT_RECORDED_REQUESTS, max_scripts: int = 1000) -> None:
        self._scripts: dict[str, DeploymentScript] = {}
        self.max_recorded = max_recorded
        """Requests remembered per deployment (0: none)."""
        self.max_scripts = max_scripts
        """Deployments remembered; the oldest script is forgotten past it (bounded memory)."""
        self.release_hangs = threading.Event()
        """Set it to end every pending and future scripted hang (the server may run in another thread)."""
        self.transcription_refuses: set[str] = set()
        """MIME types (sniffed from the uploaded bytes, :func:`switchboard.media.sniff_mime`) the
        transcription endpoint refuses with ``400 Invalid file format``, as a provider does for a
        container it does not take (``{"audio/webm"}``)."""
        self.transcriptions: deque[dict[str, Any]] = deque(maxlen=max(1, max_recorded))
        """The newest transcription uploads: ``{"filename", "content_type", "sniffed", "size_bytes",
        "refused"}``."""

    def script(self, model: str) -> DeploymentScript:
        """The script of deployment ``model`` (created on first use)."""
        script = self._scripts.get(model)
        if script is None:
            while len(self._scripts) >= self.max_scripts:
                self._scripts.pop(next(iter(self._scripts)))
            script = self._scripts[model] = DeploymentScript(max_recorded=self.max_recorded)
        return script

    def names(self) -> list[str]:
        return sorted(self._scripts)

    def forget(self, model: str) -> None:
        self._scripts.pop(model, None)

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


def _error(
    status: int, message: str, err_type: str, code: str | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(
        {"error": {"message": message, "type": err_type, "param": None, "code": code}},
        status_code=status,
        headers=headers or None,
    )


def overflow_message(limit_tokens: int, sent_tokens: int) -> str:
    """OpenAI's wording of a context-length 400 (what :func:`switchboard.llm.trimming.stated_context_limit` parses)."""
    return (
        f"This model's maximum context length is {limit_tokens} tokens. However, your messages resulted "
        f"in {sent_tokens} tokens. Please reduce the length of the messages."
    )


# --- HTTP app ------------------------------------------------------------------------------------


class ScriptBody(BaseModel):
    """``POST /control/{model}``: replace or extend a deployment's script."""

    responses: list[ScriptedResponse] = Field(default_factory=list)
    latency_s: float | None = None
    default: ScriptedResponse | None = None
    replace: bool = False


def _is_silent_wav(data: bytes) -> bool:
    """Whether ``data`` is a PCM WAV whose every sample is zero (a clip of pure silence)."""
    if not (data.startswith(b"RIFF") and data[8:12] == b"WAVE"):
        return False
    try:
        with wave.open(io.BytesIO(data), "rb") as clip:
            frames = clip.readframes(clip.getnframes())
    except (wave.Error, EOFError):
        return False
    return bool(frames) and not frames.strip(b"\x00")


def _transcript(data: bytes) -> str:
    """What the offline server "hears" in ``data``: the marked text, UTF-8 text, no words for silence,
    else :data:`UNAVAILABLE_TRANSCRIPT`."""
    marker = data.find(TRANSCRIPT_MARKER)
    if marker >= 0:
        tail = data[marker + len(TRANSCRIPT_MARKER) :].split(b"\x00", 1)[0]
        text = tail.decode("utf-8", errors="replace").strip()
        return text or UNAVAILABLE_TRANSCRIPT
    if _is_silent_wav(data):
        return ""  # a real model hears no words in silence
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return UNAVAILABLE_TRANSCRIPT
    printable = sum(ch.isprintable() or ch in "\n\r\t" for ch in text)
    if text.strip() and printable / len(text) > 0.95:
        return text.strip()
    return UNAVAILABLE_TRANSCRIPT


async def _answer(
    state: OfflineModelState,
    script: DeploymentScript,
    scripted: ScriptedResponse | None,
    model: str,
    body: dict[str, Any],
) -> Response:
    messages = body.get("messages") or []
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
        if isinstance(scripted.body, str):
            return PlainTextResponse(scripted.body, status_code=scripted.status)
        if scripted.body is not None:
            return JSONResponse(scripted.body, status_code=scripted.status)
        kind = "rate_limit_error" if scripted.status == 429 else "server_error"
        return _error(scripted.status, f"scripted error {scripted.status}", kind)
    if scripted.kind == "overflow":
        sent = _usage(messages, "", None)["prompt_tokens"]
        return _error(
            400,
            overflow_message(scripted.context_limit_tokens, max(sent, scripted.context_limit_tokens + 1)),
            "invalid_request_error",
            "context_length_exceeded",
        )
    if scripted.kind == "empty":
        return JSONResponse(
            _completion_body(
                model, content=scripted.content or "", tool_calls=[], usage=_usage(messages, "", scripted)
            )
        )
    content = scripted.content
    body = _completion_body(
        model,
        content=content,
        tool_calls=scripted.tool_calls if scripted.kind == "tool_calls" else [],
        usage=_usage(messages, content or "", scripted),
    )
    # ASCII-escaped like OpenAI's API, so a scripted lone surrogate arrives as "\ud83d" (it cannot be
    # encoded as UTF-8), the way a real model's broken output does
    return Response(json.dumps(body), media_type="application/json")


class ControlRefused(RuntimeError):
    """``MODEL_SERVER_CONTROL`` was asked for where it must not run (see :func:`control_refusal`)."""


_LOOPBACK_BINDS = frozenset({"127.0.0.1", "::1", "localhost"})


def control_refusal(*, host: str, has_provider_key: bool) -> str | None:
    """Why the control endpoints must stay off, or ``None`` when they may be enabled.

    They script what "the model" answers, so they are a test hook only: never next to a real
    provider key (a deployment could be pointed at the scripted server) and never on a non-loopback
    interface (anyone on the network could script answers).
    """
    if has_provider_key:
        return (
            "MODEL_SERVER_CONTROL is refused while a provider key (OPENAI_API_KEY / ANTHROPIC_API_KEY) is set"
        )
    if host not in _LOOPBACK_BINDS:
        return (
            f"MODEL_SERVER_CONTROL is refused on HOST={host!r}: the control endpoints listen on loopback only"
        )
    return None


def create_offline_app(
    state: OfflineModelState | None = None, *, enable_control: bool = False, control_token: str | None = None
) -> FastAPI:
    """The offline model server as an ASGI app.

    Args:
        state: scripts shared with the caller (tests keep a reference); a new one when ``None``.
        enable_control: expose ``/control/...`` for scripting over HTTP (tests, load tests, and
            ``switchboard run`` with ``MODEL_SERVER_CONTROL=true``).
        control_token: when set, control requests need ``Authorization: Bearer <control_token>``
            (the service passes the admin token); they are answered to loopback clients only either way.
    """
    state = state or OfflineModelState()
    log = get_logger(__name__)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        log.info("model_server_started", version=__version__, control=enable_control)
        yield
        log.info("model_server_stopped")

    app = FastAPI(
        title="switchboard-model-server",
        description="Offline OpenAI-compatible model server (demo stand-in and test fake).",
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    # prompts, embedding batches and audio: bigger than the services' JSON default, bounded all the same
    app.add_middleware(BodyLimitMiddleware, default_bytes=OFFLINE_MAX_BODY_BYTES)
    mount_local_docs(app)  # /docs from the vendored Swagger UI
    app.state.offline = state

    @app.middleware("http")
    async def log_request(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        started = time.perf_counter()
        response = await call_next(request)
        log.debug(
            "model_server_request",
            method=request.method,
            path=request.url.path,
            status=response.status_code,
            duration_ms=round((time.perf_counter() - started) * 1000, 2),
        )
        return response

    v1 = APIRouter(prefix="/v1", tags=["openai-compatible"])

    @v1.post("/chat/completions", summary="Chat completion (text or tool calls), OpenAI shape")
    async def chat_completions(request: Request) -> Response:
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return _error(400, "request body is not JSON", "invalid_request_error")
        model = str(body.get("model") or OFFLINE_DEMO_MODEL)
        script = state.script(model)
        script.record(body, request.headers.get("authorization", ""))
        scripted = script.queue.popleft() if script.queue else script.default
        script.in_flight += 1
        script.max_in_flight = max(script.max_in_flight, script.in_flight)
        try:
            response = await _answer(state, script, scripted, model, body)
            if scripted is not None and scripted.headers:
                response.headers.update(scripted.headers)
            return response
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
        sniffed = sniff_mime(data, kind="audio")
        refused = sniffed in state.transcription_refuses
        state.transcriptions.append(
            {
                "filename": getattr(upload, "filename", None),
                "content_type": getattr(upload, "content_type", None),
                "sniffed": sniffed,
                "size_bytes": len(data),
                "refused": refused,
            }
        )
        if refused:  # the words OpenAI's API answers with
            return _error(
                400,
                "Invalid file format. Supported formats: ['flac', 'm4a', 'mp3', 'mp4', 'mpeg', 'mpga', 'oga', 'ogg', 'wav']",
                "invalid_request_error",
            )
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

    mount_metrics(app)
    instrument_app(app)

    if enable_control:
        from switchboard.standins.faults import require_control_access

        def _guard(request: Request) -> None:
            require_control_access(request, control_token)

        control = APIRouter(prefix="/control", tags=["control"], dependencies=[Depends(_guard)])

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

        @control.get("/{model}", summary="Requests one deployment received (the newest, bounded)")
        async def get_script(model: str) -> dict[str, Any]:
            script = state.script(model)
            return {
                "model": model,
                "queued": len(script.queue),
                "received": script.received,
                "requests": script.requests,
                "max_in_flight": script.max_in_flight,
            }

        @control.delete("/{model}", summary="Forget one deployment's script and recorded requests")
        async def drop_script(model: str) -> dict[str, Any]:
            state.forget(model)
            return {"model": model, "dropped": True}

        app.include_router(control)
    return app
