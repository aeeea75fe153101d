"""The ARQ workers (one for the chat queue, one for the background queue: docs/architecture.md), assembled from
the domains' jobs.

Jobs receive ids, re-read state and are idempotent. Which job runs where, and why two workers:
:mod:`switchboard.queue.queues`. Both workers share what a job may need in ``ctx`` (set in
``on_startup``): ``resources`` (:class:`~switchboard.runtime.resources.Resources`), ``deps``
(:class:`~switchboard.inbound.context.WorkerDeps`) and ``model_gateway``. Every job runs inside
:func:`switchboard.queue.running.observed_job`. Each worker serves Prometheus ``/metrics`` on its own port
and samples its queue's depth.

This package sits above every domain package: it is the one place that imports them all to build the
workers, so no domain package imports it.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable
from typing import Any

import httpx
from arq.connections import RedisSettings, create_pool
from arq.worker import get_kwargs

from switchboard import __version__
from switchboard.db.engine import create_engine, session_factory
from switchboard.errors import SettingsError
from switchboard.observability import configure_logging, get_logger, metrics, tracing
from switchboard.observability.logs import quiet_idle_cron_jobs
from switchboard.queue import jobs
from switchboard.queue.jobs import JOB_QUEUES, Job
from switchboard.queue.queues import Queue
from switchboard.queue.running import (
    HEALTH_CHECK_INTERVAL_S,
    QueueWorker,
    observed,
    ping,
    sample_queue_depth,
    sweep_cron,
)
from switchboard.runtime.resources import Resources, require_database_url, require_redis_url
from switchboard.settings import Settings, load_settings

__all__ = [
    "build_chat_worker_settings",
    "build_background_worker_settings",
    "WORKER_SETTINGS_BUILDERS",
    "worker_is_healthy",
    "worker_main",
]


log = get_logger(__name__)


def worker_is_healthy(settings: Settings, queue: Queue = Queue.chat) -> tuple[bool, str]:
    """Whether the worker of ``queue`` refreshed its ARQ heartbeat key recently (``REDIS_URL`` must be set).

    Returns:
        ``(healthy, detail)``: detail is arq's heartbeat line (jobs complete/failed/queued) or the error.
    """
    from switchboard.runtime.services import SERVICES
    from switchboard.runtime.supervisor import check_service_health

    worker = next(spec for spec in SERVICES if spec.queue == queue)
    return check_service_health(worker, settings, require_redis_url(settings))


def _worker_class(
    settings: Settings,
    queue: Queue,
    *,
    service: str,
    functions: list[Any],
    cron_jobs: list[Any],
    enqueues_on_own_queue: bool,
) -> type:
    """A ``WorkerSettings`` class (see arq ``Worker.__init__`` for the attributes) for ``queue``.

    Args:
        enqueues_on_own_queue: whether jobs' ``resources.redis`` may be the worker's own pool (its
            enqueues default to ``queue``); otherwise they get a pool of their own whose default is
            the chat queue (the background sweeper re-enqueues ``process_inbound``).
    """
    # Imported here: the channel and agent modules are heavy, and they import this package's keys.
    from switchboard.channels.base import ChannelDeps, build_channels
    from switchboard.crypto import CredentialCipher
    from switchboard.inbound.context import WorkerDeps
    from switchboard.llm.router import ModelGateway
    from switchboard.media import MediaStore

    wrong = sorted(name for name in _names(functions, cron_jobs) if JOB_QUEUES.get(name) != queue)
    if wrong:
        raise ValueError(f"jobs {wrong} are not {queue.name} jobs (switchboard.queue.jobs)")
    quiet_idle_cron_jobs(job.name for job in cron_jobs)
    database_url = require_database_url(settings)
    redis_settings = RedisSettings.from_dsn(require_redis_url(settings))
    metrics_port = int(getattr(settings, f"{service}_metrics_port", 0) or 0)

    async def startup(ctx: dict[str, Any]) -> None:
        configure_logging(
            service=service,
            level=settings.log_level,
            fmt=settings.log_format,
            unmask_pii=settings.log_unmask_pii,
        )
        tracing.configure_tracing(service=service)
        try:
            ctx["metrics_server"] = metrics.start_metrics_server(settings.host, metrics_port)
        except OSError as exc:  # a taken metrics port must not stop the worker from answering customers
            ctx["metrics_server"] = None
            log.error("metrics_port_unavailable", port=metrics_port, error=str(exc))
        ctx["queue_depth_task"] = asyncio.create_task(sample_queue_depth(ctx["redis"], queue))
        engine = create_engine(database_url)
        redis = ctx["redis"] if enqueues_on_own_queue else await create_pool(redis_settings)
        ctx["own_pool"] = None if enqueues_on_own_queue else redis
        ctx["resources"] = Resources(
            settings=settings, engine=engine, sessions=session_factory(engine), redis=redis
        )
        cipher = CredentialCipher(settings.secret("encryption_key").encode())
        http = httpx.AsyncClient(timeout=settings.orchestrator_timeout_s)
        media_store = MediaStore.from_settings(settings)
        ctx["deps"] = WorkerDeps(
            resources=ctx["resources"],
            settings=settings,
            channels=build_channels(
                ChannelDeps(
                    settings=settings,
                    cipher=cipher,
                    http=http,
                    sessions=ctx["resources"].sessions,
                    extra={"media_store": media_store},
                )
            ),
            http=http,
            cipher=cipher,
            media_store=media_store,
        )
        ctx["model_gateway"] = ModelGateway(
            settings=settings,
            cipher=ctx["deps"].cipher,
            max_concurrent_calls=settings.model_call_concurrency,
        )
        ctx["deps"].gateway = ctx["model_gateway"]
        log.info("worker ready", version=__version__, queue=queue.value, metrics_port=metrics_port or None)

    async def shutdown(ctx: dict[str, Any]) -> None:
        resources: Resources | None = ctx.get("resources")
        deps = ctx.get("deps")
        if (task := ctx.get("queue_depth_task")) is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if (server := ctx.get("metrics_server")) is not None:
            await asyncio.to_thread(server.shutdown)
            server.server_close()
        if deps is not None:
            for channel in deps.channels.values():
                await channel.aclose()
            await deps.http.aclose()
        if ctx.get("own_pool") is not None:
            await ctx["own_pool"].aclose()
        if resources is not None:
            await resources.engine.dispose()
        log.info("worker stopped", queue=queue.value)

    attributes: dict[str, Any] = {
        "functions": observed(functions, queue),
        "cron_jobs": observed(cron_jobs, queue),
        "queue_name": queue.value,
        "redis_settings": redis_settings,
        "on_startup": startup,
        "on_shutdown": shutdown,
        "health_check_interval": HEALTH_CHECK_INTERVAL_S,
        "max_jobs": 50,
        "job_timeout": max(job.timeout_s or 0 for job in [*functions, *cron_jobs]),
    }
    return type(f"{queue.name.capitalize()}WorkerSettings", (), attributes)


def _names(functions: list[Any], cron_jobs: list[Any]) -> list[str]:
    return [job.name for job in [*functions, *cron_jobs]]


def _func(job: Job, coroutine: Callable[..., Any], settings: Settings) -> Any:
    from arq.worker import func

    return func(coroutine, **job.arq_options(settings))


def _sweep(job: Job, coroutine: Callable[..., Any], settings: Settings, **schedule: Any) -> Any:
    return sweep_cron(coroutine, name=job.name, timeout=job.timeout_for(settings), **schedule)


def build_chat_worker_settings(settings: Settings) -> type:
    """The chat worker (``worker`` service): customer messages, delivery statuses, handoff notices.

    A killed worker's message runs again about ``LEASE_S`` (30 s) later: the in-progress marker is a
    lease (:func:`~switchboard.queue.running.observed_job`), not arq's largest job timeout + 10 s (arq #402).

    Raises:
        SettingsError: ``DATABASE_URL`` or ``REDIS_URL`` unset.
    """
    from switchboard.handoff.pending import approvals_sweep
    from switchboard.handoff.service import handoff_openings
    from switchboard.inbound import process_inbound
    from switchboard.media.jobs import copy_inbound_media
    from switchboard.outbox.jobs import deliver_outbox
    from switchboard.outbox.statuses import apply_delivery_statuses
    from switchboard.worker.compat import apply_whatsapp_statuses

    return _worker_class(
        settings,
        Queue.chat,
        service="worker",
        functions=[
            _func(jobs.PING, ping, settings),
            _func(jobs.PROCESS_INBOUND, process_inbound, settings),
            _func(jobs.APPLY_DELIVERY_STATUSES, apply_delivery_statuses, settings),
            _func(jobs.APPLY_WHATSAPP_STATUSES, apply_whatsapp_statuses, settings),
            _func(jobs.DELIVER_OUTBOX, deliver_outbox, settings),
            _func(jobs.COPY_INBOUND_MEDIA, copy_inbound_media, settings),
        ],
        cron_jobs=[
            _sweep(jobs.DELIVER_OUTBOX_SWEEP, deliver_outbox, settings, second=set(range(1, 60, 5))),
            _sweep(jobs.APPROVALS_SWEEP, approvals_sweep, settings, second=set(range(3, 60, 10))),
            _sweep(jobs.HANDOFF_OPENINGS, handoff_openings, settings, second=set(range(7, 60, 10))),
        ],
        enqueues_on_own_queue=True,
    )


def build_background_worker_settings(settings: Settings) -> type:
    """The background worker (``worker_background`` service): knowledge ingestion, memory, the sweeper.

    Its jobs' ``resources.redis`` enqueues on the chat queue by default: the sweeper re-enqueues
    ``process_inbound``; background jobs name ``Queue.background`` when they enqueue.

    Raises:
        SettingsError: ``DATABASE_URL`` or ``REDIS_URL`` unset.
    """
    from switchboard.agent.history_summary import summarize_history_job
    from switchboard.channels.gmail.jobs import poll_gmail_mailboxes, sync_gmail_mailbox
    from switchboard.events.delivery import deliver_events
    from switchboard.events.retention import prune_events
    from switchboard.handoff.service import handoff_notice
    from switchboard.inbound.resume import resume_waiting_turns
    from switchboard.inbound.sweep import sweep_inbound
    from switchboard.knowledge.jobs import ingest_knowledge_source, vector_index_sweep
    from switchboard.leads.jobs import check_lead_intent
    from switchboard.memory import memory_sweep, summarize_memory
    from switchboard.privacy.jobs import erase_customer_job, export_customer_job
    from switchboard.privacy.retention import apply_retention_job

    # A mailbox's poll sync runs every GMAIL_POLL_INTERVAL_S and mostly finds nothing new: its arq lines
    # are DEBUG then, like an idle cron run (a sync that stored mail keeps them at INFO).
    quiet_idle_cron_jobs([jobs.SYNC_GMAIL_MAILBOX.name])
    return _worker_class(
        settings,
        Queue.background,
        service="worker_background",
        functions=[
            _func(jobs.INGEST_KNOWLEDGE_SOURCE, ingest_knowledge_source, settings),
            _func(jobs.SUMMARIZE_MEMORY, summarize_memory, settings),
            _func(jobs.SYNC_GMAIL_MAILBOX, sync_gmail_mailbox, settings),
            _func(jobs.CHECK_LEAD_INTENT, check_lead_intent, settings),
            _func(jobs.ERASE_CUSTOMER, erase_customer_job, settings),
            _func(jobs.EXPORT_CUSTOMER, export_customer_job, settings),
            _func(jobs.SUMMARIZE_HISTORY, summarize_history_job, settings),
            _func(jobs.HANDOFF_NOTICE, handoff_notice, settings),
        ],
        cron_jobs=[
            _sweep(jobs.SWEEP_INBOUND, sweep_inbound, settings, second=set(range(0, 60, 15))),
            _sweep(jobs.MEMORY_SWEEP, memory_sweep, settings, second={30}),
            _sweep(jobs.POLL_GMAIL_MAILBOXES, poll_gmail_mailboxes, settings, second=set(range(5, 60, 15))),
            _sweep(jobs.DELIVER_EVENTS, deliver_events, settings, second=set(range(2, 60, 5))),
            _sweep(jobs.PRUNE_EVENTS, prune_events, settings, minute={17}, second={40}),
            _sweep(jobs.APPLY_RETENTION, apply_retention_job, settings, hour={3}, minute={23}, second={10}),
            _sweep(jobs.KNOWLEDGE_VECTOR_INDEXES, vector_index_sweep, settings, second={50}),
            _sweep(jobs.RESUME_WAITING_TURNS, resume_waiting_turns, settings, second=set(range(10, 60, 15))),
        ],
        enqueues_on_own_queue=False,
    )


WORKER_SETTINGS_BUILDERS: dict[Queue, Callable[[Settings], type]] = {
    Queue.chat: build_chat_worker_settings,
    Queue.background: build_background_worker_settings,
}


def _check(settings: Settings, queue: Queue) -> int:
    """``--check``: 0 healthy, 1 unhealthy, 2 cannot tell (no Redis to ask). Without ``REDIS_URL`` it asks
    the embedded Redis of a live ``switchboard run`` (``DATA_DIR/run.json``), as ``switchboard status`` does."""
    from switchboard.runtime.resources import live_run_state

    state = live_run_state(settings) or {}
    if not settings.redis_url and state.get("embedded_redis_url"):
        settings = settings.model_copy(update={"redis_url": state["embedded_redis_url"]})
    try:
        healthy, detail = worker_is_healthy(settings, queue)
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(("healthy: " if healthy else "unhealthy: ") + detail)
    return 0 if healthy else 1


def worker_main(queue: Queue, argv: list[str] | None = None) -> int:
    """What a worker service's ``main`` does: run the worker of ``queue`` until stopped, or with
    ``--check`` print its health and exit 0 when its heartbeat is fresh (container health checks)."""
    args = sys.argv[1:] if argv is None else argv
    settings = load_settings()
    if args == ["--check"]:
        return _check(settings, queue)
    settings.require_secrets()  # GENERATE_SECRETS=false (containers): refuse to start without them
    kwargs: dict[str, Any] = get_kwargs(WORKER_SETTINGS_BUILDERS[queue](settings))
    QueueWorker(**kwargs).run()  # arq's run_worker, our class
    return 0
