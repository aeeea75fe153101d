"""Delivery statuses of our own messages → outbox rows that only move forward (never answered).

Providers do not promise order and may skip steps (WhatsApp: ``read`` before ``delivered``, no
``delivered`` at all), and they deliver callbacks at least once. So a status only moves a row
forward along :data:`STATUS_RANK` (``pending < sending < sent < delivered < read < played``);
``failed`` replaces anything before ``read``; nothing moves a ``failed`` row; the same status twice
changes nothing. Each conversation whose rows moved gets a console live event (``delivery``), so an
open conversation page updates its ticks (sent, delivered, read, failed) without a reload.

A status finds its row by ``(channel, external_id)``; when the row has no provider id yet (still
``sending``: the worker died, or the provider's answer was lost) by the correlation id the provider
echoes back (WhatsApp ``biz_opaque_callback_data``), filling ``external_id``. A status for a provider
id we have not stored yet is *parked* in Redis (at most :data:`PARKED_MAX_PER_ACCOUNT` ids per
account, each for :data:`PARKED_TTL_S`) and applied when the delivery loop records that id
(:func:`take_parked`).

The channel ingest queues one ``apply_delivery_statuses`` job per webhook delivery, its statuses as job
arguments (:func:`switchboard.channels.ingest.status_to_job_arg`); :func:`to_delivery_statuses` turns them
into :class:`DeliveryStatus` here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from redis.asyncio import Redis
from sqlalchemy import update
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.channels.sanitize import clean_text
from switchboard.db.models import Conversation, Outbox, OutboxStatus, utcnow
from switchboard.live_updates import publish_conversation_event
from switchboard.observability import get_logger
from switchboard.queue.keys import parked_status_index_key, parked_status_key

__all__ = [
    "STATUS_RANK",
    "apply_delivery_statuses",
    "to_delivery_statuses",
    "PARKED_MAX_PER_ACCOUNT",
    "PARKED_TTL_S",
    "DeliveryStatus",
    "apply_order",
    "apply_statuses",
    "next_status",
    "park_status",
    "take_parked",
]

log = get_logger(__name__)

STATUS_RANK: dict[str, int] = {
    OutboxStatus.pending.value: 0,  # written, not yet handed to the provider
    OutboxStatus.sending.value: 1,  # handed to the provider, its answer not recorded yet
    OutboxStatus.sent.value: 2,  # the provider accepted it
    OutboxStatus.delivered.value: 3,  # it reached the recipient's device
    OutboxStatus.read.value: 4,  # the recipient opened it
    OutboxStatus.played.value: 5,  # a voice message was played (WhatsApp): outranks read
}
"""Forward order of delivery states. ``failed`` is apart: it replaces any state ranked below ``read``."""
_FAILED = OutboxStatus.failed.value
_FAILED_REPLACES_BELOW = STATUS_RANK[OutboxStatus.read.value]

PARKED_TTL_S = 3600
"""How long a status for a provider id we have not stored yet is kept (seconds)."""
PARKED_MAX_PER_ACCOUNT = 1000
"""Provider ids one sending account may have parked at once; the oldest are dropped beyond it."""
PARKED_MAX_PER_MESSAGE = 16
"""Statuses kept per parked provider id (a message has a handful: sent, delivered, read, ...)."""


@dataclass(frozen=True, kw_only=True)
class DeliveryStatus:
    """One delivery status of a message we sent, in the channel-neutral shape."""

    account_id: str
    """The provider's id of the sending account (WhatsApp ``phone_number_id``)."""
    external_id: str
    """The provider's id of our message (WhatsApp ``wamid``)."""
    status: str
    """``sent`` | ``delivered`` | ``read`` | ``played`` | ``failed`` (anything else is ignored)."""
    timestamp: datetime | None = None
    """The provider's time of the status (UTC)."""
    correlation_id: str | None = None
    """Our id echoed back by the provider (``outbox.correlation_id``), when it echoes one."""
    error_code: str | None = None
    """The provider's error code of a ``failed`` status."""
    error_title: str | None = None
    conversation_reason: str | None = None
    """Text recorded on the conversation (``escalation_reason``) when this failure blocks it
    (outside the service window, undeliverable), chosen by the channel."""

    def to_json(self) -> str:
        data = asdict(self)
        data["timestamp"] = self.timestamp.isoformat() if self.timestamp else None
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: str | bytes) -> DeliveryStatus:
        data = json.loads(raw)
        stamp = data.get("timestamp")
        data["timestamp"] = datetime.fromisoformat(stamp) if stamp else None
        return cls(**data)


def apply_order(status: DeliveryStatus) -> int:
    """Sort key of statuses applied together: forward rank, ``failed`` last (a message read before
    a failure was reported stays read; ``failed`` only replaces what ranks below ``read``)."""
    return STATUS_RANK.get(status.status, len(STATUS_RANK))


