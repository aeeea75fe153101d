"""ARQ worker settings (DESIGN.md, step 2): one worker for the chat queue, one for the background queue.

Jobs receive ids, re-read state and are idempotent. Which job runs where, and why two workers:
:mod:`switchboard.queue.queues`. Both workers share what a job may need in ``ctx`` (set in
``on_startup``): ``resources`` (:class:`~switchboard.runtime.resources.Resources`), ``deps``
(:class:`~switchboard.inbound.context.WorkerDeps`) and ``model_gateway``.

Every job runs inside :func:`observed_job`: its ARQ in-progress marker held as a lease (a killed
worker's job runs again within :data:`switchboard.queue.lease.LEASE_S`), a ``job <name>`` span (child of the ``traceparent`` the
enqueuer put in the job's kwargs, :func:`switchboard.observability.tracing.job_trace_kwargs`) and the
job metrics (wait, run time, outcome). Each worker serves Prometheus ``/metrics`` on its own port and
samples its queue's depth every :data:`QUEUE_DEPTH_INTERVAL_S`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import httpx
from arq.connections import RedisSettings, create_pool
from arq.worker import Retry, Worker, get_kwargs

from switchboard import __version__
from switchboard.db.engine import create_engine, session_factory
from switchboard.db.errors import is_connection_error
from switchboard.errors import SettingsError
from switchboard.observability import configure_logging, get_logger, metrics, tracing
from switchboard.observability.logs import quiet_idle_cron_jobs
from switchboard.queue.lease import arq_in_progress_key, lease
from switchboard.queue.queues import JOB_QUEUES, Queue
from switchboard.runtime.resources import Resources, require_database_url, require_redis_url
from switchboard.settings import Settings, load_settings

__all__ = [
    "build_chat_worker_settings",
    "build_background_worker_settings",
    "WORKER_SETTINGS_BUILDERS",
    "ping",
    "worker_is_healthy",
    "worker_main",
    "sweep_cron",
    "sweep_job_id",
    "QueueWorker",
]

HEALTH_CHECK_INTERVAL_S = 10
"""How often a worker refreshes its health key (arq's default is 3600 s: too slow for ``status``)."""

INBOUND_ARQ_MAX_TRIES = 100
"""ARQ tries of ``process_inbound``: lock and tenant-limit deferrals count as tries, so this is high;
real failures are bounded by ``INBOUND_MAX_TRIES`` (dead-letter)."""

DATABASE_RETRY_DEFER_S = 1.0
"""First delay (seconds) before a job that found the database unavailable runs again; it grows by this
much each try, up to :data:`DATABASE_RETRY_MAX_DEFER_S` (:func:`observed_job`)."""

DATABASE_RETRY_MAX_DEFER_S = 5.0
"""Largest such delay (seconds): a restarted PostgreSQL is used again within about this much of its return."""

STATUS_JOB_MAX_TRIES = 10
"""Tries of a delivery-status job: its statuses live only in the job, so it outlasts a database outage
of about 35 s (1 + 2 + 3 + 4 + 5 x 5 s of :func:`observed_job`'s delays) before they are lost."""

SIDE_JOB_TIMEOUT_S = 30.0
"""Timeout of the short jobs (statuses, handoff delivery, the sweeper), seconds."""

MEMORY_JOB_TIMEOUT_S = 300.0
"""Timeout of a memory job, seconds: ``memory_sweep`` summarizes every newly closed conversation, one
model call each (45 s per request at most)."""

PRUNE_JOB_TIMEOUT_S = 300.0
"""Timeout of the hourly ``prune_events`` run (20 batches of 500 events, one transaction each)."""

GMAIL_SYNC_TIMEOUT_S = 110.0
"""Timeout of one mailbox sync (below the sync lock's 120 s, ``channels.gmail.jobs.SYNC_LOCK_S``)."""

QUEUE_DEPTH_INTERVAL_S = 5.0
"""How often a worker samples the length of its queue for ``switchboard_queue_depth``, seconds."""

log = get_logger(__name__)


def observed_job(
    name: str, queue: Queue, coroutine: Callable[..., Awaitable[Any]]
) -> Callable[..., Awaitable[Any]]:
    """``coroutine`` (an ARQ job) with its span and metrics; the ``traceparent`` kwarg is taken off
    before the job sees its arguments.

    A job that finds the database unavailable (a connection-level error,
    :func:`switchboard.db.errors.is_connection_error`: PostgreSQL restarting, a failover) runs again after
    1, 2, ... at most :data:`DATABASE_RETRY_MAX_DEFER_S` seconds (``Retry``, logged
    ``job_database_unavailable``; ``OSError`` counts too: a refused or vanished socket is what asyncpg raises
    while PostgreSQL restarts) instead of failing: ARQ does not retry a job that raised, so a status
    update or a send in it would otherwise be lost, and an inbound message would wait for the sweeper.
    Every job is idempotent, so running again is safe; it still ends at the job's ``max_tries``.

    Outcomes: ``ok``, ``retry`` (the job raised ``Retry``, or the database was unavailable), ``error``
    (anything else; re-raised).
    """

    @functools.wraps(coroutine)
    async def run(ctx: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        parent = tracing.context_from_traceparent(kwargs.pop(tracing.TRACEPARENT_KWARG, None))
        enqueued = ctx.get("enqueue_time")
        if isinstance(enqueued, datetime):
            wait_s = (datetime.now(UTC) - enqueued.astimezone(UTC)).total_seconds()
            metrics.JOB_WAIT_SECONDS.labels(queue.value, name).observe(max(wait_s, 0.0))
        started = time.perf_counter()
        outcome = "error"
        attributes = {"messaging.system": "arq", "messaging.destination.name": queue.value, "job.name": name,
                      "job.try": int(ctx.get("job_try") or 1)}  # fmt: skip
        with tracing.span(
            f"job {name}", kind=tracing.SpanKind.CONSUMER, context=parent, attributes=attributes,
            record_errors=False,
        ) as current:  # fmt: skip
            try:
                async with _job_lease(ctx):
                    result = await coroutine(ctx, *args, **kwargs)
                outcome = "ok"
                return result
            except Retry:
                outcome = "retry"
                raise
            except Exception as exc:
                if not is_connection_error(exc):
                    _record_error(current, exc)
                    raise
                outcome = "retry"
                job_try = int(ctx.get("job_try") or 1)
                defer_s = min(DATABASE_RETRY_DEFER_S * job_try, DATABASE_RETRY_MAX_DEFER_S)
                log.warning("job_database_unavailable", job=name, job_id=str(ctx.get("job_id")), job_try=job_try,
                            defer_s=defer_s, error=f"{type(exc).__name__}: {exc}"[:300])  # fmt: skip
                raise Retry(defer=defer_s) from None
            except BaseException as exc:  # recorded and re-raised: ARQ decides what happens next
                _record_error(current, exc)
                raise
            finally:
                current.set_attribute("job.outcome", outcome)
                metrics.JOBS.labels(queue.value, name, outcome).inc()
                metrics.JOB_SECONDS.labels(queue.value, name).observe(time.perf_counter() - started)

    return run


def _record_error(current: Any, exc: BaseException) -> None:
    if current.is_recording():
        current.record_exception(exc)
    tracing.set_error(current, type(exc).__name__)


def _job_lease(ctx: dict[str, Any]) -> contextlib.AbstractAsyncContextManager[None]:
    """ARQ's in-progress marker of this job as a lease (:mod:`switchboard.queue.lease`): a killed worker's
    job runs again about ``LEASE_S`` after the kill, not after the worker's largest timeout + 10 s."""
    redis, job_id = ctx.get("redis"), ctx.get("job_id")
    if redis is None or not job_id:  # called outside a worker (tests calling a job directly)
        return contextlib.nullcontext()
    return lease(redis, arq_in_progress_key(str(job_id)))


SWEEP_JOB_ID_PREFIX = "cron:"


def sweep_job_id(name: str) -> str:
    """The one ARQ job id every run of the cron job ``name`` gets (:func:`sweep_cron`)."""
    return f"{SWEEP_JOB_ID_PREFIX}{name}"


class QueueWorker(Worker):
    """ARQ's ``Worker``, except that a sweep (:func:`sweep_cron`) that fails before its body runs leaves no
    result record.

    ARQ stores the result of such a failure for the *worker's* ``keep_result_s`` (3,600 s), not the job's
    ``keep_result=0``: "max retries exceeded" (a cron job has ``max_tries=1``, so the rerun of a sweep whose
    worker was killed mid-run ends so) and "expired" (the job record went while its queue entry stayed:
    the instant between the sweep dropping its in-progress marker and ARQ finishing the run, when a poll
    of the same worker can start it again). ``enqueue_job`` refuses an id that has a result, so either one
    held the sweep back an hour: the outbox and approvals sweeps stopped, seen once in CI. Without the
    record the next tick enqueues the sweep as usual.
    """

    async def finish_failed_job(self, job_id: str, result_data: bytes | None) -> None:
        if job_id.startswith(SWEEP_JOB_ID_PREFIX):
            result_data = None  # arq stores no result when there is none to store
        await super().finish_failed_job(job_id, result_data)


def sweep_cron(coroutine: Callable[..., Awaitable[Any]], *, name: str, **schedule: Any) -> Any:
    """``arq.cron.cron(coroutine, name=name, **schedule)`` that never piles up: every run has the same job
    id (:func:`sweep_job_id`), and ARQ's ``enqueue_job`` refuses an id whose job record exists, which it
    does from the enqueue until the run finishes (and while a result is kept: :class:`QueueWorker`). So a sweep due while the previous one is still queued
    (behind a burst of ``process_inbound`` jobs) or running is skipped, not queued again: under load the
    chat queue held 76 sweeps at once when each run had its own id (ARQ's default ``name:timestamp``).
    Several workers of one queue enqueue one sweep between them the same way.

    The result is not kept (``keep_result=0``: a kept result would block the id until it expired), so the
    next run can be enqueued as soon as one finishes. A killed worker's sweep keeps its job record and
    is picked up again after its lease (:mod:`switchboard.queue.lease`) and, being past its one try,
    ends there; the next tick runs it (:class:`QueueWorker` keeps no result that would block it).

    ARQ keeps a finished cron job's in-progress marker 60 s (``keep_cronjob_progress``, against a second
    run of the same ``name:timestamp``); with one id for every run that would hold the next run back a
    minute, so the sweep deletes its marker when its body is done (ARQ's ``PEXPIRE`` of a gone key is a
    no-op). In that instant another worker may start the same run again: sweeps are idempotent.

    ``schedule``: ``second``, ``minute``, ``timeout``... of ``arq.cron.cron``.
    """
    from arq.cron import cron

    @functools.wraps(coroutine)
    async def sweep(ctx: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return await coroutine(ctx, *args, **kwargs)
        finally:
            if ctx.get("redis") is not None and ctx.get("job_id"):
                await ctx["redis"].delete(arq_in_progress_key(str(ctx["job_id"])))

    return cron(sweep, name=name, job_id=sweep_job_id(name), keep_result=0, **schedule)


def _observed(jobs: list[Any], queue: Queue) -> list[Any]:
    """ARQ ``Function``/``CronJob`` records with their coroutine wrapped by :func:`observed_job`."""
    return [dataclasses.replace(job, coroutine=observed_job(job.name, queue, job.coroutine)) for job in jobs]


async def _sample_queue_depth(redis: Any, queue: Queue) -> None:
    """Set ``switchboard_queue_depth`` for ``queue`` every :data:`QUEUE_DEPTH_INTERVAL_S` until cancelled."""
    while True:
        try:
            metrics.QUEUE_DEPTH.labels(queue.value).set(await redis.zcard(queue.value))
        except Exception as exc:  # noqa: BLE001 (a missed sample is harmless; logged)
            log.debug("queue_depth_sample_failed", queue=queue.value, error=str(exc))
        await asyncio.sleep(QUEUE_DEPTH_INTERVAL_S)


async def ping(ctx: dict[str, Any]) -> str:
    """A job that proves the worker consumes the queue; returns ``"pong"``."""
    return "pong"


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
        raise ValueError(f"jobs {wrong} are not {queue.name} jobs (switchboard.queue.queues.JOB_QUEUES)")
    quiet_idle_cron_jobs(job.name for job in cron_jobs)
    database_url = require_database_url(settings)
    redis_settings = RedisSettings.from_dsn(require_redis_url(settings))
    metrics_port = int(getattr(settings, f"{service}_metrics_port", 0) or 0)

    async def startup(ctx: dict[str, Any]) -> None:
        configure_logging(service=service, level=settings.log_level, fmt=settings.log_format)
        tracing.configure_tracing(service=service)
        try:
            ctx["metrics_server"] = metrics.start_metrics_server(settings.host, metrics_port)
        except OSError as exc:  # a taken metrics port must not stop the worker from answering customers
            ctx["metrics_server"] = None
            log.error("metrics_port_unavailable", port=metrics_port, error=str(exc))
        ctx["queue_depth_task"] = asyncio.create_task(_sample_queue_depth(ctx["redis"], queue))
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
        "functions": _observed(functions, queue),
        "cron_jobs": _observed(cron_jobs, queue),
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


def build_chat_worker_settings(settings: Settings) -> type:
    """The chat worker (``worker`` service): customer messages, delivery statuses, handoff notices.

    A killed worker's message runs again about ``LEASE_S`` (30 s) later: the in-progress marker is a
    lease (:func:`observed_job`), not arq's largest job timeout + 10 s (arq #402).

    Raises:
        SettingsError: ``DATABASE_URL`` or ``REDIS_URL`` unset.
    """
    from arq.worker import func

    from switchboard.handoff.pending import approvals_sweep
    from switchboard.inbound import process_inbound
    from switchboard.media.jobs import COPY_JOB, copy_inbound_media
    from switchboard.media.jobs import JOB_MAX_TRIES as COPY_MAX_TRIES
    from switchboard.outbox.jobs import deliver_outbox
    from switchboard.queue.maintenance import apply_delivery_statuses, apply_whatsapp_statuses

    side_timeout_s = min(SIDE_JOB_TIMEOUT_S, settings.inbound_job_timeout_s)
    return _worker_class(
        settings,
        Queue.chat,
        service="worker",
        functions=[
            func(ping, name="ping", timeout=5, max_tries=1),
            func(
                process_inbound,
                name="process_inbound",
                timeout=settings.inbound_job_timeout_s,
                max_tries=INBOUND_ARQ_MAX_TRIES,
            ),
            func(
                apply_delivery_statuses,
                name="apply_delivery_statuses",
                timeout=side_timeout_s,
                max_tries=STATUS_JOB_MAX_TRIES,
            ),
            func(
                apply_whatsapp_statuses,
                name="apply_whatsapp_statuses",
                timeout=side_timeout_s,
                max_tries=STATUS_JOB_MAX_TRIES,
            ),
            func(deliver_outbox, name="deliver_outbox", timeout=side_timeout_s, max_tries=3),
            func(copy_inbound_media, name=COPY_JOB, timeout=side_timeout_s, max_tries=COPY_MAX_TRIES),
        ],
        cron_jobs=[
            sweep_cron(
                deliver_outbox,
                name="deliver_outbox_sweep",
                second=set(range(1, 60, 5)),
                timeout=side_timeout_s,
            ),
            sweep_cron(
                approvals_sweep, name="approvals_sweep", second=set(range(3, 60, 10)), timeout=side_timeout_s
            ),
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
    from arq.worker import func

    from switchboard.channels.gmail.jobs import POLL_JOB, SYNC_JOB, poll_gmail_mailboxes, sync_gmail_mailbox
    from switchboard.events.delivery import DELIVER_EVENTS_JOB, deliver_events
    from switchboard.events.retention import PRUNE_EVENTS_JOB, prune_events
    from switchboard.knowledge.jobs import (
        INGEST_JOB_NAME,
        INGEST_JOB_TIMEOUT_S,
        VECTOR_INDEX_JOB_NAME,
        ingest_knowledge_source,
        vector_index_sweep,
    )
    from switchboard.memory import memory_sweep, summarize_memory
    from switchboard.queue.maintenance import sweep_inbound

    # A mailbox's poll sync runs every GMAIL_POLL_INTERVAL_S and mostly finds nothing new: its arq lines
    # are DEBUG then, like an idle cron run (a sync that stored mail keeps them at INFO).
    quiet_idle_cron_jobs([SYNC_JOB])
    return _worker_class(
        settings,
        Queue.background,
        service="worker_background",
        functions=[
            func(ingest_knowledge_source, name=INGEST_JOB_NAME, timeout=INGEST_JOB_TIMEOUT_S, max_tries=2),
            func(summarize_memory, name="summarize_memory", timeout=MEMORY_JOB_TIMEOUT_S, max_tries=3),
            func(
                sync_gmail_mailbox, name=SYNC_JOB, timeout=GMAIL_SYNC_TIMEOUT_S, max_tries=30, keep_result=0
            ),
        ],
        cron_jobs=[
            sweep_cron(
                sweep_inbound, name="sweep_inbound", second=set(range(0, 60, 15)), timeout=SIDE_JOB_TIMEOUT_S
            ),
            sweep_cron(memory_sweep, name="memory_sweep", second={30}, timeout=MEMORY_JOB_TIMEOUT_S),
            sweep_cron(
                poll_gmail_mailboxes, name=POLL_JOB, second=set(range(5, 60, 15)), timeout=SIDE_JOB_TIMEOUT_S
            ),
            sweep_cron(
                deliver_events,
                name=DELIVER_EVENTS_JOB,
                second=set(range(2, 60, 5)),
                timeout=SIDE_JOB_TIMEOUT_S,
            ),
            sweep_cron(
                prune_events, name=PRUNE_EVENTS_JOB, minute={17}, second={40}, timeout=PRUNE_JOB_TIMEOUT_S
            ),
            sweep_cron(
                vector_index_sweep, name=VECTOR_INDEX_JOB_NAME, second={50}, timeout=INGEST_JOB_TIMEOUT_S
            ),
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
    QueueWorker(**get_kwargs(WORKER_SETTINGS_BUILDERS[queue](settings))).run()  # arq's run_worker, our class
    return 0
