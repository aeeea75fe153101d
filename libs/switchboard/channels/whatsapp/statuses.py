"""Delivery statuses of our own messages → monotonic outbox updates (never answered).

Meta does not guarantee order and may skip ``delivered`` (INDEX §7): a status only moves a row
forward (``pending < sent < delivered < read``); ``failed`` replaces anything before ``read``;
unknown newer statuses (``played``...) are logged and ignored. Applying the same status twice
changes nothing. A ``failed`` with 131047 (outside the 24-hour window) or 131026 (undeliverable)
is also recorded on the conversation, and nothing is retried as free text.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import case, update
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import Conversation, Outbox, utcnow
from switchboard.observability import get_logger

__all__ = ["apply_statuses", "STATUS_RANK", "conversation_block_reason"]

log = get_logger(__name__)

STATUS_RANK = {"pending": 0, "sent": 1, "delivered": 2, "read": 3}
"""Forward order of delivery states; ``failed`` is handled apart (it may replace any state but ``read``)."""


def conversation_block_reason(code: int | None) -> str | None:
    """Text recorded on the conversation for a permanent recipient error, or ``None``."""
    if code == 131047:
        return "whatsapp 131047: outside the 24-hour window; needs a template message or a human"
    if code == 131026:
        return "whatsapp 131026: message undeliverable to this customer"
    return None


async def apply_statuses(sessions: async_sessionmaker[AsyncSession], statuses: list[dict[str, Any]]) -> int:
    """Apply status updates (dicts from :func:`switchboard.channels.whatsapp.store.status_to_job_arg`).

    Returns:
        The number of outbox rows changed (0 for duplicates, regressions and unknown ids).
    """
    changed = 0
    async with sessions() as session, session.begin():
        for item in statuses:
            status = str(item.get("status", ""))
            external_id = item.get("external_id")
            if not external_id:
                continue
            if status == "failed":
                code = item.get("error_code")
                stmt = (
                    update(Outbox)
                    .where(
                        Outbox.channel == "whatsapp",
                        Outbox.external_id == external_id,
                        Outbox.status.in_(("pending", "sent", "delivered")),
                    )  # type: ignore[attr-defined]
                    .values(
                        status="failed",
                        error_code=str(code) if code is not None else None,
                        error_message=item.get("error_title"),
                        updated_at=utcnow(),
                    )
                    .returning(Outbox.conversation_id)
                )
                rows = (await session.execute(stmt)).scalars().all()
                changed += len(rows)
                reason = conversation_block_reason(code)
                for conversation_id in set(rows):
                    if reason:
                        await session.execute(
                            update(Conversation)
                            .where(Conversation.id == conversation_id)
                            .values(escalation_reason=reason)
                        )
                log.warning(
                    "whatsapp_send_failed_status",
                    external_id=external_id,
                    error_code=code,
                    outbox_rows=len(rows),
                )
                continue
            rank = STATUS_RANK.get(status)
            if rank is None:
                log.info("whatsapp_status_ignored", status=status, external_id=external_id)
                continue
            lower = [name for name, value in STATUS_RANK.items() if value < rank]
            stmt = (
                update(Outbox)
                .where(
                    Outbox.channel == "whatsapp", Outbox.external_id == external_id, Outbox.status.in_(lower)
                )  # type: ignore[attr-defined]
                .values(
                    status=status,
                    updated_at=utcnow(),
                    sent_at=case((Outbox.sent_at.is_(None), utcnow()), else_=Outbox.sent_at),  # type: ignore[union-attr]
                )
            )
            result = await session.execute(stmt)
            changed += int(result.rowcount or 0)
    return changed


async def outbox_status(session: AsyncSession, external_id: str) -> str | None:
    """Current status of the outbox row with provider id ``external_id`` (helper for callers and tests)."""
    row = (await session.exec(select(Outbox).where(Outbox.external_id == external_id))).first()
    return row.status if row else None
