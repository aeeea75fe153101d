"""Sliding-window rate limits in Redis, each one atomic (one Lua script, so two workers can never both
take the last slot).

A window is a sorted set of members (the inbound row ids) scored by time. Counting a member twice
(a re-run of the same job) takes no second slot.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from arq.connections import ArqRedis

__all__ = ["WindowCount", "count_in_window", "take_slot"]

# KEYS[1]: the window; ARGV: now, window seconds, member, limit (0: count only, never refuse).
# Returns {count after, 1 if the member was already there, 1 if allowed}.
_SLIDING_WINDOW = """
local now, window, member, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[1], 0, now - window)
if redis.call('ZSCORE', KEYS[1], member) then
  return {redis.call('ZCARD', KEYS[1]), 1, 1}
end
local count = redis.call('ZCARD', KEYS[1])
if limit > 0 and count >= limit then
  return {count, 0, 0}
end
redis.call('ZADD', KEYS[1], now, member)
redis.call('EXPIRE', KEYS[1], math.ceil(window) + 1)
return {count + 1, 0, 1}
"""


@dataclass(frozen=True)
class WindowCount:
    """What one look at a window found."""

    count: int
    """Members in the window now (including this one when it was added)."""
    seen: bool
    """The member was already counted (a re-run)."""
    allowed: bool
    """The member has a slot (always ``True`` for :func:`count_in_window`)."""


async def _run(redis: ArqRedis, key: str, member: str, window_s: float, limit: int) -> WindowCount:
    count, seen, allowed = await redis.eval(_SLIDING_WINDOW, 1, key, time.time(), window_s, member, limit)
    return WindowCount(count=int(count), seen=bool(seen), allowed=bool(allowed))


async def count_in_window(redis: ArqRedis, key: str, member: str, window_s: float) -> WindowCount:
    """Add ``member`` (once) and count the window; never refuses (the per-customer limit decides on
    the count: over it, one polite reply)."""
    return await _run(redis, key, member, window_s, 0)


async def take_slot(redis: ArqRedis, key: str, member: str, window_s: float, limit: int) -> WindowCount:
    """Take one of ``limit`` slots in the window for ``member`` (a member that has one keeps it).

    Raises:
        ValueError: ``limit`` is smaller than 1.
    """
    if limit < 1:
        raise ValueError("limit must be at least 1")
    return await _run(redis, key, member, window_s, limit)
