"""Cron sweeps never pile up: a sweep due while the previous run is queued or running is not
enqueued again, against the real ARQ worker and the test Redis."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import pytest
from arq.connections import ArqRedis, RedisSettings, create_pool
from arq.constants import job_key_prefix, result_key_prefix, retry_key_prefix
from arq.worker import Worker
from redis import Redis
from switchboard.queue import Queue
from switchboard.queue.running import QueueWorker, sweep_cron, sweep_job_id
from switchboard.worker import build_background_worker_settings, build_chat_worker_settings

from tests.utils.workers import discard_jobs, queued_jobs


def _worker(cls: type, pool: ArqRedis) -> Worker:
    """The worker ``cls`` describes on ``pool``, start-up hooks left out (only its cron loop is driven)."""
    kwargs = {k: v for k, v in vars(cls).items() if not k.startswith("__")}
    for hook in ("on_startup", "on_shutdown"):
        kwargs.pop(hook)
    return QueueWorker(**kwargs, redis_pool=pool, burst=True, handle_signals=False)


async def _heartbeats(worker: Worker, start: datetime, seconds: int) -> None:
    """ARQ's cron step once a second for ``seconds`` seconds from ``start`` (what ``Worker.main`` does)."""
    await worker.run_cron(start, 0.5)  # first call: each job computes its next run
    for step in range(1, seconds + 1):
        await worker.run_cron(start + timedelta(seconds=step), 0.5)


async def _run_queued(settings: Any, worker_class: type[Worker] = QueueWorker) -> None:
    """The chat worker with its real settings and start-up until its queue is empty; its cron loop off
    (the test drives it), its cron jobs still registered as the functions they run."""
    cls = build_chat_worker_settings(settings)
    kwargs = {k: v for k, v in vars(cls).items() if not k.startswith("__")}
    worker = worker_class(**kwargs, burst=True, poll_delay=0.01, handle_signals=False)
    worker.cron_jobs = []
    try:
        await worker.main()
    finally:
        await worker.close()


def test_every_cron_job_is_a_sweep_with_one_job_id(settings) -> None:  # type: ignore[no-untyped-def]
    for build in (build_chat_worker_settings, build_background_worker_settings):
        for job in build(settings).cron_jobs:
            assert (job.job_id, job.keep_result_s) == (sweep_job_id(job.name), 0), job.name


