"""``copy_inbound_media``: the bytes behind expiring media handles go into our media storage right
after the insert, for every channel (:attr:`switchboard.contracts.MediaRef.expiring`: Instagram's CDN
links, WhatsApp's media ids).

The ingest (:func:`switchboard.channels.ingest.ingest_delivery`) enqueues one job per stored row that
has such a ref, with no delay (the row's own ``process_inbound`` waits for the debounce window). Each
ref is downloaded once, size-limited (``MEDIA_MAX_BYTES``), and stored content-addressed: by the
channel's ``copy_media`` hook when it has one (WhatsApp: the media id resolved with the account's
token, :meth:`switchboard.channels.whatsapp.channel.WhatsAppChannel.copy_media`), else as a plain link
(:meth:`~switchboard.media.MediaStore.copy_url`). The row's ``media[i]`` becomes
``{"ref": "store:<key>", "mime", "size_bytes", ...}`` with the sniffed type; the provider's handle is
not kept (it dies). Outcomes per ref:

* copied → ``ref = store:<key>``;
* the link or id is dead (4xx), or the file is over ``MEDIA_MAX_BYTES`` → ``unavailable = "expired" |
  "too_large"`` on the ref, logged ``media_copy_failed``: the agent reads a bracketed notice;
* network trouble or a 5xx → the job is retried (``COPY_INBOUND_MEDIA.max_tries``, waiting with jitter), then recorded as ``unavailable``.

If ``process_inbound`` runs first, the channel's ``fetch_media`` copies the handle itself; both write
the same content-addressed object.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from sqlalchemy import update
from sqlmodel import col

from switchboard.db.models import ChannelAccount, Message
from switchboard.egress import EgressPolicy
from switchboard.media.store import MediaCopyFailed, MediaStore, StoredMedia, is_stored
from switchboard.observability import get_logger
from switchboard.queue.jobs import COPY_INBOUND_MEDIA

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

__all__ = ["copy_inbound_media", "media_store_of"]

log = get_logger(__name__)


def media_store_of(deps: Any) -> MediaStore:
    """The worker's media storage (built in its start-up; built here for deps made without one)."""
    if getattr(deps, "media_store", None) is None:
        deps.media_store = MediaStore.from_settings(deps.settings)
    return deps.media_store


async def copy_inbound_media(ctx: dict[str, Any], row_id: str) -> dict[str, int]:
    """ARQ job: copy every expiring media ref of the row ``row_id``. Returns ``{"copied", "failed"}``.

    Raises:
        Retry: a transient download failure, while tries are left.
    """
    deps = ctx["deps"]
    settings = deps.settings
    async with deps.resources.sessions() as session:
        row = await session.get(Message, uuid.UUID(row_id))
        account = (
            await session.get(ChannelAccount, row.channel_account_id)
            if row is not None and row.channel_account_id
            else None
        )
    if row is None:
        return {"copied": 0, "failed": 0}
    store = media_store_of(deps)
    kind = row.kind if row.kind in ("audio", "video", "image") else None
    channel = (getattr(deps, "channels", None) or {}).get(row.channel)
    # a channel whose handles need its own lookup (a WhatsApp media id and the account's token)
    # copies through its hook; any other expiring ref is a link we download as it is
    hook: Callable[..., Awaitable[StoredMedia]] | None = getattr(channel, "copy_media", None)
    media = [dict(m) for m in row.media or []]
    copied = failed = 0
    job_try = int(ctx.get("job_try", 1))
    last_try = job_try >= COPY_INBOUND_MEDIA.max_tries
    for item in media:
        ref = str(item.get("ref") or "")
        if not item.get("expiring") or is_stored(ref) or item.get("unavailable"):
            continue
        try:
            if hook is not None and account is not None:
                stored = await hook(account, ref, kind=kind)
            else:
                stored = await store.copy_url(
                    deps.http,
                    ref,
                    namespace=f"{row.channel}/{row.tenant_id}",
                    kind=kind,
                    timeout_s=settings.instagram_send_timeout_s,
                    egress=EgressPolicy.for_channels(settings),
                )
        except MediaCopyFailed as exc:
            if exc.is_transient and not last_try:
                log.warning("media_copy_retry", inbound_message_id=row_id, reason=exc.reason)
                raise COPY_INBOUND_MEDIA.backoff.retry(job_try) from None
            failed += 1
            item.pop("expiring", None)
            item.update(ref="", unavailable=exc.reason)
            log.warning("media_copy_failed", inbound_message_id=row_id, reason=exc.reason, error=str(exc))
            continue
        copied += 1
        item.pop("expiring", None)
        item.update(ref=stored.ref, mime=item.get("mime") or stored.mime, size_bytes=stored.size_bytes)
    if copied or failed:
        async with deps.resources.sessions() as session, session.begin():
            await session.exec(update(Message).where(col(Message.id) == row.id).values(media=media))
        log.info("media_copied", inbound_message_id=row_id, copied=copied, failed=failed, channel=row.channel)
    return {"copied": copied, "failed": failed}
