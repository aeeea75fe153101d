"""The worker's heartbeat: valid for three refreshes (a loop held a second is not a dead worker), and its
``queued`` count is what waits to run, not a job the worker is running or one deferred to later."""

from __future__ import annotations

import time
import uuid

from switchboard.queue import Queue, health_check_key
from switchboard.queue.running import HEALTH_CHECK_INTERVAL_S, HEALTH_KEY_TTL_S, QueueWorker
from switchboard.runtime.supervisor import describe_heartbeat
from switchboard.worker import WORKER_SETTINGS_BUILDERS


async def test_heartbeat_outlives_a_held_loop_and_counts_only_waiting_jobs(settings, arq_pool):
    cls = WORKER_SETTINGS_BUILDERS[Queue.background](settings)
    kwargs = {k: v for k, v in vars(cls).items() if not k.startswith("__")}
    kwargs.pop("cron_jobs", None)
    worker = QueueWorker(**kwargs, redis_pool=arq_pool, handle_signals=False)
    queue, key = Queue.background.value, health_check_key(Queue.background)
    now_ms = int(time.time() * 1000)
    running, later = f"running-{uuid.uuid4().hex[:8]}", f"later-{uuid.uuid4().hex[:8]}"
    await arq_pool.zadd(queue, {running: now_ms - 5_000, later: now_ms + 600_000})
    await arq_pool.set(f"arq:in-progress:{running}", b"1", px=60_000)  # its own sweep, running
    try:
        await worker.record_health()
        line = (await arq_pool.get(key)).decode()
        ttl_ms = await arq_pool.pttl(key)
    finally:
        await arq_pool.zrem(queue, running, later)
        await arq_pool.delete(f"arq:in-progress:{running}", key)
    assert HEALTH_KEY_TTL_S >= 3 * HEALTH_CHECK_INTERVAL_S
    assert (HEALTH_KEY_TTL_S - 1) * 1000 < ttl_ms <= HEALTH_KEY_TTL_S * 1000
    assert line.endswith("j_ongoing=0 queued=0"), line
    assert describe_heartbeat(line).endswith(
        "s ago: j_complete=0 j_failed=0 j_retried=0 j_ongoing=0 queued=0"
    )