async def test_a_sweep_due_while_one_is_queued_is_not_queued_again(settings, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    """The load run saw 76 sweeps in the chat queue behind inbound jobs: a minute of heartbeats with
    nobody taking jobs (a busy worker) leaves one job per sweep, and the next one is enqueued once the
    sweep ran."""
    pool, sync = await create_pool(RedisSettings.from_dsn(redis_url)), Redis.from_url(redis_url)
    worker = _worker(build_chat_worker_settings(settings), pool)
    # an hour ago: every run is due already, none deferred (a burst worker waits for deferred jobs)
    start = datetime.now(worker.timezone) - timedelta(hours=1)
    sweeps = sorted(
        sweep_job_id(name) for name in ("approvals_sweep", "deliver_outbox_sweep", "handoff_openings")
    )
    try:
        await _heartbeats(worker, start, 60)  # 12 runs of deliver_outbox_sweep, 6 of the others due
        assert sorted(queued_jobs(sync, Queue.chat.value)) == sweeps

        await _run_queued(settings)  # the sweeps run (for real) and finish
        assert queued_jobs(sync, Queue.chat.value) == []
        for job_id in sweeps:  # no record and no result left to block the next run
            assert await pool.exists(job_key_prefix + job_id, result_key_prefix + job_id) == 0

        await _heartbeats(worker, start + timedelta(seconds=61), 10)
        assert sorted(queued_jobs(sync, Queue.chat.value)) == sweeps
    finally:
        discard_jobs(sync, Queue.chat.value, queued_jobs(sync, Queue.chat.value))
        await pool.aclose()
        sync.close()


async def test_a_sweep_due_while_one_runs_is_not_queued_again(redis_url: str) -> None:
    """A real worker, its cron loop due every second, one sweep that takes long: no second run starts and
    nothing queues up while it runs; the next one runs once it finished."""
    runs: list[asyncio.Event] = []
    running = 0
    most_at_once = 0

    async def slow_sweep(ctx: dict[str, Any]) -> None:
        nonlocal running, most_at_once
        done = asyncio.Event()
        runs.append(done)
        running += 1
        most_at_once = max(most_at_once, running)
        try:
            await done.wait()
        finally:
            running -= 1

    queue = Queue.chat.value
    pool, sync = await create_pool(RedisSettings.from_dsn(redis_url)), Redis.from_url(redis_url)
    worker = QueueWorker(
        functions=[],
        cron_jobs=[sweep_cron(slow_sweep, name="slow_sweep", second=set(range(60)))],
        redis_pool=pool,
        queue_name=queue,
        poll_delay=0.05,
        handle_signals=False,
    )
    main = asyncio.create_task(worker.main())

    async def until(condition: Any, timeout_s: float = 60.0) -> None:
        async with asyncio.timeout(timeout_s):
            while not condition():  # noqa: ASYNC110 (state the worker's job task changes)
                await asyncio.sleep(0.05)

    try:
        await until(lambda: len(runs) == 1)
        await asyncio.sleep(3.5)  # three more runs due while the first one is still running
        assert (len(runs), queued_jobs(sync, queue)) == (1, [sweep_job_id("slow_sweep")])

        runs[0].set()
        await until(lambda: len(runs) == 2)  # the next due run, enqueued once the first finished
        assert most_at_once == 1
    finally:
        for done in runs:
            done.set()
        main.cancel()
        await asyncio.gather(main, return_exceptions=True)
        discard_jobs(sync, queue, queued_jobs(sync, queue))
        await worker.close()
        sync.close()


async def _sweep_left_as(pool: ArqRedis, job_id: str, how: str) -> None:
    """Leave the sweep ``job_id`` queued the way a failure before its body finds it. ``killed``: its one
    try was counted by a worker killed mid-run (the retry counter ARQ increments at each start; the
    in-progress lease lapsed). ``expired``: its queue entry without its job record (a poll that started it
    again in the instant before the previous run's finish removed both)."""
    if how == "killed":
        await pool.enqueue_job(job_id.removeprefix("cron:"), _job_id=job_id)
        await pool.set(retry_key_prefix + job_id, 1)
    else:
        await pool.zadd(Queue.chat.value, {job_id: 1})


@pytest.mark.parametrize("how", ["killed", "expired"])
async def test_a_sweep_that_fails_before_it_runs_does_not_block_the_next_one(
    settings, redis_url: str, how: str
):  # type: ignore[no-untyped-def]
    """ARQ keeps the result of "max retries exceeded" and "expired" for the worker's keep_result (an hour),
    whatever the job's keep_result, and refuses to enqueue an id with a result: with ARQ's own worker the
    sweep would stop for an hour (seen once in CI); the project's worker keeps none."""
    pool, sync = await create_pool(RedisSettings.from_dsn(redis_url)), Redis.from_url(redis_url)
    job_id = sweep_job_id("deliver_outbox_sweep")
    try:
        await _sweep_left_as(pool, job_id, how)
        await _run_queued(settings, Worker)  # ARQ's own: the result blocks the id
        assert queued_jobs(sync, Queue.chat.value) == []
        assert await pool.exists(result_key_prefix + job_id) == 1
        assert await pool.enqueue_job("deliver_outbox_sweep", _job_id=job_id) is None
        await pool.delete(result_key_prefix + job_id)

        await _sweep_left_as(pool, job_id, how)
        await _run_queued(settings)  # QueueWorker, what the services run
        assert queued_jobs(sync, Queue.chat.value) == []
        assert (
            await pool.exists(job_key_prefix + job_id, result_key_prefix + job_id, retry_key_prefix + job_id)
            == 0
        )

        worker = _worker(build_chat_worker_settings(settings), pool)  # the next tick enqueues it again
        await _heartbeats(worker, datetime.now(worker.timezone) - timedelta(hours=1), 10)
        assert job_id in queued_jobs(sync, Queue.chat.value)
    finally:
        discard_jobs(sync, Queue.chat.value, queued_jobs(sync, Queue.chat.value))
        await pool.delete(result_key_prefix + job_id, retry_key_prefix + job_id)
        await pool.aclose()
        sync.close()
