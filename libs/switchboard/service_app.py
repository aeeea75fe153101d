"""The FastAPI app shell every HTTP service shares: logging, tracing, resources in the lifespan,
``/healthz``, ``/metrics``, and ``/docs`` (Swagger UI) served from vendored files under ``/_static``
(works offline, no CDN)."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import Receive, Scope, Send

from switchboard import __version__
from switchboard.body_limit import BodyTooLarge, limit_body
from switchboard.docs_ui import mount_local_docs
from switchboard.health import health_router
from switchboard.observability import configure_logging, get_logger, tracing
from switchboard.observability.metrics import mount_metrics
from switchboard.observability.tracing import configure_tracing, instrument_app
from switchboard.runtime.resources import open_resources
from switchboard.settings import Settings
from switchboard.storable import clean_tree
from switchboard.warming import WARMING, WarmUp

__all__ = ["GC_THRESHOLDS", "ServiceApp", "WarmUp", "create_service_app", "tune_gc", "WARM_UP_WAIT_S"]

WARM_UP_WAIT_S = 2.0
"""How long a request waits for a service's warm-ups before it is answered 503 ``warming`` (the
worker's turn client retries that answer without counting an attempt; tests give it 5 s in all)."""

_NOT_GATED = ("/healthz", "/metrics", "/docs", "/openapi.json", "/_static/")


class ServiceApp(FastAPI):
    """A FastAPI app that answers a few exact ``POST`` paths on a lean path (``lean_posts``, filled from
    the routers' :class:`~switchboard.channels.webhook.LeanRouter` handlers): straight from the ASGI
    entry, without Starlette's middleware stack, routing and FastAPI's dependency solving.

    The same route stays declared (OpenAPI, and the path a test app mounting the router takes). With
    tracing on, every request takes the full stack, so the server span of ``instrument_app`` is kept.
    An exception a handler raises is answered 500 and re-raised, as ``ServerErrorMiddleware``
    does (the server logs it too).
    """

    lean_posts: dict[str, Callable[[Request], Awaitable[Response]]]
    warm_ups: dict[str, WarmUp]
    max_body_bytes: int
    """Every request's body limit unless its route allows more (:mod:`switchboard.body_limit`)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # the lean path too: the limit is counted on the server's receive, before anything reads it
        await limit_body(self._serve, self.max_body_bytes, scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.warm_ups and scope["type"] == "http" and not scope["path"].startswith(_NOT_GATED):
            if not await self._warm(scope, receive, send):
                return
        if scope["type"] == "http" and scope["method"] == "POST" and not tracing.is_enabled():
            handler = self.lean_posts.get(scope["path"])
            if handler is not None:
                scope["app"] = self
                await _serve_lean(handler, scope, receive, send)
                return
        await super().__call__(scope, receive, send)

    async def _warm(self, scope: Scope, receive: Receive, send: Send) -> bool:
        """Wait (without blocking the loop) up to :data:`WARM_UP_WAIT_S` for the warm-ups; False when
        one is still running: the request was answered ``503 {"detail": "warming", ...}``."""
        pending = [future for future in (start() for start in self.warm_ups.values()) if not future.done()]
        if not pending:
            return True
        # asyncio.wait cancels nothing when it times out or its request is cancelled (and a running
        # concurrent future cannot be cancelled): the process's one import goes on
        _, still = await asyncio.wait([asyncio.wrap_future(f) for f in pending], timeout=WARM_UP_WAIT_S)
        if not still:
            return True
        names = [name for name, start in self.warm_ups.items() if not start().done()]
        body = {"detail": WARMING, "warming": names}
        await JSONResponse(body, status_code=503, headers={"Retry-After": "1"})(scope, receive, send)
        return False


async def _serve_lean(
    handler: Callable[[Request], Awaitable[Response]], scope: Scope, receive: Receive, send: Send
) -> None:
    try:
        response = await handler(Request(scope, receive))
    except BodyTooLarge:  # answered 413 by limit_body, around this
        raise
    except Exception:  # Starlette's default answer; the server logs the exception it re-raises
        await PlainTextResponse("Internal Server Error", status_code=500)(scope, receive, send)
        raise
    if type(response) in _PLAIN_RESPONSES and response.background is None:
        # what Response.__call__ sends, without its wrapper coroutine per message (the hot path)
        await send(
            {"type": "http.response.start", "status": response.status_code, "headers": response.raw_headers}
        )
        await send({"type": "http.response.body", "body": response.body})
        return
    started = False

    async def tracked_send(message: Any) -> None:
        nonlocal started
        started = started or message["type"] == "http.response.start"
        await send(message)

    try:
        await response(scope, receive, tracked_send)
    except Exception:
        if not started:
            await PlainTextResponse("Internal Server Error", status_code=500)(scope, receive, send)
        raise


_PLAIN_RESPONSES = (Response, JSONResponse, PlainTextResponse)
"""Response classes whose ``__call__`` only sends ``raw_headers`` and ``body`` (Starlette 1.x)."""


GC_THRESHOLDS = (10_000, 20, 100)
"""``gc.set_threshold`` of a service once it is ready (CPython's default is ``(700, 10, 10)``).

Why: a young collection starts when the tracked objects allocated minus those freed pass the first
threshold; a request leaves a few tens behind (reference cycles, the requests still in flight), so
at 700 one ran every ~25 deliveries and promoted whatever was alive (the requests in flight, new
keep-alive connections) to the older generations. After ``gc.freeze()`` the old generation is
small, and CPython runs a full collection once it grew by a quarter: every 10 x 10 young ones. Each
full one walks every unfrozen object (connections, pools, requests in flight: 18,000-40,000) in one
pause. Measured (``loadtests/loop_lag_wrapper.py``, conc 50 and 250 then 250 paced senders, load
4-6): at the default, 542 young, 49 middle and 4 full collections after start-up, 1.26 s in all,
the full ones 43-98 ms each; at ``(10_000, 20, 100)`` 8 young ones of 2.7-12 ms, ~100 ms in all,
no middle or full one. A young pause walks at most ~10,000 objects; 50,000 gave one 49.5 ms young
pause instead (every object made since the freeze was still young). Memory: at most ~10,000 young
objects wait for a collection; only reference cycles depend on it at all."""


def tune_gc(thresholds: tuple[int, int, int] = GC_THRESHOLDS) -> None:
    """Collect once, freeze what survived, then set ``thresholds`` (call once a service is ready).

    Everything imported and built by then (~160,000 objects: modules, settings, pools, metrics)
    lives as long as the process: ``gc.freeze()`` moves it out of the collector's sight, so no
    later collection walks it (a full collection of it took ~100 ms). See :data:`GC_THRESHOLDS`.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*thresholds)


