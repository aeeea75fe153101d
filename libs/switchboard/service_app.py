"""The FastAPI app shell every HTTP service shares: logging, tracing, resources in the lifespan,
``/healthz``, ``/metrics``, and ``/docs`` (Swagger UI) served from vendored files under ``/_static``
(works offline, no CDN)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI

from switchboard import __version__
from switchboard.docs_ui import mount_local_docs
from switchboard.health import health_router
from switchboard.observability import configure_logging, get_logger
from switchboard.observability.metrics import mount_metrics
from switchboard.observability.tracing import configure_tracing, instrument_app
from switchboard.runtime.resources import open_resources
from switchboard.settings import Settings

__all__ = ["create_service_app"]


def create_service_app(
    name: str,
    settings: Settings,
    *,
    routers: Sequence[APIRouter] = (),
    with_redis: bool = True,
    description: str = "",
    db_pre_ping: bool = True,
    db_pool: tuple[int, int] | None = None,
) -> FastAPI:
    """Assemble one service.

    Args:
        name: service name (logs, ``/healthz``, OpenAPI title ``switchboard-<name>``).
        settings: process settings; ``DATABASE_URL`` (and ``REDIS_URL`` if ``with_redis``) must be set.
        routers: the service's own routers.
        db_pre_ping: ping each pooled database connection before use (a round trip per request).
            A webhook service turns it off: after a database restart its first delivery on a stale
            connection answers 503 and the provider retries it, instead of every delivery paying.
        db_pool: ``(pool_size, max_overflow)`` of its engine (default ``(10, 10)``).

    Raises:
        SettingsError: at once, when ``GENERATE_SECRETS=false`` and a secret is unset (names it);
            at start-up (lifespan), when a required URL is unset.
    """
    configure_logging(service=name, level=settings.log_level, fmt=settings.log_format)
    settings.require_secrets()
    configure_tracing(service=name)
    log = get_logger(__name__)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with open_resources(
            settings, with_redis=with_redis, db_pre_ping=db_pre_ping, db_pool=db_pool
        ) as resources:
            app.state.resources = resources
            log.info("service ready", version=__version__)
            yield
        log.info("service stopped")

    app = FastAPI(
        title=f"switchboard-{name}",
        version=__version__,
        description=description,
        lifespan=lifespan,
        docs_url=None,  # /docs comes from the vendored Swagger UI (mount_local_docs), not a CDN
        redoc_url=None,
    )
    mount_local_docs(app)
    app.state.settings = settings
    app.include_router(health_router(name))
    mount_metrics(app)
    instrument_app(app)
    for router in routers:
        app.include_router(router)
    return app
