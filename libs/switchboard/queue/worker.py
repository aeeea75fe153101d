"""ARQ worker settings (DESIGN.md, step 2). Jobs receive ids, re-read state and are idempotent."""

from __future__ import annotations

from typing import Any

import httpx
from arq.connections import RedisSettings
from arq.cron import cron
from arq.worker import func

from switchboard import __version__
from switchboard.db.engine import create_engine, session_factory
from switchboard.knowledge.jobs import INGEST_JOB_NAME, INGEST_JOB_TIMEOUT_S, ingest_knowledge_source
from switchboard.observability import configure_logging, get_logger
from switchboard.runtime.resources import Resources, require_database_url, require_redis_url
from switchboard.runtime.services import WORKER_QUEUE
from switchboard.settings import Settings

__all__ = ["build_worker_settings", "ping", "worker_is_healthy"]

HEALTH_CHECK_INTERVAL_S = 10
"""How often the worker refreshes its health key (arq's default is 3600 s: too slow for ``status``)."""

INBOUND_ARQ_MAX_TRIES = 100
"""ARQ tries of ``process_inbound``: lock and tenant-limit deferrals count as tries, so this is high;
real failures are bounded by ``INBOUND_MAX_TRIES`` (dead-letter)."""

log = get_logger(__name__)


async def ping(ctx: dict[str, Any]) -> str:
    """A job that proves the worker consumes the queue; returns ``"pong"``."""
    return "pong"


def worker_is_healthy(settings: Settings) -> tuple[bool, str]:
    """Whether a worker refreshed its ARQ heartbeat key recently (``REDIS_URL`` must be set).

    Returns:
        ``(healthy, detail)``: detail is arq's heartbeat line (jobs complete/failed/queued) or the error.
    """
    from switchboard.runtime.services import SERVICES
    from switchboard.runtime.supervisor import check_service_health

    worker = next(spec for spec in SERVICES if spec.kind == "worker")
    return check_service_health(worker, settings, require_redis_url(settings))


def build_worker_settings(settings: Settings) -> type:
    """An ARQ ``WorkerSettings`` class for ``settings`` (see arq ``Worker.__init__`` for the attributes).

    ``ctx["resources"]`` holds the shared :class:`~switchboard.runtime.resources.Resources`.

    Raises:
        SettingsError: ``DATABASE_URL`` or ``REDIS_URL`` unset.
    """
    # Imported here: the channel modules import ``switchboard.queue.keys`` (no cycle at package import).
    from switchboard.channels.base import ChannelDeps, build_channels
    from switchboard.crypto import CredentialCipher
    from switchboard.inbound import WorkerDeps, process_inbound
    from switchboard.llm.router import ModelGateway
    from switchboard.memory import memory_sweep, summarize_memory
    from switchboard.outbox.jobs import deliver_outbox
    from switchboard.queue.maintenance import apply_whatsapp_statuses, sweep_inbound

    # ARQ keeps a killed worker's job "in progress" for the largest timeout of any function + 10 s,
    # so side jobs never get a larger timeout than the inbound job.
    side_timeout_s = min(30.0, settings.inbound_job_timeout_s)
    database_url = require_database_url(settings)
    redis_settings = RedisSettings.from_dsn(require_redis_url(settings))

    async def startup(ctx: dict[str, Any]) -> None:
        configure_logging(service="worker", level=settings.log_level, fmt=settings.log_format)
        engine = create_engine(database_url)
        ctx["resources"] = Resources(
            settings=settings, engine=engine, sessions=session_factory(engine), redis=ctx["redis"]
        )
        cipher = CredentialCipher(settings.resolved_encryption_key())
        http = httpx.AsyncClient(timeout=settings.orchestrator_timeout_s)
        ctx["deps"] = WorkerDeps(
            resources=ctx["resources"],
            settings=settings,
            channels=build_channels(ChannelDeps(settings=settings, cipher=cipher, http=http)),
            http=http,
            cipher=cipher,
        )
        ctx["model_gateway"] = ModelGateway(
            settings=settings,
            cipher=ctx["deps"].cipher,
            max_concurrent_calls=settings.model_call_concurrency,
        )
        ctx["deps"].gateway = ctx["model_gateway"]
        log.info("worker ready", version=__version__, queue=WORKER_QUEUE)

    async def shutdown(ctx: dict[str, Any]) -> None:
        resources: Resources | None = ctx.get("resources")
        deps = ctx.get("deps")
        if deps is not None:
            for channel in deps.channels.values():
                await channel.aclose()
            await deps.http.aclose()
        if resources is not None:
            await resources.engine.dispose()
        log.info("worker stopped")

    class WorkerSettings:
        functions = [
            func(ping, name="ping", timeout=5, max_tries=1),
            func(
                process_inbound,
                name="process_inbound",
                timeout=settings.inbound_job_timeout_s,
                max_tries=INBOUND_ARQ_MAX_TRIES,
            ),
            func(summarize_memory, name="summarize_memory", timeout=side_timeout_s, max_tries=3),
            func(
                apply_whatsapp_statuses, name="apply_whatsapp_statuses", timeout=side_timeout_s, max_tries=3
            ),
            func(deliver_outbox, name="deliver_outbox", timeout=side_timeout_s, max_tries=3),
            func(ingest_knowledge_source, name=INGEST_JOB_NAME, timeout=INGEST_JOB_TIMEOUT_S, max_tries=2),
        ]
        cron_jobs = [
            cron(sweep_inbound, name="sweep_inbound", second=set(range(0, 60, 15)), timeout=side_timeout_s),
            cron(
                deliver_outbox,
                name="deliver_outbox_sweep",
                second=set(range(1, 60, 5)),
                timeout=side_timeout_s,
            ),
            cron(memory_sweep, name="memory_sweep", second={30}, timeout=side_timeout_s),
        ]
        queue_name = WORKER_QUEUE
        on_startup = startup
        on_shutdown = shutdown
        health_check_interval = HEALTH_CHECK_INTERVAL_S
        max_jobs = 50
        job_timeout = 300

    WorkerSettings.redis_settings = redis_settings  # type: ignore[attr-defined]
    return WorkerSettings
