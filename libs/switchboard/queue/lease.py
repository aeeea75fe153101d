"""Leases: a Redis key kept alive by a live holder only, so a killed holder's claim lapses in seconds.

ARQ marks a running job with ``arq:in-progress:<job id>`` for the worker's *largest* job timeout
+ 10 s (arq #402; 210 s on the chat worker), and the inbound job's conversation lock had the same
lifetime: a worker killed mid-turn (``kill -9``, OOM) left its customer without an answer for 3.5
minutes. With a lease the key lives :data:`LEASE_S` and the holder renews it every
:data:`RENEW_EVERY_S` while it runs; once the holder is gone the key expires within ``LEASE_S``
and the job runs again (ARQ picks a queued job whose in-progress key is gone). The renewals run in a
thread, so a job that blocks its event loop keeps its lease (ARQ would otherwise start it a second time
in the same worker); only a process too starved to run that thread for ``LEASE_S`` loses it, and the
jobs are idempotent (at-least-once): a second run is safe, only wasted.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator
from typing import Any

from switchboard.observability import get_logger

__all__ = ["LEASE_S", "RENEW_EVERY_S", "lease", "arq_in_progress_key"]

log = get_logger(__name__)

LEASE_S = 30.0
"""Lifetime of a leased key without renewal (seconds): how long a dead holder's claim outlives it."""
RENEW_EVERY_S = 5.0
"""How often a live holder renews (seconds); a stall of ``LEASE_S - RENEW_EVERY_S`` loses the lease."""

# PEXPIRE only while the key still holds our token (a lapsed lease taken by someone else stays theirs).
_RENEW_IF_OURS = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
return 0
"""


def arq_in_progress_key(job_id: str) -> str:
    """ARQ's marker of a running job (``arq.constants.in_progress_key_prefix`` + id)."""
    from arq.constants import in_progress_key_prefix

    return in_progress_key_prefix + job_id


def _sync_client(redis: Any) -> Any:
    """A blocking client to the same server as ``redis`` (an asyncio client or ARQ pool)."""
    import redis as redis_sync

    kwargs = redis.connection_pool.connection_kwargs
    return redis_sync.Redis(
        host=kwargs.get("host", "localhost"),
        port=kwargs.get("port", 6379),
        db=kwargs.get("db", 0),
        username=kwargs.get("username"),
        password=kwargs.get("password"),
        socket_timeout=2.0,
        socket_connect_timeout=2.0,
    )


def _renew(
    client: Any, key: str, token: str | None, lease_s: float, every_s: float, stop: threading.Event
) -> None:
    ttl_ms = int(lease_s * 1000)
    try:
        while True:
            try:
                if token is None:
                    client.pexpire(key, ttl_ms)  # no-op once the key is gone (the job finished)
                else:
                    client.eval(_RENEW_IF_OURS, 1, key, token, ttl_ms)
            except Exception as exc:  # noqa: BLE001 (Redis down: the next renewal tries again; logged)
                log.warning("lease_renew_failed", key=key, error=type(exc).__name__)
            if stop.wait(every_s):
                return
    finally:
        client.close()


@contextlib.asynccontextmanager
async def lease(
    redis: Any,
    key: str,
    *,
    token: str | None = None,
    lease_s: float = LEASE_S,
    every_s: float = RENEW_EVERY_S,
) -> AsyncIterator[None]:
    """Keep ``key`` (set by someone before) alive for ``lease_s`` seconds past the last renewal while the
    body runs: its TTL is set to ``lease_s`` at once, then renewed every ``every_s`` seconds.

    The renewals run in a thread of their own with a blocking client, not on the event loop: a job that
    blocks its loop (a first import of a heavy module on a loaded machine took over 30 s) must not lose
    its lease and be started a second time by the same worker.

    Args:
        redis: a ``redis.asyncio.Redis`` (ARQ's pool is one): the server the key lives on.
        key: the key; a missing key is not created.
        token: renew only while the key's value equals it (a lock holder's token).

    Never raises for Redis errors (a failed renewal is logged and tried again).
    """
    stop = threading.Event()
    thread = threading.Thread(
        target=_renew,
        args=(_sync_client(redis), key, token, lease_s, every_s, stop),
        daemon=True,
        name=f"lease {key[:60]}",
    )
    thread.start()
    try:
        yield
    finally:
        stop.set()  # the thread ends at its next wake-up; a late renewal of a deleted key is a no-op
