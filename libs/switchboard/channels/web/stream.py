"""A visitor's stream: every event their widget shows, persisted with a sequence, plus live notices.

Persisted (``web_chat_events``): replies (the AI's or a person's) and the visitor's own messages
(so another tab, or the same tab after a reload, shows the whole chat). ``seq`` is 1, 2, 3... per
stream ``(widget, address)`` and is the Server-Sent-Events ``id``: a widget that reconnects with
``Last-Event-ID: n`` gets exactly the events after ``n``, none lost and none twice. Appends to one
stream take a transaction-scoped advisory lock, so sequence order is commit order.

A visitor's message that was read keeps it (``"read": true`` in its payload, :func:`mark_visitor_read`),
so a widget that reloads still shows it read: its state never goes back to "sent".

Live: after each append (and for the ephemeral ``typing`` and ``seen`` notices, which are never
stored) a message is published on the Redis channel of the stream (:func:`live_channel`); an open
stream wakes on it and reads the new rows, and also looks every ``WEB_STREAM_POLL_S`` seconds, so a
lost notice only delays an event.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from sqlalchemy import text
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

__all__ = [
    "StreamEvent",
    "append_event",
    "event_external_id",
    "events_after",
    "live_channel",
    "mark_visitor_read",
    "notify",
]

_APPEND = text(
    """
    INSERT INTO web_chat_events (tenant_id, channel_account_id, address, seq, kind, external_id, payload)
    SELECT CAST(:tenant AS uuid), CAST(:account AS uuid), CAST(:address AS varchar),
           coalesce((SELECT max(seq) FROM web_chat_events
                     WHERE channel_account_id = CAST(:account AS uuid) AND address = CAST(:address AS varchar)), 0) + 1,
           CAST(:kind AS varchar), CAST(:external_id AS varchar), CAST(:payload AS jsonb)
    RETURNING seq
    """
)
_EXISTING = text(
    "SELECT seq FROM web_chat_events WHERE channel_account_id = CAST(:account AS uuid) "
    "AND address = CAST(:address AS varchar) AND external_id = CAST(:external_id AS varchar)"
)
_READ = text(
    "UPDATE web_chat_events SET payload = payload || '{\"read\": true}'::jsonb "
    "WHERE channel_account_id = CAST(:account AS uuid) AND address = CAST(:address AS varchar) "
    "AND external_id = CAST(:external_id AS varchar) AND kind = 'visitor' "
    "AND NOT coalesce((payload ->> 'read')::boolean, false)"
)
_AFTER = text(
    "SELECT seq, kind, external_id, payload, created_at FROM web_chat_events "
    "WHERE channel_account_id = :account AND address = :address AND seq > :after ORDER BY seq LIMIT :limit"
)


@dataclass(frozen=True)
class StreamEvent:
    """One persisted event as the widget gets it."""

    seq: int
    kind: str
    external_id: str
    payload: dict[str, Any]
    created_at: Any

    def to_json(self) -> str:
        return json.dumps(
            {
                "type": self.kind,
                "id": self.external_id,
                "seq": self.seq,
                "at": self.created_at.isoformat(),
                **self.payload,
            },
            ensure_ascii=False,
        )


def event_external_id(correlation_id: str) -> str:
    """The provider id a reply gets: derived from the outbox row's correlation id, so a send that runs
    again finds the event it already appended instead of appending it twice."""
    return "web." + hashlib.sha256(correlation_id.encode()).hexdigest()[:40]


def live_channel(account_id: uuid.UUID | str, address: str) -> str:
    """The Redis pub/sub channel of one stream."""
    return f"web:live:{account_id}:{hashlib.sha256(address.encode()).hexdigest()[:32]}"


async def append_event(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    account_id: uuid.UUID,
    address: str,
    kind: str,
    external_id: str,
    payload: dict[str, Any],
) -> int:
    """Append one event to the stream (once per ``external_id``) in ``session``'s transaction; returns
    its ``seq``. The caller commits, then :func:`notify`\\ s."""
    params = {"account": str(account_id), "address": address, "external_id": external_id}
    # the lock first, then the look-up: a second append of the same id waits and then finds the first
    await session.exec(  # type: ignore[call-overload]
        text(
            "SELECT pg_advisory_xact_lock(hashtextextended(CAST(:account AS text) || '/' || CAST(:address AS text), 7))"
        ),
        params=params,
    )
    existing = (await session.exec(_EXISTING, params=params)).scalar()  # type: ignore[call-overload]
    if existing is not None:
        return int(existing)
    seq = (
        await session.exec(  # type: ignore[call-overload]
            _APPEND,
            params={**params, "tenant": str(tenant_id), "kind": kind, "payload": json.dumps(payload)},
        )
    ).scalar_one()
    return int(seq)


async def mark_visitor_read(
    session: AsyncSession, *, account_id: uuid.UUID, address: str, external_id: str
) -> bool:
    """Record that the visitor's message ``external_id`` was read, in ``session``'s transaction (the
    caller commits); ``False`` when it was recorded already or the stream has no such message."""
    result = await session.exec(  # type: ignore[call-overload]
        _READ, params={"account": str(account_id), "address": address, "external_id": external_id[:64]}
    )
    return bool(result.rowcount)


async def events_after(
    sessions: async_sessionmaker[AsyncSession],
    account_id: uuid.UUID,
    address: str,
    after: int,
    *,
    limit: int = 200,
) -> list[StreamEvent]:
    """The stream's events with ``seq > after``, oldest first (at most ``limit``)."""
    async with sessions() as session:
        rows = (
            await session.exec(  # type: ignore[call-overload]
                _AFTER, params={"account": account_id, "address": address, "after": after, "limit": limit}
            )
        ).all()
    return [StreamEvent(int(r.seq), r.kind, r.external_id, dict(r.payload), r.created_at) for r in rows]


async def notify(redis: Redis, account_id: uuid.UUID | str, address: str, notice: dict[str, Any]) -> None:
    """Publish ``notice`` (``{"type": "new"}``, ``typing``, ``seen``) to the stream's open connections."""
    await redis.publish(live_channel(account_id, address), json.dumps(notice))
