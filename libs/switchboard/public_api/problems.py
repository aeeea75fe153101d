"""RFC 9457 problem details: the one error shape of the public API (``application/problem+json``).

Every error under ``/api/`` is answered as::

    {"type": "urn:switchboard:problem:<code>", "title": "...", "status": 404, "code": "not_found",
     "detail": "conversation not found"}

``code`` is stable (clients branch on it); ``title`` is the code's fixed words; ``detail`` says what
happened this time; a refused request body adds ``errors`` (``[{"field", "message"}]``). A route
raises :class:`ApiProblem`; FastAPI's own errors (a wrong field: 422 ``invalid_request``, an unknown
path: 404, a wrong method: 405) and any ``HTTPException`` are turned into the same shape by the
handlers :func:`install_problem_errors` adds; an unexpected exception is a 500 ``internal_error``
that says nothing of the internals.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exception_handlers import http_exception_handler, request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse, PlainTextResponse, Response

from switchboard.observability import get_logger

__all__ = [
    "API_PATH_PREFIX",
    "PROBLEM_MEDIA_TYPE",
    "PROBLEM_TITLES",
    "ApiProblem",
    "Problem",
    "install_problem_errors",
    "problem_response",
    "problem_responses",
]

log = get_logger(__name__)

API_PATH_PREFIX = "/api/"
"""Requests under this path get problem answers; the rest of the service keeps its own errors."""
PROBLEM_MEDIA_TYPE = "application/problem+json"

PROBLEM_TITLES: dict[str, str] = {
    "bad_request": "Bad request",
    "invalid_cursor": "Invalid cursor",
    "unauthorized": "Missing or invalid API key",
    "forbidden": "Forbidden",
    "insufficient_scope": "The API key lacks the scope this needs",
    "not_found": "Not found",
    "identity_not_confirmed": "Identity not confirmed",
    "method_not_allowed": "Method not allowed",
    "conflict": "Conflict",
    "body_too_large": "Request body too large",
    "unsupported_media_type": "Unsupported media type",
    "invalid_request": "Invalid request",
    "rate_limited": "Too many requests",
    "internal_error": "Internal error",
    "unavailable": "Service unavailable",
}
"""Every ``code`` the API answers with → its ``title`` (the docs list them; codes never change)."""

_CODE_OF_STATUS = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "body_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "rate_limited",
    500: "internal_error",
    503: "unavailable",
}


class Problem(BaseModel):
    """An error of the public API (RFC 9457)."""

    type: str = Field(description="`urn:switchboard:problem:<code>`")
    title: str = Field(description="The code's fixed words")
    status: int = Field(description="The HTTP status")
    code: str = Field(description="Stable machine-readable error code", examples=["not_found"])
    detail: str = Field(description="What happened this time, in words")
    errors: list[dict[str, str]] | None = Field(
        None, description="For `invalid_request`: each refused field (`field`, `message`)"
    )


class ApiProblem(HTTPException):
    """Raise to answer a problem: ``ApiProblem(404, "not_found", "conversation not found")``.

    ``code`` must be a key of :data:`PROBLEM_TITLES` (a new code is added there first).
    """

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        *,
        headers: dict[str, str] | None = None,
        errors: list[dict[str, str]] | None = None,
    ) -> None:
        if code not in PROBLEM_TITLES:
            raise ValueError(f"unknown problem code {code!r}")
        super().__init__(status, detail, headers=headers)
        self.code = code
        self.errors = errors


def problem_response(
    status: int,
    code: str,
    detail: str,
    *,
    headers: dict[str, str] | None = None,
    errors: list[dict[str, str]] | None = None,
) -> JSONResponse:
    """The ``application/problem+json`` answer of ``code``."""
    body: dict[str, Any] = {
        "type": f"urn:switchboard:problem:{code}",
        "title": PROBLEM_TITLES[code],
        "status": status,
        "code": code,
        "detail": detail,
    }
    if errors is not None:
        body["errors"] = errors
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_MEDIA_TYPE)


_DESCRIPTIONS = {
    400: "Bad request (e.g. `invalid_cursor`)",
    401: "`unauthorized`: no API key, an unknown, revoked or expired one",
    403: "`insufficient_scope`: the key lacks the scope this route needs",
    404: "`not_found`: no such resource in the key's tenant",
    409: "`conflict`: the action cannot be done now (the detail says why)",
    413: "`body_too_large`",
    422: "`invalid_request`: a refused field (see `errors`)",
    429: "`rate_limited`: too many requests for this key; wait `Retry-After` seconds",
}


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` entries documenting problem answers (401, 403, 422, 429 always; plus ``statuses``)."""
    wanted = sorted({401, 403, 422, 429, *statuses})
    return {
        status: {
            "description": _DESCRIPTIONS.get(status, _CODE_OF_STATUS.get(status, "error")),
            "model": Problem,
            "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
        }
        for status in wanted
    }


def _is_api(request: Request) -> bool:
    return request.url.path.startswith(API_PATH_PREFIX)


def _field_errors(exc: RequestValidationError) -> list[dict[str, str]]:
    return [
        {
            "field": ".".join(str(p) for p in error.get("loc", ())[1:]) or "body",
            "message": str(error.get("msg")),
        }
        for error in exc.errors()
    ]


Handler = Callable[[Request, Any], Response | Awaitable[Response]]


async def _answer(handler: Handler, request: Request, exc: Exception) -> Response:
    result = handler(request, exc)
    return await result if inspect.isawaitable(result) else result


def install_problem_errors(app: FastAPI) -> None:
    """Answer every error under ``/api/`` as a problem; other paths keep the handlers installed before
    (call this after the service's own error handlers)."""
    before_http: Handler = app.exception_handlers.get(StarletteHTTPException, http_exception_handler)
    before_invalid: Handler = app.exception_handlers.get(
        RequestValidationError, request_validation_exception_handler
    )

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if not _is_api(request):
            return await _answer(before_http, request, exc)
        code = getattr(exc, "code", None) or _CODE_OF_STATUS.get(exc.status_code, "bad_request")
        detail = exc.detail if isinstance(exc.detail, str) else PROBLEM_TITLES[code]
        return problem_response(
            exc.status_code,
            code,
            detail,
            headers=getattr(exc, "headers", None),
            errors=getattr(exc, "errors", None),
        )

    async def invalid(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        if not _is_api(request):
            return await _answer(before_invalid, request, exc)
        errors = _field_errors(exc)
        detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
        return problem_response(422, "invalid_request", detail, errors=errors)

    async def unexpected(request: Request, exc: Exception) -> Response:
        # Only reached for /api/ paths' errors the routes did not expect: the rest of the service keeps
        # Starlette's plain 500. The traceback goes to the log, never to the caller.
        log.exception("public_api_internal_error", path=request.url.path)
        if not _is_api(request):  # Starlette's own answer, as before
            return PlainTextResponse("Internal Server Error", status_code=500)
        return problem_response(500, "internal_error", "something went wrong on our side; try again later")

    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(Exception, unexpected)
