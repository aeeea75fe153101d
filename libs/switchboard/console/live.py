"""Live updates for the console: Redis pub/sub in, server-sent events out.

What changed is published with :mod:`switchboard.live_updates`; every open inbox or conversation page
of that tenant receives it as an SSE ``conversation`` event and asks htmx to reload the part that
changed.

A stream lives only as long as the session that opened it: it re-checks the session every
``console_stream_check_s`` seconds, and at once when :func:`publish_session_change` says the user's
sessions changed (logout, password change), and ends (a last ``ended`` event) when the session is gone:
logged out, expired, its user deactivated or the password changed.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import Request
from sse_starlette import EventSourceResponse, ServerSentEvent

from switchboard.live_updates import tenant_channel, user_channel
from switchboard.observability import get_logger

__all__ = ["live_events", "SSE_PING_S"]

log = get_logger(__name__)

SSE_PING_S = 15
"""Keep-alive comment interval of the event stream (proxies close idle connections)."""
_POLL_S = 1.0
"""How long one wait for a pub/sub message lasts before checking whether the browser left."""


def live_events(
    request: Request,
    redis: Any,
    *,
    tenant_id: uuid.UUID,
    user_id: uuid.UUID,
    session_alive: Callable[[], Awaitable[bool]],
    check_s: float,
) -> EventSourceResponse:
    """An SSE response streaming the tenant's console events until the browser goes away or the
    session ends.

    Args:
        user_id: the viewer; a message on :func:`user_channel` makes the stream re-check at once.
        session_alive: ``True`` while the session that opened the stream may still see the tenant
            (its own short database session: the stream holds no connection between checks).
        check_s: seconds between two checks of ``session_alive``.
    """
    personal = user_channel(user_id)

    async def stream() -> AsyncIterator[ServerSentEvent]:
        pubsub = redis.pubsub()
        await pubsub.subscribe(tenant_channel(tenant_id), personal)
        loop = asyncio.get_running_loop()
        next_check = loop.time() + check_s
        try:
            yield ServerSentEvent(data="{}", event="ready")
            while not await request.is_disconnected():
                wait_s = max(0.0, min(_POLL_S, next_check - loop.time()))
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=wait_s)
                channel = message.get("channel") if message else None
                if isinstance(channel, bytes):
                    channel = channel.decode()
                if channel == personal or loop.time() >= next_check:
                    next_check = loop.time() + check_s
                    if not await session_alive():
                        log.info("console_stream_ended", user_id=str(user_id), reason="session")
                        yield ServerSentEvent(data='{"reason": "session"}', event="ended")
                        return
                if message is None or channel == personal:
                    await asyncio.sleep(0)
                    continue
                data = message.get("data")
                yield ServerSentEvent(
                    data=data.decode() if isinstance(data, bytes) else str(data), event="conversation"
                )
        finally:
            await pubsub.unsubscribe()
            await pubsub.aclose()

    return EventSourceResponse(stream(), ping=SSE_PING_S, headers={"Cache-Control": "no-store"})
