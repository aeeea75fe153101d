"""Run a real ARQ worker (chat or background) in burst mode, and read what became of one job.

Assert on a job's own result (:func:`job_result`), never on a worker's counters (``jobs_retried``...):
those count every job the burst ran, including any another test left behind.
"""

from __future__ import annotations

from typing import Any

from arq.connections import ArqRedis, create_pool
from arq.constants import default_queue_name, job_key_prefix, result_key_prefix
from arq.jobs import Job, JobResult
from arq.worker import Worker
from redis import Redis
from switchboard.queue import Queue
from switchboard.queue.running import QueueWorker
from switchboard.settings import Settings
from switchboard.worker import WORKER_SETTINGS_BUILDERS

__all__ = [
    "run_worker_burst",
    "run_workers_until_idle",
    "run_cron_job",
    "job_result",
    "queued_jobs",
    "discard_jobs",
    "QUEUES",
]

QUEUES = tuple(queue.value for queue in Queue)
"""Every ARQ queue the system uses (``arq:queue``, ``arq:queue:background``)."""
assert default_queue_name in QUEUES


async def run_worker_burst(
    settings: Settings, queue: Queue = Queue.chat, *, max_jobs: int | None = None, poll_delay_s: float = 0.01
) -> Worker:
    """The worker of ``queue`` with its real settings until its queue is empty, deferred jobs included
    (cron jobs left out)."""
    cls = WORKER_SETTINGS_BUILDERS[queue](settings)
    kwargs = {k: v for k, v in vars(cls).items() if not k.startswith("__")}
    kwargs.pop("cron_jobs", None)
    if max_jobs is not None:
        kwargs["max_jobs"] = max_jobs
    worker = QueueWorker(**kwargs, burst=True, poll_delay=poll_delay_s, handle_signals=False)
    try:
        await worker.main()
    finally:
        await worker.close()
    return worker


async def run_workers_until_idle(settings: Settings, *, rounds: int = 4) -> None:
    """The chat worker's burst, then the background worker's while it has jobs, and again: a background
    job may queue chat work (an agent's handoff notice to send). At most ``rounds`` of both."""
    client = Redis.from_url(settings.redis_url or "")
    try:
        for _ in range(rounds):
            await run_worker_burst(settings)
            if not queued_jobs(client, Queue.background.value):
                return
            await run_worker_burst(settings, Queue.background)
    finally:
        client.close()


async def run_cron_job(settings: Settings, queue: Queue, name: str) -> Any:
    """One run of the cron job ``name`` as the worker of ``queue`` registers it, inside that worker's real
    start-up and shutdown. Returns what the job returned."""
    cls = WORKER_SETTINGS_BUILDERS[queue](settings)
    (job,) = [cron for cron in cls.cron_jobs if cron.name == name]
    redis = await create_pool(cls.redis_settings)
    ctx: dict[str, Any] = {"redis": redis}
    try:
        await cls.on_startup(ctx)
        try:
            return await job.coroutine(ctx)
        finally:
            await cls.on_shutdown(ctx)
    finally:
        await redis.aclose()


async def job_result(redis: ArqRedis, job_id: str) -> JobResult:
    """The stored result of the finished job ``job_id`` (its value, ``success`` and the ``job_try`` it ended
    on; ``start_time`` is the start of that last try, ``enqueue_time`` the first enqueue).

    Raises:
        AssertionError: the job has no result (never ran, or has not finished).
    """
    info = await Job(job_id, redis).result_info()
    assert info is not None, f"job {job_id} has no result"
    return info


def queued_jobs(redis: Redis, queue: str) -> list[str]:
    """Ids of the jobs waiting in ``queue`` (queued or deferred), oldest first."""
    return [job_id.decode() for job_id in redis.zrange(queue, 0, -1)]


def discard_jobs(redis: Redis, queue: str, job_ids: list[str]) -> None:
    """Remove jobs that will never run (their queue entry and their job record)."""
    if job_ids:
        redis.zrem(queue, *job_ids)
        redis.delete(*(job_key_prefix + job_id for job_id in job_ids))
        redis.delete(*(result_key_prefix + job_id for job_id in job_ids))
