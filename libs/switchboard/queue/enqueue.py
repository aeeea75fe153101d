"""Enqueue several ARQ jobs in ONE Redis round trip (the webhook hot path).

``ArqRedis.enqueue_job`` costs three round trips per job (``WATCH``, ``EXISTS``, ``MULTI``/``PSETEX``/
``ZADD``/``EXEC``). :func:`enqueue_jobs` does the same for any number of jobs in one ``EVALSHA``: a Lua
script runs atomically in Redis (Redis docs, "Scripting with Lua": no other command runs in between),
so the check "no job and no result under this id" and the write cannot race, which is what ARQ's
``WATCH`` buys. The stored job is byte-for-byte what ``enqueue_job`` writes (``arq.jobs.serialize_job``
with the pool's serializer, key ``arq:job:<id>`` with the same expiry, score in the queue's sorted set),
so an unchanged ARQ worker runs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from arq.connections import ArqRedis
from arq.constants import job_key_prefix, result_key_prefix
from arq.jobs import serialize_job
from arq.utils import timestamp_ms

__all__ = ["JobSpec", "enqueue_jobs"]

_ENQUEUE = """
local queue = KEYS[1]
local out = {}
for i = 1, (#KEYS - 1) / 2 do
  local a = (i - 1) * 4
  if redis.call('EXISTS', KEYS[2 * i], KEYS[2 * i + 1]) > 0 then
    out[i] = 0
  else
    redis.call('PSETEX', KEYS[2 * i], ARGV[a + 1], ARGV[a + 4])
    redis.call('ZADD', queue, ARGV[a + 2], ARGV[a + 3])
    out[i] = 1
  end
end
return out
"""
"""KEYS: queue, then (job key, result key) per job; ARGV: (expires ms, score ms, job id, job bytes) per job."""

_SCRIPT_ATTR = "_switchboard_enqueue_script"


@dataclass(frozen=True)
class JobSpec:
    """One job for :func:`enqueue_jobs` (the arguments of ``ArqRedis.enqueue_job``)."""

    function: str
    job_id: str
    """Idempotency key: a job whose id is queued, running or has a kept result is not enqueued again."""
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    defer_s: float = 0.0
    """Run no earlier than this many seconds from now."""
    ahead_s: float = 0.0
    """Queue it as if it had been enqueued this many seconds ago: ARQ's workers take the lowest score
    first, so it runs before every job queued less than ``ahead_s`` ago (a priority lane for short work
    that cannot wait behind a backlog, such as copying a link that dies in minutes)."""


async def enqueue_jobs(
    redis: ArqRedis, jobs: Sequence[JobSpec], *, queue_name: str | None = None
) -> list[bool]:
    """Enqueue ``jobs`` on ``queue_name`` (default: the pool's) in one round trip.

    Returns:
        Per job, in order: ``True`` if enqueued now, ``False`` if its id already existed (ARQ's ``None``).

    Raises:
        redis.exceptions.RedisError / OSError: Redis unavailable; then none or all of the jobs were written
            (the script is atomic), and the caller's sweeper re-enqueues durable work.
    """
    if not jobs:
        return []
    script = getattr(redis, _SCRIPT_ATTR, None)
    if script is None:  # one Script per pool: it falls back to EVAL once after a Redis restart
        script = redis.register_script(_ENQUEUE)
        setattr(redis, _SCRIPT_ATTR, script)
    now = timestamp_ms()
    keys: list[str] = [queue_name or redis.default_queue_name]
    argv: list[Any] = []
    for job in jobs:
        defer_ms = max(0, round(job.defer_s * 1000))
        keys += [job_key_prefix + job.job_id, result_key_prefix + job.job_id]
        payload = serialize_job(
            job.function, job.args, job.kwargs, None, now, serializer=redis.job_serializer
        )
        ahead_ms = max(0, round(job.ahead_s * 1000))
        argv += [defer_ms + redis.expires_extra_ms, now + defer_ms - ahead_ms, job.job_id, payload]
    created = await script(keys=keys, args=argv)
    return [bool(flag) for flag in created]
