"""Running ARQ jobs: every job observed (span, metrics, lease), sweeps that never pile up, the worker class.

Every job runs inside :func:`observed_job`: its ARQ in-progress marker held as a lease (a killed
worker's job runs again within :data:`switchboard.queue.lease.LEASE_S`), a ``job <name>`` span (child of
the ``traceparent`` the enqueuer put in the job's kwargs, :func:`switchboard.observability.tracing.job_trace_kwargs`)
and the job metrics (wait, run time, outcome). The workers themselves (which jobs, what ``ctx`` holds) are
assembled in :mod:`switchboard.worker`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from arq.worker import Retry, Worker

from switchboard.db.errors import is_connection_error
from switchboard.observability import get_logger, metrics, tracing
from switchboard.queue.depth import queue_depths
from switchboard.queue.jobs import Backoff
from switchboard.queue.keys import SWEEP_JOB_ID_PREFIX, sweep_job_id
from switchboard.queue.lease import arq_in_progress_key, lease
from switchboard.queue.queues import Queue

__all__ = [
    "HEALTH_CHECK_INTERVAL_S",
    "HEALTH_KEY_TTL_S",
    "QueueWorker",
    "observed",
    "observed_job",
    "ping",
    "sample_queue_depth",
    "sweep_cron",
    "sweep_job_id",
]

HEALTH_CHECK_INTERVAL_S = 10
"""How often a worker refreshes its health key (arq's default is 3600 s: too slow for ``status``)."""
HEALTH_KEY_TTL_S = 3 * HEALTH_CHECK_INTERVAL_S
"""How long one heartbeat stays valid, seconds. ARQ's own is the interval plus 1 s, so an event loop held
just over a second at the wrong moment (a long query's rows, a burst of jobs starting) read as a dead
worker; three refreshes still show a dead worker within 30 s."""


DATABASE_BACKOFF = Backoff(1.0, 5.0)
"""Wait before a job that found the database unavailable runs again (:func:`observed_job`): about 1 s,
doubling per try, at most 5 s, so a restarted PostgreSQL is used again within about 5 s of its return."""


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
    a jittered wait that grows per try up to 5 s (:data:`DATABASE_BACKOFF`) (``Retry``, logged
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
        attributes = {
            "messaging.system": "arq",
            "messaging.destination.name": queue.value,
            "job.name": name,
            "job.try": int(ctx.get("job_try") or 1),
        }
        with tracing.span(
            f"job {name}",
            kind=tracing.SpanKind.CONSUMER,
            context=parent,
            attributes=attributes,
            record_errors=False,
        ) as current:
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
                defer_s = DATABASE_BACKOFF.delay_s(job_try)
                log.warning(
                    "job_database_unavailable",
                    job=name,
                    job_id=str(ctx.get("job_id")),
                    job_try=job_try,
                    defer_s=defer_s,
                    error=f"{type(exc).__name__}: {exc}"[:300],
                )
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


class QueueWorker(Worker):
    """ARQ's ``Worker``, except that its heartbeat outlives a briefly held event loop and counts what
    really waits (:meth:`record_health`), and a sweep (:func:`sweep_cron`) that fails before its body
    runs leaves no result record.

    ARQ stores the result of such a failure for the *worker's* ``keep_result_s`` (3,600 s), not the job's
    ``keep_result=0``: "max retries exceeded" (a cron job has ``max_tries=1``, so the rerun of a sweep whose
    worker was killed mid-run ends so) and "expired" (the job record went while its queue entry stayed:
    the instant between the sweep dropping its in-progress marker and ARQ finishing the run, when a poll
    of the same worker can start it again). ``enqueue_job`` refuses an id that has a result, so either one
    held the sweep back an hour: the outbox and approvals sweeps stopped, seen once in CI. Without the
    record the next tick enqueues the sweep as usual.
    """

    async def record_health(self) -> None:
        """ARQ's heartbeat line (``switchboard status`` reads it), valid :data:`HEALTH_KEY_TTL_S`, with
        ``queued`` the jobs waiting to run (:func:`~switchboard.queue.depth.queue_depths`: not the
        deferred ones nor those running, which ARQ's count includes)."""
        now_ts = time.time()
        if now_ts - self._last_health_check < self.health_check_interval:
            return
        self._last_health_check = now_ts
        ongoing = sum(not t.done() for t in self.tasks.values())
        queued = (await queue_depths(self.pool, [self.queue_name]))[self.queue_name]
        info = (
            f"{datetime.now():%b-%d %H:%M:%S} j_complete={self.jobs_complete} j_failed={self.jobs_failed} "
            f"j_retried={self.jobs_retried} j_ongoing={ongoing} queued={queued}"
        )
        await self.pool.psetex(self.health_check_key, int(HEALTH_KEY_TTL_S * 1000), info.encode())

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


def observed(jobs: list[Any], queue: Queue) -> list[Any]:
    """ARQ ``Function``/``CronJob`` records with their coroutine wrapped by :func:`observed_job`."""
    return [dataclasses.replace(job, coroutine=observed_job(job.name, queue, job.coroutine)) for job in jobs]


async def sample_queue_depth(redis: Any, queue: Queue) -> None:
    """Set ``switchboard_queue_depth`` for ``queue`` (jobs waiting to run now,
    :func:`~switchboard.queue.depth.queue_depths`) every :data:`QUEUE_DEPTH_INTERVAL_S` until cancelled."""
    while True:
        try:
            depth = (await queue_depths(redis, [queue.value]))[queue.value]
            metrics.QUEUE_DEPTH.labels(queue.value).set(depth)
        except Exception as exc:  # noqa: BLE001 (a missed sample is harmless; logged)
            log.debug("queue_depth_sample_failed", queue=queue.value, error=str(exc))
        await asyncio.sleep(QUEUE_DEPTH_INTERVAL_S)


async def ping(ctx: dict[str, Any]) -> str:
    """A job that proves the worker consumes the queue; returns ``"pong"``."""
    return "pong"