async def _invalid_request(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's 422 for a request its models refuse, with the input it echoes made encodable: a NUL
    is dropped and an unpaired surrogate (valid JSON, ``"\\ud800"``) becomes U+FFFD, where FastAPI's
    own handler fails to encode the answer and the client gets a 500."""
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    return JSONResponse(status_code=422, content={"detail": clean_tree(jsonable_encoder(errors))})


def create_service_app(
    name: str,
    settings: Settings,
    *,
    routers: Sequence[APIRouter] = (),
    with_redis: bool = True,
    description: str = "",
    db_pre_ping: bool = True,
    db_pool: tuple[int, int] | None = None,
    db_driver_pool: int = 0,
    warm_ups: Mapping[str, WarmUp] | None = None,
) -> ServiceApp:
    """Assemble one service (a :class:`ServiceApp`: FastAPI with a lean path for hot POST routes).

    Args:
        name: service name (logs, ``/healthz``, OpenAPI title ``switchboard-<name>``).
        settings: process settings; ``DATABASE_URL`` (and ``REDIS_URL`` if ``with_redis``) must be set.
        routers: the service's own routers.
        db_pre_ping: ping each pooled database connection before use (a round trip per request).
            A webhook service turns it off: after a database restart its first delivery on a stale
            connection answers 503 and the provider retries it, instead of every delivery paying.
        db_pool: ``(pool_size, max_overflow)`` of its engine (default ``(10, 10)``).
        db_driver_pool: connections of a plain asyncpg pool beside the engine (``Resources.driver``,
            :mod:`switchboard.db.driver_pool`): a webhook service's insert goes there (0: none).
        warm_ups: slow loads by name (the orchestrator: ``{"litellm": start_litellm_import}``),
            started once the service is ready, so they do not hold back ``/healthz``. Until they are
            done ``/healthz`` answers 200 ``status: "warming"`` (the check by that name says
            ``warming``), and every other request awaits them off the event loop, at most
            :data:`WARM_UP_WAIT_S`, then is answered 503 ``{"detail": "warming"}`` with
            ``Retry-After: 1``.

    Raises:
        SettingsError: at once, when ``GENERATE_SECRETS=false`` and a secret is unset (names it);
            at start-up (lifespan), when a required URL is unset.
    """
    configure_logging(
        service=name, level=settings.log_level, fmt=settings.log_format, unmask_pii=settings.log_unmask_pii
    )
    settings.require_secrets()
    configure_tracing(service=name)
    log = get_logger(__name__)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with open_resources(
            settings,
            with_redis=with_redis,
            db_pre_ping=db_pre_ping,
            db_pool=db_pool,
            db_driver_pool=db_driver_pool,
        ) as resources:
            app.state.resources = resources
            tune_gc()
            log.info(
                "service ready",
                version=__version__,
                frozen_objects=gc.get_freeze_count(),
                gc_thresholds=list(gc.get_threshold()),
            )
            for start in (warm_ups or {}).values():
                start()
            yield
        log.info("service stopped")

    app = ServiceApp(
        title=f"switchboard-{name}",
        version=__version__,
        description=description,
        lifespan=lifespan,
        docs_url=None,  # /docs comes from the vendored Swagger UI (mount_local_docs), not a CDN
        redoc_url=None,
    )
    mount_local_docs(app)
    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.state.settings = settings
    app.include_router(health_router(name))
    mount_metrics(app)
    instrument_app(app)
    app.lean_posts = {}
    app.max_body_bytes = settings.max_body_bytes
    app.warm_ups = dict(warm_ups or {})
    for router in routers:
        app.include_router(router)
        app.lean_posts.update(getattr(router, "lean_posts", {}))
    return app
