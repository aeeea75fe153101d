"""Recording feedback: one row per (message, source), joined to the turn and trace that wrote the message."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid
from typing import Literal

from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlmodel import col, or_, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import Feedback, Message, Turn, utcnow
from switchboard.errors import SwitchboardError
from switchboard.events import emit
from switchboard.observability import get_logger, metrics
from switchboard.storable import clean_text

__all__ = [
    "COMMENT_MAX_CHARS",
    "FeedbackRejected",
    "Rating",
    "record_feedback",
    "new_app_key",
    "app_key_matches",
]

log = get_logger(__name__)

Rating = Literal["up", "down"]
COMMENT_MAX_CHARS = 2_000
SOURCE_MAX_CHARS = 64
APP_KEY_PREFIX = "sbfk_"
"""Prefix of a tenant's feedback app key (so a leaked one is recognisable in logs and repositories)."""


class FeedbackRejected(SwitchboardError):
    """The feedback cannot be recorded as sent.

    Attributes:
        status_code: 404 (no such message for this tenant) or 422 (bad rating, comment or source).
    """

    def __init__(self, status_code: int, message: str) -> None:
        self.status_code = status_code
        super().__init__(message)


async def record_feedback(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    message_id: uuid.UUID,
    rating: Rating,
    comment: str | None,
    source: str,
) -> Feedback:
    """Store a rating of message ``message_id`` in the caller's transaction (the caller commits).

    Idempotent per ``(message_id, source)``: a second call from the same source replaces the rating
    and comment (``updated_at`` moves, ``exported_at`` is cleared so the new score is exported again).
    The row carries the message's conversation and trace id and the turn that wrote it (the turn with
    the message's ``trace_id``, or, for an inbound message, the turn that answered it).

    Args:
        rating: ``up`` | ``down``.
        comment: optional free text, at most :data:`COMMENT_MAX_CHARS` characters.
        source: who rates, e.g. ``admin_api``, ``tenant_app``, ``console:<user id>`` (1-64 characters).

    Raises:
        FeedbackRejected: 404 the message is not the tenant's; 422 a bad rating, comment or source.
    """
    if rating not in ("up", "down"):
        raise FeedbackRejected(422, "rating must be 'up' or 'down'")
    source = source.strip()
    if not 1 <= len(source) <= SOURCE_MAX_CHARS:
        raise FeedbackRejected(422, f"source must be 1-{SOURCE_MAX_CHARS} characters")
    if comment is not None:
        comment = clean_text(comment).strip() or None
        if comment is not None and len(comment) > COMMENT_MAX_CHARS:
            raise FeedbackRejected(422, f"comment is longer than {COMMENT_MAX_CHARS} characters")
    message = (
        await session.exec(select(Message).where(Message.id == message_id, Message.tenant_id == tenant_id))
    ).first()
    if message is None:
        log.info("feedback_rejected_unknown_message", tenant_id=str(tenant_id), message_id=str(message_id))
        raise FeedbackRejected(404, "message not found for this tenant")
    conditions = [col(Turn.inbound_message_id) == message.id]
    if message.trace_id:
        conditions.append(col(Turn.trace_id) == message.trace_id)
    turn = (
        await session.exec(
            select(Turn).where(Turn.tenant_id == tenant_id, or_(*conditions)).order_by(col(Turn.created_at))
        )
    ).first()
    trace_id = message.trace_id or (turn.trace_id if turn is not None else None)
    now = utcnow()
    values = {
        "id": uuid.uuid4(),
        "tenant_id": tenant_id,
        "message_id": message.id,
        "conversation_id": message.conversation_id,
        "turn_id": turn.id if turn is not None else None,
        "trace_id": trace_id,
        "rating": rating,
        "comment": comment,
        "source": source,
        "created_at": now,
        "updated_at": now,
    }
    statement = pg_insert(Feedback.__table__).values(**values)
    statement = statement.on_conflict_do_update(
        constraint="uq_feedback_message_source",
        set_={"rating": rating, "comment": comment, "updated_at": now, "exported_at": None},
    ).returning(Feedback.__table__.c.id)
    connection = await session.connection()
    feedback_id = (await connection.execute(statement)).scalar_one()
    row = await session.get(Feedback, feedback_id, populate_existing=True)
    assert row is not None  # just written in this transaction
    metrics.FEEDBACK.labels(rating).inc()
    await emit(
        session,
        tenant_id=tenant_id,
        event_type="feedback.created",
        data={
            "feedback_id": row.id,
            "message_id": message.id,
            "rating": rating,
            "comment": comment,
            "source": source,
        },
    )
    log.info(
        "feedback_recorded",
        tenant_id=str(tenant_id),
        conversation_id=str(message.conversation_id),
        trace_id=trace_id,
        message_id=str(message.id),
        turn_id=str(row.turn_id) if row.turn_id else None,
        rating=rating,
        source=source,
        has_comment=comment is not None,
    )
    return row


def new_app_key() -> tuple[str, str]:
    """A new tenant feedback app key and its SHA-256 hex digest (store the digest, show the key once)."""
    key = APP_KEY_PREFIX + secrets.token_urlsafe(32)
    return key, hashlib.sha256(key.encode()).hexdigest()


def app_key_matches(key: str, digest: str | None) -> bool:
    """Whether ``key`` is the app key whose digest is stored (constant-time comparison)."""
    if not digest:
        return False
    return hmac.compare_digest(hashlib.sha256(key.encode()).hexdigest(), digest)
