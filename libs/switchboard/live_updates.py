"""Live updates, publish side: tell open console pages that a conversation or a user's sessions changed.

Whoever changes a conversation (the inbound job when a message arrives or is answered, the delivery
loop when a part is sent, a console action) calls :func:`publish_conversation_event`; the console's
event stream (:mod:`switchboard.console.live`) forwards it to every open page of that tenant.
Publishing is best effort: a Redis hiccup is logged, never raised (the page also refreshes when the
person acts, and on reload).

Channels (Redis pub/sub): ``console:tenant:<tenant_id>``, message JSON ``{"conversation_id", "kind"}``;
``console:user:<user_id>``, message ``session``.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from switchboard.observability import get_logger

__all__ = ["tenant_channel", "user_channel", "publish_conversation_event", "publish_session_change"]

log = get_logger(__name__)


def tenant_channel(tenant_id: uuid.UUID | str) -> str:
    """The Redis pub/sub channel of one tenant's console events."""
    return f"console:tenant:{tenant_id}"


def user_channel(user_id: uuid.UUID | str) -> str:
    """The Redis pub/sub channel saying one console user's sessions changed."""
    return f"console:user:{user_id}"


async def publish_session_change(redis: Any, *, user_id: uuid.UUID | str) -> None:
    """Tell the user's open streams to re-check their session now (best effort, never raises; the
    periodic check ends them anyway)."""
    if redis is None:
        return
    try:
        await redis.publish(user_channel(user_id), "session")
    except Exception as exc:  # noqa: BLE001 (the periodic re-check is the guarantee)
        log.warning("console_publish_failed", user_id=str(user_id), error=type(exc).__name__)


async def publish_conversation_event(
    redis: Any, *, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str | None, kind: str
) -> None:
    """Tell the tenant's open console pages that a conversation changed (best effort, never raises).

    Args:
        redis: a redis-py asyncio client (a service's or worker's ARQ pool); ``None``: nothing is sent.
        kind: what happened: ``message`` (a customer message), ``reply`` (an answer was written),
            ``delivery`` (a part was sent or its status moved), ``status`` (mode or assignee changed).
    """
    if redis is None:
        return
    payload = json.dumps({"conversation_id": str(conversation_id) if conversation_id else None, "kind": kind})
    try:
        await redis.publish(tenant_channel(tenant_id), payload)
    except Exception as exc:  # noqa: BLE001 (live updates are a convenience; the data is stored)
        log.warning("console_publish_failed", tenant_id=str(tenant_id), error=type(exc).__name__)
