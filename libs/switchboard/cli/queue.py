"""``switchboard queue depth``: ready jobs per ARQ queue (and the CloudWatch metric the workers scale on)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Annotated

import typer

from switchboard.cli.root import queue_app
from switchboard.cli.runner import command_settings, friendly_errors

__all__ = ["queue_depth"]


@queue_app.command("depth")
@friendly_errors
def queue_depth(
    emf: Annotated[
        bool,
        typer.Option(
            "--emf",
            help="Print CloudWatch embedded-metric-format JSON lines (metric QueueDepth, namespace "
            "Switchboard/Queues, dimension Queue): the awslogs driver turns them into the metric the ECS "
            "workers scale on.",
        ),
    ] = False,
    every: Annotated[
        float | None,
        typer.Option(
            help="Repeat every this many seconds until stopped (the queue_metrics service: 60).", min=1
        ),
    ] = None,
) -> None:
    """Print how many jobs are ready in each queue (chat, background); deferred jobs are not counted."""
    from redis.asyncio import Redis

    from switchboard.queue.depth import emf_record, queue_depths
    from switchboard.queue.queues import Queue
    from switchboard.runtime.resources import live_run_state, require_redis_url

    settings = command_settings()
    state = live_run_state(settings) or {}
    url = settings.redis_url or state.get("embedded_redis_url") or require_redis_url(settings)

    async def once(redis: Redis) -> None:
        now = int(time.time() * 1000)
        for queue, depth in (await queue_depths(redis, [q.value for q in Queue], now_ms=now)).items():
            name = Queue(queue).name
            if emf:
                typer.echo(json.dumps(emf_record(name, depth, timestamp_ms=now), separators=(",", ":")))
            else:
                typer.echo(f"{name:<12} {depth}")

    async def go() -> None:
        redis = Redis.from_url(url, socket_connect_timeout=5, socket_timeout=5)
        try:
            await once(redis)
            while every is not None:
                await asyncio.sleep(every)
                await once(redis)
        finally:
            await redis.aclose()

    asyncio.run(go())
