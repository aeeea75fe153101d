"""Request body size limits, enforced while the body is read (ASGI).

Every HTTP service counts the bytes of each request body as the app pulls them from the server
and answers **413** once they pass the request's limit: with or without ``Content-Length``
(a declared length over the limit is refused before a byte is read; a chunked body when its
running count passes it). Nothing reads past the limit by more than the one piece the server
handed over (uvicorn: what arrived since the last read, some 64-256 KiB), so nothing spools more.

The limit starts at the service's default (``MAX_BODY_BYTES``, 1 MiB: every JSON route). A route
that needs more raises it for its own request, after it checked the caller, with
:func:`allow_body` (in the handler) or :func:`body_allowance` (a dependency listed after the
authentication dependency): a body nobody authenticated is read only up to the default, and an
upload route reads none of it before its caller is known.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException, Request, status
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from switchboard.observability import get_logger

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "SANDBOX_MEDIA_MAX_BYTES",
    "BodyLimitMiddleware",
    "BodyTooLarge",
    "allow_body",
    "body_allowance",
    "limit_body",
]

log = get_logger(__name__)

DEFAULT_MAX_BODY_BYTES = 1024 * 1024
"""A request body's default limit (1 MiB): every JSON route; webhooks and uploads raise their own."""

SANDBOX_MEDIA_MAX_BYTES = 100 * 1024 * 1024
"""Media a provider sandbox's control route stores for a test (100 MiB: Meta's largest document)."""

_SCOPE_KEY = "switchboard.body_budget"


class BodyTooLarge(HTTPException):
    """The request body passed its limit (answered 413 with the limit in plain words)."""

    def __init__(self, limit_bytes: int) -> None:
        super().__init__(
            status.HTTP_413_CONTENT_TOO_LARGE,
            f"The request body is larger than this address accepts ({limit_bytes} bytes).",
        )
        self.limit_bytes = limit_bytes


@dataclass
class _Budget:
    limit_bytes: int
    read_bytes: int = 0
    declared_bytes: int | None = None
    refused: bool = False


def allow_body(request: Request, limit_bytes: int) -> None:
    """Set this request's body limit to ``limit_bytes`` (call it once the caller is authenticated and
    before the body is read). A no-op outside :func:`limit_body` (an app mounted without it)."""
    budget: _Budget | None = request.scope.get(_SCOPE_KEY)
    if budget is not None:
        budget.limit_bytes = limit_bytes


def body_allowance(limit_bytes: Callable[[Any], int]) -> Callable[[Request], Awaitable[None]]:
    """A dependency raising the body limit to ``limit_bytes(settings)`` (the process settings).

    List it after the route's authentication dependency: FastAPI solves dependencies in order, and a
    route whose body it parses itself (no ``File()``/``Form()``/body parameter) reads nothing before.
    """

    async def allow(request: Request) -> None:
        allow_body(request, limit_bytes(request.app.state.settings))

    return allow


async def limit_body(app: ASGIApp, default_bytes: int, scope: Scope, receive: Receive, send: Send) -> None:
    """Serve ``app`` with request bodies limited to ``default_bytes`` (or what a route allowed).

    A body over the limit raises :class:`BodyTooLarge` in the reader (FastAPI and Starlette answer
    that ``HTTPException`` 413 through the app's own handlers); raised past the app before it
    answered, it is answered 413 JSON here.
    """
    if scope["type"] != "http":
        await app(scope, receive, send)
        return
    budget = _Budget(default_bytes, declared_bytes=_declared_length(scope))
    scope[_SCOPE_KEY] = budget

    def refuse() -> BodyTooLarge:
        budget.refused = True
        log.warning(
            "request_body_too_large",
            path=scope.get("path"),
            limit_bytes=budget.limit_bytes,
            read_bytes=budget.read_bytes,
            declared_bytes=budget.declared_bytes,
        )
        return BodyTooLarge(budget.limit_bytes)

    async def counted_receive() -> Message:
        if budget.refused:  # the body was refused: the request is over for whoever still listens
            return {"type": "http.disconnect"}
        if budget.declared_bytes is not None and budget.declared_bytes > budget.limit_bytes:
            raise refuse()
        message = await receive()
        if message["type"] == "http.request":
            budget.read_bytes += len(message.get("body", b""))
            if budget.read_bytes > budget.limit_bytes:
                raise refuse()
        return message

    started = False

    async def tracked_send(message: Message) -> None:
        nonlocal started
        started = started or message["type"] == "http.response.start"
        await send(message)

    try:
        await app(scope, counted_receive, tracked_send)
    except BodyTooLarge as exc:
        if started:
            raise
        await JSONResponse({"detail": exc.detail}, status_code=exc.status_code)(scope, receive, send)


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None


class BodyLimitMiddleware:
    """ASGI middleware form of :func:`limit_body` (``app.add_middleware(BodyLimitMiddleware, ...)``).

    Args:
        app: the wrapped app.
        default_bytes: the body limit of a request whose route allowed no other.
    """

    def __init__(self, app: ASGIApp, *, default_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.app = app
        self.default_bytes = default_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await limit_body(self.app, self.default_bytes, scope, receive, send)
