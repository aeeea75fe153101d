"""``GET /healthz`` for every HTTP service: name, version and the state of its dependencies."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import text

from switchboard import __version__
from switchboard.warming import WARMING, warm_up_state

__all__ = ["health_router"]

CHECK_TIMEOUT_S = 2.0


def health_router(service: str) -> APIRouter:
    """A router with ``GET /healthz``.

    Answers 200 ``{"service", "version", "status": "ok", "checks": {...}}`` when the database and
    Redis the service opened (``app.state.resources``) answer within 2 s each, else 503 with
    ``status: "degraded"`` and the failing check's error. A service with warm-ups
    (``app.warm_ups``, e.g. the orchestrator's ``litellm``) has one check each: while one is still
    loading the answer is 200 with ``status: "warming"`` (the service is up: its requests wait for
    it), a failed one is ``degraded``.
    """
    router = APIRouter(tags=["health"])

    @router.get("/healthz", summary="Liveness and dependency health of this service")
    async def healthz(request: Request) -> JSONResponse:
        checks: dict[str, str] = {}
        resources = getattr(request.app.state, "resources", None)
        if resources is not None:
            checks["database"] = await _check(_ping_database(resources.engine))
            if resources.redis is not None:
                checks["redis"] = await _check(resources.redis.ping())
        for name, start in getattr(request.app, "warm_ups", {}).items():
            checks[name] = warm_up_state(start())
        healthy = all(value in ("ok", WARMING) for value in checks.values())
        status = "degraded" if not healthy else WARMING if WARMING in checks.values() else "ok"
        body = {"service": service, "version": __version__, "status": status, "checks": checks}
        return JSONResponse(body, status_code=200 if healthy else 503)

    return router


async def _ping_database(engine) -> None:  # type: ignore[no-untyped-def]
    async with engine.connect() as conn:
        await conn.execute(text("SELECT 1"))


async def _check(awaitable) -> str:  # type: ignore[no-untyped-def]
    try:
        await asyncio.wait_for(awaitable, CHECK_TIMEOUT_S)
        return "ok"
    except Exception as exc:  # any failure of a dependency is reported, not raised
        return f"error: {type(exc).__name__}: {exc}"[:300]