def next_status(current: str, incoming: str) -> str | None:
    """The row's new status when ``incoming`` arrives while it is ``current``; ``None``: no change.

    >>> next_status("read", "delivered") is None, next_status("read", "played"), next_status("sent", "failed")
    (True, 'played', 'failed')
    """
    if current == _FAILED:
        return None
    if incoming == _FAILED:
        return _FAILED if STATUS_RANK.get(current, 0) < _FAILED_REPLACES_BELOW else None
    rank = STATUS_RANK.get(incoming)
    if rank is None or rank <= STATUS_RANK.get(current, 0):
        return None
    return incoming


async def apply_statuses(
    sessions: async_sessionmaker[AsyncSession],
    redis: Redis,
    channel: str,
    statuses: Sequence[DeliveryStatus],
) -> int:
    """Apply delivery statuses of ``channel`` (in the order given) to the outbox.

    Statuses that arrive before the send call returned the provider's id are kept: by the correlation
    id the first one fills the id and those waiting on the row's lock apply to it as well; without one
    they are parked and applied in rank order (:func:`take_parked`) when the id is stored.

    Args:
        sessions: database sessions.
        redis: where statuses for unknown provider ids are parked.
        channel: the channel name the statuses came from (``whatsapp``).
        statuses: neutral statuses (see :class:`DeliveryStatus`).

    Returns:
        The number of status changes made (0 for duplicates, regressions, parked and ignored ones).
    """
    changed = 0
    to_park: list[DeliveryStatus] = []
    filled: list[tuple[str, str]] = []  # (account_id, external_id) rows that just got their provider id
    moved: set[tuple[Any, Any]] = set()  # (tenant_id, conversation_id) whose ticks changed
    async with sessions() as session, session.begin():
        for item in statuses:
            if item.status not in STATUS_RANK and item.status != _FAILED:
                log.info(
                    "delivery_status_ignored",
                    channel=channel,
                    status=item.status,
                    external_id=item.external_id,
                )
                continue
            row = (
                await session.exec(
                    select(Outbox)
                    .where(Outbox.channel == channel, Outbox.external_id == item.external_id)
                    .with_for_update()
                )
            ).first()
            if row is None and item.correlation_id:
                row = (
                    await session.exec(
                        select(Outbox)
                        .where(Outbox.channel == channel, Outbox.correlation_id == item.correlation_id)
                        .with_for_update()
                    )
                ).first()
                if row is not None and row.external_id not in (None, item.external_id):
                    # The row is known under another provider id: a second send of it after an answer was
                    # lost (at-least-once), or one of the several messages a media part becomes.
                    log.info(
                        "delivery_status_for_other_message",
                        channel=channel,
                        outbox_id=str(row.id),
                        external_id=item.external_id,
                        stored_external_id=row.external_id,
                    )
                    continue
                if row is not None and row.external_id is None:
                    row.external_id = item.external_id
                    filled.append((item.account_id, item.external_id))
                    log.info(
                        "delivery_reconciled_by_correlation",
                        channel=channel,
                        outbox_id=str(row.id),
                        tenant_id=str(row.tenant_id),
                        conversation_id=str(row.conversation_id),
                        trace_id=row.trace_id,
                        status=item.status,
                    )
            if row is None:
                to_park.append(item)
                continue
            if await _apply_one(session, row, item):
                changed += 1
                moved.add((row.tenant_id, row.conversation_id))
    # after the commit: an open conversation page reloads its status ticks (console live updates)
    for tenant_id, conversation_id in sorted(moved, key=str):
        await publish_conversation_event(
            redis, tenant_id=tenant_id, conversation_id=conversation_id, kind="delivery"
        )
    for item in to_park:
        await park_status(redis, channel, item)
    # Statuses parked under an id before it was known (a race with the send being recorded).
    for account_id, external_id in [*filled, *((s.account_id, s.external_id) for s in to_park)]:
        late = await take_parked(redis, channel, account_id, external_id, only_if_stored=sessions)
        if late:
            changed += await apply_statuses(sessions, redis, channel, late)
    return changed


async def _apply_one(session: AsyncSession, row: Outbox, item: DeliveryStatus) -> int:
    new = next_status(row.status, item.status)
    if new is None:
        session.add(row)  # may carry a just-filled external_id
        return 0
    now = utcnow()
    row.status = new
    row.updated_at = now
    if new == _FAILED:
        row.error_code = (item.error_code or "failed")[:32]
        row.error_message = item.error_title
        log.warning(
            "delivery_failed_status",
            channel=row.channel,
            outbox_id=str(row.id),
            tenant_id=str(row.tenant_id),
            conversation_id=str(row.conversation_id),
            trace_id=row.trace_id,
            error_code=item.error_code,
        )
        if item.conversation_reason and (row.payload or {}).get("audience", "customer") == "customer":
            await session.exec(
                update(Conversation)
                .where(Conversation.id == row.conversation_id)
                .values(escalation_reason=item.conversation_reason)
            )
    else:
        row.next_attempt_at = None
        if row.sent_at is None:
            row.sent_at = item.timestamp or now
    session.add(row)
    return 1


