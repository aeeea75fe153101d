"""Mailbox sync: from the stored ``historyId`` to stored mail (Gmail "Synchronize clients").

:func:`sync_mailbox` runs on the background queue (a push, the poll, ``simulate gmail``):

1. A mailbox that is not ``active`` (``needs_reauth``, ``disabled``) is skipped: no call, no retry.
2. Without a cursor, the profile's ``historyId`` becomes the cursor (mail older than the connection
   is not answered).
3. ``history.list`` from the cursor, every page, ``messagesAdded`` only; ids kept once, in order.
   **404** (the cursor is stale or invalid): one bounded resync instead: ``messages.list`` with
   ``after:<last processed internalDate>`` (at most ``GMAIL_RESYNC_MAX_MESSAGES`` mails), then the
   profile's ``historyId`` as the fresh cursor. Never retried in a loop; the mailbox stays healthy.
4. Ids already stored for the mailbox, ids of our own sends, drafts and spam are dropped without a
   call; every other mail is read (``messages.get``, ``format=full``), its attachments turned into
   readable lines (:mod:`switchboard.channels.gmail.attachments`), normalized and stored through the
   shared durable ingest (:func:`switchboard.channels.ingest.ingest_delivery`: one insert,
   deduplicated on the Gmail id per mailbox, jobs enqueued after the commit). Our own mail found by its ``Message-ID`` completes its
   ``gmail_sent_messages`` record instead.
5. Only then the new cursor (the last page's ``historyId``) and the newest ``internalDate`` are saved:
   a sync that fails halfway is repeated from the old cursor and inserts nothing twice.

A revoked grant marks the mailbox ``needs_reauth`` (:mod:`switchboard.channels.gmail.oauth`) and the
sync ends normally.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
from arq.connections import ArqRedis
from sqlalchemy import update
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.channels.accounts import AccountDirectory
from switchboard.channels.gmail.attachments import attachment_lines
from switchboard.channels.gmail.channel import GmailChannel
from switchboard.channels.gmail.client import GmailApiError
from switchboard.channels.gmail.mime import parse_message
from switchboard.channels.gmail.normalize import normalize_mail
from switchboard.channels.gmail.oauth import MailboxNeedsReauth
from switchboard.channels.ingest import NormalizedDelivery, ingest_delivery
from switchboard.contracts import InboundMessage
from switchboard.db.models import (
    ChannelAccount,
    GmailMailbox,
    GmailPushNotification,
    GmailSentMessage,
    MailboxStatus,
    Message,
    utcnow,
)
from switchboard.observability import get_logger
from switchboard.settings import Settings

__all__ = ["SyncReport", "sync_mailbox", "SKIPPED_LABELS"]

log = get_logger(__name__)

SKIPPED_LABELS = frozenset({"DRAFT", "SPAM", "TRASH"})
"""Mail with one of these labels is never read (a draft is not sent; spam and trash are not for us)."""


@dataclass
class SyncReport:
    """What one sync did."""

    status: str = "ok"
    """``ok``, ``skipped`` (mailbox not active), ``needs_reauth``, ``initialized`` (first cursor)."""
    listed: int = 0
    """Distinct new message ids the history (or resync) named."""
    fetched: int = 0
    stored: int = 0
    duplicates: int = 0
    ours: int = 0
    resynced: bool = False
    history_id: str | None = None
    stored_ids: list[uuid.UUID] = field(default_factory=list)


async def _history_ids(
    channel: GmailChannel, account_id: uuid.UUID, start: str
) -> tuple[list[dict[str, Any]], str]:
    """Every ``messagesAdded`` message (``{id, threadId, labelIds}``) after ``start``, once, and the new cursor.

    Raises:
        GmailApiError: ``http_status == 404`` for a stale cursor.
    """
    seen: dict[str, dict[str, Any]] = {}
    page: str | None = None
    cursor = start
    while True:
        answer = await channel.call(
            account_id,
            lambda token, page=page: channel.client.history(token, start_history_id=start, page_token=page),
        )
        for record in answer.get("history") or []:
            for added in record.get("messagesAdded") or []:
                message = added.get("message") or {}
                if message.get("id") and message["id"] not in seen:
                    seen[str(message["id"])] = message
        cursor = str(answer.get("historyId") or cursor)
        page = answer.get("nextPageToken")
        if not page:
            return list(seen.values()), cursor


async def _resync_ids(
    channel: GmailChannel, account_id: uuid.UUID, after_ms: int | None, limit: int
) -> list[dict[str, Any]]:
    """Mail after ``after_ms`` (``messages.list``, at most ``limit``), newest first as Gmail lists them."""
    after_s = (after_ms // 1000) - 1 if after_ms else int(time.time()) - 86_400
    found: list[dict[str, Any]] = []
    page: str | None = None
    while len(found) < limit:
        answer = await channel.call(
            account_id,
            lambda token, page=page: channel.client.list_messages(
                token, query=f"after:{after_s}", page_token=page, max_results=min(100, limit)
            ),
        )
        found += [m for m in answer.get("messages") or [] if m.get("id")]
        page = answer.get("nextPageToken")
        if not page:
            break
    return found[:limit][::-1]  # oldest first


async def _known(session: AsyncSession, account_id: uuid.UUID, ids: list[str]) -> tuple[set[str], set[str]]:
    """``(ids already stored, ids of our own sends)`` among ``ids``."""
    if not ids:
        return set(), set()
    stored = set(
        (
            await session.exec(
                select(Message.external_id).where(
                    Message.channel == "gmail",
                    Message.channel_account_id == account_id,
                    col(Message.external_id).in_(ids),
                )
            )
        ).all()
    )
    ours = set(
        (
            await session.exec(
                select(GmailSentMessage.gmail_message_id).where(
                    GmailSentMessage.channel_account_id == account_id,
                    col(GmailSentMessage.gmail_message_id).in_(ids),
                )
            )
        ).all()
    )
    return {i for i in stored if i}, {i for i in ours if i}


async def _our_message_ids(session: AsyncSession, account_id: uuid.UUID, candidates: list[str]) -> set[str]:
    if not candidates:
        return set()
    return set(
        (
            await session.exec(
                select(GmailSentMessage.rfc_message_id).where(
                    GmailSentMessage.channel_account_id == account_id,
                    col(GmailSentMessage.rfc_message_id).in_(candidates),
                )
            )
        ).all()
    )


async def sync_mailbox(
    *,
    channel: GmailChannel,
    sessions: async_sessionmaker[AsyncSession],
    redis: ArqRedis | None,
    http: httpx.AsyncClient,
    settings: Settings,
    account_id: uuid.UUID,
) -> SyncReport:
    """Sync one mailbox (module docstring).

    Raises:
        GmailApiError / OAuthError: transient Gmail or token trouble (the caller retries later).
        sqlalchemy.exc.SQLAlchemyError: the database failed (nothing of this run was saved).
    """
    report = SyncReport()
    async with sessions() as session:
        mailbox = (
            await session.exec(select(GmailMailbox).where(GmailMailbox.channel_account_id == account_id))
        ).first()
        account = await session.get(ChannelAccount, account_id)
    if (
        mailbox is None
        or account is None
        or mailbox.status != MailboxStatus.active.value
        or not account.is_active
    ):
        report.status = "skipped"
        return report
    started_at = utcnow()
    sync_log = log.bind(tenant_id=str(mailbox.tenant_id), channel_account_id=str(account_id))
    try:
        if mailbox.history_id is None:
            profile = await channel.call(account_id, channel.client.profile)
            report.history_id, report.status = str(profile.get("historyId")), "initialized"
            await _save_cursor(sessions, mailbox.id, report.history_id, None, started_at)
            return report
        try:
            listed, cursor = await _history_ids(channel, account_id, mailbox.history_id)
        except GmailApiError as exc:
            if exc.http_status != 404:
                raise
            sync_log.warning("gmail_history_stale", history_id=mailbox.history_id)
            listed = await _resync_ids(
                channel, account_id, mailbox.last_internal_date_ms, settings.gmail_resync_max_messages
            )
            cursor = str((await channel.call(account_id, channel.client.profile)).get("historyId"))
            report.resynced = True
        report.listed = len(listed)
        async with sessions() as session:
            stored, ours = await _known(session, account_id, [str(m["id"]) for m in listed])
        report.ours = len([m for m in listed if m["id"] in ours])
        todo = [
            m
            for m in listed
            if m["id"] not in stored
            and m["id"] not in ours
            and not SKIPPED_LABELS & set(m.get("labelIds") or [])
        ]
        messages: list[InboundMessage] = []
        newest_ms = mailbox.last_internal_date_ms or 0
        for item in todo:
            gmail_id = str(item["id"])
            try:
                full = await channel.call(
                    account_id, lambda token, i=gmail_id: channel.client.get_message(token, i)
                )
            except GmailApiError as exc:
                if exc.http_status == 404:  # deleted since it was listed
                    continue
                raise
            report.fetched += 1
            if SKIPPED_LABELS & set(full.get("labelIds") or []):
                continue
            try:
                mail = parse_message(full)
            except ValueError as exc:
                sync_log.error("gmail_message_unreadable", gmail_id=gmail_id, error=str(exc)[:200])
                continue
            newest_ms = max(newest_ms, mail.internal_date_ms)
            async with sessions() as session:
                candidates = [i for i in [mail.message_id] if i]
                our_ids = await _our_message_ids(session, account_id, candidates)
            lines = await attachment_lines(
                mail.attachments,
                fetch=lambda ref, gid=gmail_id: channel.attachment_bytes(
                    account_id, f"{gid}/{ref}", max_bytes=settings.gmail_max_attachment_bytes
                ),
                http=http,
                settings=settings,
            )
            decision = normalize_mail(
                mail, mailbox=mailbox.email, our_message_ids=our_ids, attachment_text=lines
            )
            if decision.ours:
                report.ours += 1
                async with sessions() as session, session.begin():
                    await session.exec(
                        update(GmailSentMessage)
                        .where(
                            col(GmailSentMessage.channel_account_id) == account_id,
                            col(GmailSentMessage.rfc_message_id) == mail.message_id,
                        )
                        .values(gmail_message_id=gmail_id, thread_id=mail.thread_id)
                    )
                continue
            assert decision.message is not None
            if decision.reason != "process":
                sync_log.info("gmail_mail_recorded", gmail_id=gmail_id, reason=decision.reason)
            messages.append(decision.message)
        ingested = await ingest_delivery(
            delivery=NormalizedDelivery(messages=messages),
            sessions=sessions,
            redis=redis,
            accounts=AccountDirectory(sessions, "gmail"),
            debounce_s=settings.inbound_debounce_s,
        )
        report.stored_ids, report.duplicates = ingested.stored_ids, ingested.duplicates
        report.stored = len(report.stored_ids)
        report.history_id = cursor
        await _save_cursor(sessions, mailbox.id, cursor, newest_ms or None, started_at)
    except MailboxNeedsReauth:
        report.status = "needs_reauth"
        return report
    # A poll that found nothing new is DEBUG: one INFO line per mailbox per poll said nothing.
    busy = report.listed or report.fetched or report.stored or report.resynced
    (sync_log.info if busy else sync_log.debug)(
        "gmail_synced",
        listed=report.listed,
        fetched=report.fetched,
        stored=report.stored,
        duplicates=report.duplicates,
        ours=report.ours,
        resynced=report.resynced,
    )
    return report


async def _save_cursor(
    sessions: async_sessionmaker[AsyncSession],
    mailbox_id: uuid.UUID,
    history_id: str | None,
    internal_ms: int | None,
    started_at: Any,
) -> None:
    async with sessions() as session, session.begin():
        mailbox = await session.get(GmailMailbox, mailbox_id, with_for_update=True)
        if mailbox is None:
            return
        if history_id and (mailbox.history_id is None or _newer(history_id, mailbox.history_id)):
            mailbox.history_id = history_id
        if internal_ms and internal_ms > (mailbox.last_internal_date_ms or 0):
            mailbox.last_internal_date_ms = internal_ms
        mailbox.last_synced_at, mailbox.last_error, mailbox.updated_at = utcnow(), None, utcnow()
        session.add(mailbox)
        await session.exec(
            update(GmailPushNotification)
            .where(
                col(GmailPushNotification.channel_account_id) == mailbox.channel_account_id,
                col(GmailPushNotification.processed_at).is_(None),
                col(GmailPushNotification.created_at) <= started_at,
            )
            .values(processed_at=utcnow())
        )


def _newer(candidate: str, current: str) -> bool:
    """History ids grow (not contiguously); a fresh cursor after a resync may also be newer only."""
    try:
        return int(candidate) >= int(current)
    except ValueError:
        return True
