"""Echoes of what the business sent (Instagram ``is_echo``, WhatsApp ``message_echoes``): ours, or a person's
typing in the provider's own app.

Instagram echoes **every** message sent from the account, ours included, and the echo may arrive before
the delivery loop has recorded the send's answer (the mid) or after. :func:`match_echo` decides, in the
inbound job, before anything else happens to an echo row:

* an outbox row of the same account already carries the echo's id → **ours** (echo after our write);
* a part to the same recipient is in flight (``sending``, or ``pending`` after a lost answer) with the
  same text (or, for an echo without text, the oldest media part in flight) → **ours** (echo before our
  write): the row is marked sent with that id now, as a status callback would, so the delivery loop
  neither waits for nor resends it;
* a part to that recipient is in flight but none matches → **wait** (its answer may still come);
* nothing → **a person's** message from the provider's app (the caller stores it as a ``human_agent``
  message and hands the conversation to a person).

Ours is recorded once on our outbox row (``payload.echo = {"external_id", "at"}``) and the echo's own
message row is deleted, so history shows the reply once; a redelivered echo does the same again.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import delete, or_
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import Message, Outbox, OutboxStatus, utcnow
from switchboard.observability import get_logger

__all__ = ["EchoMatch", "match_echo"]

log = get_logger(__name__)


@dataclass(frozen=True)
class EchoMatch:
    """What an echo is: ``ours`` (with the outbox row), ``wait`` (a send in flight), or ``person``."""

    verdict: Literal["ours", "wait", "person"]
    outbox_id: uuid.UUID | None = None
    before_write: bool = False


def _in_flight() -> object:
    return or_(
        Outbox.status == OutboxStatus.sending.value,
        (Outbox.status == OutboxStatus.pending.value) & (Outbox.attempts > 0),
    )


async def match_echo(session: AsyncSession, row: Message, recipient: str) -> EchoMatch:
    """Decide what the echo ``row`` is (see the module docstring) and record ours on the outbox row.

    Args:
        session: a session inside a transaction (the caller commits).
        row: the stored echo (``direction = 'outbound'``).
        recipient: the customer the echo was sent to (the row's ``sender_external_id``).
    """
    if not row.external_id or row.channel_account_id is None:
        return EchoMatch("person")
    mine = (
        await session.exec(
            select(Outbox)
            .where(
                Outbox.tenant_id == row.tenant_id,
                Outbox.channel_account_id == row.channel_account_id,
                Outbox.external_id == row.external_id,
            )
            .with_for_update()
        )
    ).first()
    before_write = False
    if mine is None:
        flying = list(
            (
                await session.exec(
                    select(Outbox)
                    .where(
                        Outbox.tenant_id == row.tenant_id,
                        Outbox.channel_account_id == row.channel_account_id,
                        Outbox.recipient == recipient,
                        col(Outbox.external_id).is_(None),
                        _in_flight(),
                    )
                    .order_by(col(Outbox.created_at), col(Outbox.part_index))
                    .with_for_update()
                )
            ).all()
        )
        if not flying:
            return EchoMatch("person")
        text = (row.text or "").strip()
        if text:
            mine = next((o for o in flying if str((o.payload or {}).get("text") or "").strip() == text), None)
        else:
            mine = next((o for o in flying if (o.payload or {}).get("media")), None)
        if mine is None:
            return EchoMatch("wait")
        before_write = True
        now = utcnow()
        mine.external_id, mine.status, mine.sent_at, mine.updated_at = (
            row.external_id,
            OutboxStatus.sent.value,
            mine.sent_at or now,
            now,
        )
    mine.payload = {
        **(mine.payload or {}),
        "echo": {"external_id": row.external_id, "at": (row.sent_at or utcnow()).isoformat()},
    }
    session.add(mine)
    await session.exec(delete(Message).where(col(Message.id) == row.id))
    log.info("echo_of_our_send", outbox_id=str(mine.id), before_write=before_write)
    return EchoMatch("ours", mine.id, before_write)
