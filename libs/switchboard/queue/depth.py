"""Queue depth: how many jobs wait to run in each ARQ queue, and that count as a CloudWatch metric.

ARQ keeps a queue as a Redis sorted set of job ids scored by the time (ms since the epoch) each may
run; jobs deferred to later (retries, debounce) have a future score. The depth that says "more
workers would help" is the ready ones that no worker runs yet (:func:`queue_depths`).

The ECS deployment (``infra/terraform``) scales each worker service on this number. It is published
without an AWS SDK: ``switchboard queue depth --emf`` prints one line per queue in CloudWatch's
embedded metric format (EMF), which the ``awslogs`` log driver ships to CloudWatch Logs, where it
becomes the metric ``QueueDepth`` (namespace :data:`METRIC_NAMESPACE`, dimension ``Queue``). Format:
https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from arq.constants import in_progress_key_prefix
from redis.asyncio import Redis

__all__ = ["METRIC_NAMESPACE", "METRIC_NAME", "queue_depths", "emf_record"]

METRIC_NAMESPACE = "Switchboard/Queues"
"""CloudWatch namespace of the queue metrics (``infra/terraform/modules/ecs_service`` scales on it)."""
METRIC_NAME = "QueueDepth"


CHECK_CHUNK = 500
"""Job ids checked for an in-progress key per Redis round trip."""


async def queue_depths(redis: Redis, queues: Iterable[str], *, now_ms: int | None = None) -> dict[str, int]:
    """Jobs waiting to run per queue name: score at most ``now_ms`` (default now) and not running.

    Deferred jobs (a future score) are not counted, nor jobs a worker runs: ARQ leaves a running job's
    id in the queue's sorted set until it finishes, marked by its ``arq:in-progress:<id>`` key, so a
    plain count says "1 waiting" while an idle worker runs its own sweep.

    Raises:
        redis.RedisError: Redis is unreachable.
    """
    now = int(time.time() * 1000) if now_ms is None else now_ms
    depths: dict[str, int] = {}
    for queue in queues:
        ready = [
            i.decode() if isinstance(i, bytes) else str(i)
            for i in await redis.zrangebyscore(queue, "-inf", now)
        ]
        running = 0
        for start in range(0, len(ready), CHECK_CHUNK):
            pipe = redis.pipeline(transaction=False)
            for job_id in ready[start : start + CHECK_CHUNK]:
                pipe.exists(in_progress_key_prefix + job_id)
            running += sum(1 for found in await pipe.execute() if found)
        depths[queue] = len(ready) - running
    return depths


def emf_record(queue: str, depth: int, *, timestamp_ms: int) -> dict[str, Any]:
    """One CloudWatch embedded-metric-format document: ``QueueDepth`` = ``depth`` (Count) for ``queue``."""
    return {
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [
                {
                    "Namespace": METRIC_NAMESPACE,
                    "Dimensions": [["Queue"]],
                    "Metrics": [{"Name": METRIC_NAME, "Unit": "Count"}],
                }
            ],
        },
        "Queue": queue,
        METRIC_NAME: depth,
    }
