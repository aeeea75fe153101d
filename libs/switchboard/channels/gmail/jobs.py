"""Background-queue jobs of the Gmail channel: sync one mailbox, poll every mailbox, renew watches.

* ``sync_gmail_mailbox(account_id)``: :func:`~switchboard.channels.gmail.sync.sync_mailbox` under a
  per-mailbox Redis lock (a push and a poll never sync one mailbox at once: the second waits with
  ``Retry``). Transient Gmail/token trouble is logged on the mailbox and left to the next poll.
* ``poll_gmail_mailboxes`` (cron): every active mailbox whose last sync is older than
  ``GMAIL_POLL_INTERVAL_S`` gets a sync job (the product works with nothing but OAuth), and, when
  ``GMAIL_PUBSUB_TOPIC`` is set, every watch ending within ``GMAIL_WATCH_RENEW_BEFORE_S`` is renewed
  (``users.watch`` lasts 7 days).
"""

from __future__ import annotations

import time
import uuid
from datetime import timedelta
from typing import Any

from arq.connections import ArqRedis
from sqlmodel import select

from switchboard.channels.gmail.channel import GmailChannel
from switchboard.channels.gmail.client import GmailApiError, OAuthError
from switchboard.channels.gmail.oauth import MailboxNeedsReauth
from switchboard.channels.gmail.sync import sync_mailbox
from switchboard.db.models import GmailMailbox, MailboxStatus, utcnow
from switchboard.observability import get_logger
from switchboard.queue.jobs import SYNC_GMAIL_MAILBOX, enqueue_gmail_sync

__all__ = [
    "enqueue_sync",
    "poll_gmail_mailboxes",
    "renew_watch",
    "sync_gmail_mailbox",
]

log = get_logger(__name__)

SYNC_LOCK_S = 120
"""The per-mailbox sync lock's lifetime (seconds): longer than one sync's job timeout."""


def _lock_key(account_id: uuid.UUID | str) -> str:
    return f"gmail:sync-lock:{account_id}"


async def enqueue_sync(
    redis: ArqRedis, account_id: uuid.UUID | str, *, reason: str, key: str | None = None
) -> bool:
    """Enqueue a sync of one mailbox on the background queue; ``key`` makes it idempotent (a Pub/Sub
    message id, a poll tick). Returns ``False`` when that job exists already."""
    return await enqueue_gmail_sync(redis, account_id, reason, key=key or uuid.uuid4().hex)


def _channel(ctx: dict[str, Any]) -> GmailChannel:
    channel = ctx["deps"].channel("gmail")
    assert isinstance(channel, GmailChannel)
    return channel


async def sync_gmail_mailbox(ctx: dict[str, Any], account_id: str, reason: str = "poll") -> dict[str, Any]:
    """ARQ job: sync one mailbox (module docstring).

    Raises:
        Retry: another sync of the mailbox holds the lock.
    """
    deps = ctx["deps"]
    redis: ArqRedis = deps.redis
    token = uuid.uuid4().hex
    if not await redis.set(_lock_key(account_id), token, nx=True, ex=SYNC_LOCK_S):
        raise SYNC_GMAIL_MAILBOX.backoff.retry(int(ctx.get("job_try", 1)))
    try:
        report = await sync_mailbox(
            channel=_channel(ctx),
            sessions=deps.resources.sessions,
            redis=redis,
            http=deps.http,
            settings=deps.settings,
            account_id=uuid.UUID(account_id),
        )
    except (GmailApiError, OAuthError) as exc:
        log.warning("gmail_sync_failed", channel_account_id=account_id, reason=reason, error=str(exc)[:300])
        async with deps.resources.sessions() as session, session.begin():
            mailbox = (
                await session.exec(
                    select(GmailMailbox).where(GmailMailbox.channel_account_id == uuid.UUID(account_id))
                )
            ).first()
            if mailbox is not None:
                mailbox.last_error = str(exc)[:500]
                session.add(mailbox)
        return {"status": "failed", "error": str(exc)[:300]}
    finally:
        if (await redis.get(_lock_key(account_id))) == token.encode():
            await redis.delete(_lock_key(account_id))
    return {
        "status": report.status,
        "stored": report.stored,
        "listed": report.listed,
        "resynced": report.resynced,
    }


async def renew_watch(channel: GmailChannel, sessions: Any, mailbox: GmailMailbox, topic: str) -> int | None:
    """``users.watch`` for ``mailbox`` on ``topic``; stores and returns the new expiration (epoch ms).

    Raises:
        GmailApiError, OAuthError, MailboxNeedsReauth: as the channel's calls raise them.
    """
    answer = await channel.call(
        mailbox.channel_account_id, lambda token: channel.client.watch(token, topic=topic)
    )
    expiration = int(answer.get("expiration") or 0) or None
    async with sessions() as session, session.begin():
        row = await session.get(GmailMailbox, mailbox.id, with_for_update=True)
        if row is not None:
            row.watch_expiration_ms = expiration
            if row.history_id is None and answer.get("historyId"):
                row.history_id = str(answer["historyId"])
            session.add(row)
    log.info(
        "gmail_watch_renewed", channel_account_id=str(mailbox.channel_account_id), expiration_ms=expiration
    )
    return expiration


async def poll_gmail_mailboxes(ctx: dict[str, Any]) -> dict[str, int]:
    """Cron job (every 15 s): renew watches that end soon, enqueue a sync of every mailbox due for a
    poll (last synced ``GMAIL_POLL_INTERVAL_S`` or longer ago).

    Returns:
        ``{"renewed": watches renewed, "polled": syncs enqueued}``; both 0 is an idle run.
    """
    deps = ctx["deps"]
    settings = deps.settings
    now = utcnow()
    due_before = now - timedelta(seconds=settings.gmail_poll_interval_s)
    async with deps.resources.sessions() as session:
        mailboxes = list(
            (
                await session.exec(
                    select(GmailMailbox).where(GmailMailbox.status == MailboxStatus.active.value)
                )
            ).all()
        )
    renewed = polled = 0
    topic = settings.gmail_pubsub_topic
    renew_by_ms = (time.time() + settings.gmail_watch_renew_before_s) * 1000
    for mailbox in mailboxes:
        if topic and (mailbox.watch_expiration_ms is None or mailbox.watch_expiration_ms <= renew_by_ms):
            try:
                await renew_watch(_channel(ctx), deps.resources.sessions, mailbox, topic)
                renewed += 1
            except (GmailApiError, OAuthError, MailboxNeedsReauth) as exc:
                log.warning(
                    "gmail_watch_failed",
                    channel_account_id=str(mailbox.channel_account_id),
                    error=str(exc)[:300],
                )
        if mailbox.last_synced_at is None or mailbox.last_synced_at <= due_before:
            tick = int(now.timestamp() // settings.gmail_poll_interval_s)
            if await enqueue_sync(deps.redis, mailbox.channel_account_id, reason="poll", key=f"poll{tick}"):
                polled += 1
    # Only what this run did: a run with nothing due (three of every four, the cron runs every 15 s) is
    # then idle and its arq line DEBUG (quiet_idle_cron_jobs); a count of mailboxes made every run busy.
    return {"renewed": renewed, "polled": polled}
