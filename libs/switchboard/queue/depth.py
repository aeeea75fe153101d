"""Queue depth: how many jobs are ready to run in each ARQ queue, and that count as a CloudWatch metric.

ARQ keeps a queue as a Redis sorted set of job ids scored by the time (ms since the epoch) each may
run; jobs deferred to later (retries, debounce) have a future score. The depth that says "more
workers would help" is the ready ones: ``ZCOUNT queue -inf now``.

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

from redis.asyncio import Redis

__all__ = ["METRIC_NAMESPACE", "METRIC_NAME", "queue_depths", "emf_record"]

METRIC_NAMESPACE = "Switchboard/Queues"
"""CloudWatch namespace of the queue metrics (``infra/terraform/modules/ecs_service`` scales on it)."""
METRIC_NAME = "QueueDepth"


async def queue_depths(redis: Redis, queues: Iterable[str], *, now_ms: int | None = None) -> dict[str, int]:
    """Ready jobs per queue name (score at most ``now_ms``, default now); deferred jobs are not counted.

    Raises:
        redis.RedisError: Redis is unreachable.
    """
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return {queue: int(await redis.zcount(queue, "-inf", now)) for queue in queues}


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