async def park_status(
    redis: Redis,
    channel: str,
    status: DeliveryStatus,
    *,
    max_per_account: int = PARKED_MAX_PER_ACCOUNT,
    ttl_s: int = PARKED_TTL_S,
) -> None:
    """Keep ``status`` until its provider id is stored (bounded per account, see the module docstring)."""
    key = parked_status_key(channel, status.account_id, status.external_id)
    index = parked_status_index_key(channel, status.account_id)
    now = time.time()
    pipe = redis.pipeline(transaction=True)
    pipe.rpush(key, status.to_json())
    pipe.ltrim(key, -PARKED_MAX_PER_MESSAGE, -1)
    pipe.expire(key, ttl_s)
    pipe.zadd(index, {status.external_id: now})
    pipe.zremrangebyscore(index, 0, now - ttl_s)
    pipe.expire(index, ttl_s)
    pipe.zcard(index)
    count = int((await pipe.execute())[-1])
    if count > max_per_account:
        oldest = [
            m.decode() if isinstance(m, bytes) else m
            for m in await redis.zrange(index, 0, count - max_per_account - 1)
        ]
        if oldest:
            pipe = redis.pipeline(transaction=True)
            pipe.zrem(index, *oldest)
            pipe.delete(*(parked_status_key(channel, status.account_id, m) for m in oldest))
            await pipe.execute()
            log.warning(
                "delivery_parked_statuses_dropped",
                channel=channel,
                account_id=status.account_id,
                dropped=len(oldest),
            )
    log.info("delivery_status_parked", channel=channel, external_id=status.external_id, status=status.status)


async def take_parked(
    redis: Redis,
    channel: str,
    account_id: str,
    external_id: str,
    *,
    only_if_stored: async_sessionmaker[AsyncSession] | None = None,
) -> list[DeliveryStatus]:
    """Remove and return the statuses parked for one provider id, in rank order (:func:`apply_order`:
    they arrived before the id was known, in no order that means anything).

    Args:
        only_if_stored: when given, leave them parked unless an outbox row of ``channel`` already has
            ``external_id`` (the caller only wants them once they can be applied).
    """
    key = parked_status_key(channel, account_id, external_id)
    if only_if_stored is not None:
        if not await redis.exists(key):
            return []
        async with only_if_stored() as session:
            stored = (
                await session.exec(
                    select(Outbox.id)
                    .where(Outbox.channel == channel, Outbox.external_id == external_id)
                    .limit(1)
                )
            ).first()
        if stored is None:
            return []
    pipe = redis.pipeline(transaction=True)
    pipe.lrange(key, 0, -1)
    pipe.delete(key)
    pipe.zrem(parked_status_index_key(channel, account_id), external_id)
    raw, _, _ = await pipe.execute()
    return sorted((DeliveryStatus.from_json(item) for item in raw), key=apply_order)


def to_delivery_statuses(items: list[dict[str, Any]]) -> list[DeliveryStatus]:
    """Job arguments of ``apply_delivery_statuses`` as neutral statuses (items without an id are dropped).

    Strings are cleaned again (:func:`~switchboard.channels.sanitize.clean_text`): a job queued before the
    webhook cleaned its bodies may still carry a NUL, which Postgres refuses in a query parameter.
    """
    out: list[DeliveryStatus] = []
    for item in items:
        external_id = _clean_or_none(item.get("external_id"))
        if not external_id:
            continue
        code = item.get("error_code")
        stamp = item.get("timestamp")
        try:
            timestamp = datetime.fromisoformat(stamp) if isinstance(stamp, str) and stamp else None
        except ValueError:
            timestamp = None
        out.append(
            DeliveryStatus(
                account_id=_clean_or_none(item.get("account_id")) or "",
                external_id=external_id,
                status=(_clean_or_none(item.get("status")) or "").lower(),
                timestamp=timestamp,
                correlation_id=_clean_or_none(item.get("biz_opaque_callback_data")),
                error_code=_clean_or_none(code),
                error_title=_clean_or_none(item.get("error_title")),
                conversation_reason=_clean_or_none(item.get("conversation_reason")),
            )
        )
    return out


def _clean_or_none(value: Any) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    return clean_text(str(value)) or None


async def apply_delivery_statuses(ctx: dict[str, Any], channel: str, statuses: list[dict[str, Any]]) -> int:
    """ARQ job: apply one webhook's delivery statuses of ``channel`` to the outbox (monotonic, see the
    module docstring). ``statuses`` are :func:`~switchboard.channels.ingest.status_to_job_arg` dicts.
    Returns the status changes made."""
    deps = ctx["deps"]
    changed = await apply_statuses(
        deps.resources.sessions, deps.redis, channel, to_delivery_statuses(statuses)
    )
    log.info("delivery_statuses_applied", channel=channel, received=len(statuses), changed=changed)
    return changed
