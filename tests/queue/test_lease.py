"""Leases: a killed worker's job and conversation lock lapse within ``LEASE_S``, not after 210 s.

Before them a worker killed mid-turn (``kill -9``) left ``arq:in-progress:<id>`` for the chat worker's
largest timeout + 10 s (arq #402) and the conversation lock as long: the customer waited 3.5 minutes
(``loadtests/faults.py``, case ``worker_kill_turn``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

from arq.connections import ArqRedis
from switchboard.queue.lease import LEASE_S, arq_in_progress_key, lease

ROOT = Path(__file__).resolve().parents[2]

WORKER = textwrap.dedent(
    """
    import asyncio, sys
    from arq.connections import RedisSettings
    from arq.worker import Worker, func
    from switchboard.queue.queues import Queue
    from switchboard.queue.running import observed_job

    url, queue, started = sys.argv[1:4]

    async def stuck(ctx):
        await ctx["redis"].set(started, "1", ex=60)
        await asyncio.sleep(3600)

    Worker(
        functions=[func(observed_job("stuck", Queue.chat, stuck), name="stuck", timeout=200)],
        redis_settings=RedisSettings.from_dsn(url), queue_name=queue, poll_delay=0.05,
        handle_signals=False,
    ).run()
    """
)


async def _wait_for(predicate, timeout_s: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not await predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_a_killed_workers_job_is_in_progress_for_the_lease_only(redis_url: str, arq_pool: ArqRedis):
    queue, job_id, started = (
        f"test:lease:{uuid.uuid4().hex}",
        uuid.uuid4().hex,
        f"test:started:{uuid.uuid4().hex}",
    )
    worker = subprocess.Popen(  # noqa: ASYNC220 (returns at once; killed below)
        [sys.executable, "-c", WORKER, redis_url, queue, started],
        env={**os.environ, "PYTHONPATH": str(ROOT / "libs")},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert await arq_pool.enqueue_job("stuck", _job_id=job_id, _queue_name=queue) is not None

        async def running() -> bool:
            return bool(await arq_pool.exists(started))

        await _wait_for(running, 300.0)  # the child imports the worker module: slow on a loaded machine
        key = arq_in_progress_key(job_id)

        async def leased() -> bool:
            return 0 < await arq_pool.pttl(key) <= LEASE_S * 1000

        await _wait_for(leased, 5.0)  # arq set it to 210 s; the lease shortened it at once
        await asyncio.sleep(0.3)
        assert await arq_pool.pttl(key) > (LEASE_S - 5) * 1000  # renewed, not decaying from the start
        worker.send_signal(signal.SIGKILL)  # mid-job, as kill -9 or the OOM killer does
        worker.wait(10)
        ttl_ms = await arq_pool.pttl(key)
        assert 0 < ttl_ms <= LEASE_S * 1000  # the job is picked again within LEASE_S, not 210 s
        assert await arq_pool.zscore(queue, job_id) is not None  # still queued: it will run again
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(10)
        await arq_pool.delete(queue, f"arq:job:{job_id}", arq_in_progress_key(job_id), started)


async def test_a_lease_keeps_its_key_alive_while_the_holder_runs_and_lapses_after(arq_pool: ArqRedis):
    key = f"test:lease:{uuid.uuid4().hex}"
    await arq_pool.set(key, "token-1", px=600_000)
    async with lease(arq_pool, key, token="token-1", lease_s=0.5, every_s=0.1):
        await asyncio.sleep(0.2)
        assert 0 < await arq_pool.pttl(key) <= 500
        await asyncio.sleep(0.8)  # longer than the lease: renewed meanwhile
        assert await arq_pool.get(key) == b"token-1"
    await asyncio.sleep(0.7)
    assert await arq_pool.exists(key) == 0  # the holder is gone: the lease lapsed


async def test_a_lease_never_renews_someone_elses_lock_nor_creates_a_missing_key(arq_pool: ArqRedis):
    theirs, missing = f"test:lease:{uuid.uuid4().hex}", f"test:lease:{uuid.uuid4().hex}"
    await arq_pool.set(theirs, "their-token", px=400)
    async with (
        lease(arq_pool, theirs, token="our-token", lease_s=5, every_s=0.05),
        lease(arq_pool, missing, lease_s=5, every_s=0.05),
    ):
        await asyncio.sleep(0.15)
        assert await arq_pool.pttl(theirs) <= 400
        assert await arq_pool.exists(missing) == 0
    await arq_pool.delete(theirs)
