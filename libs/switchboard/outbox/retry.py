"""Failed outbox parts, and an operator's retry of them through the one delivery loop.

* :func:`failed_parts`: the newest ``failed`` outbox rows (dead letters, ``error_code =
  'dead_letter'``, and every other failure: window closed, a permanent provider error, a later part of
  a failed group), per tenant or of every tenant.
* :func:`requeue_failed`: an operator's *Retry*. It puts the row's whole **group** (the parts of one
  reply, :func:`~switchboard.outbox.delivery.same_group`) back to ``pending`` with a fresh attempt
  budget, so the delivery loop sends them again in order — the loop, not this module, decides
  (window, throttle, template rules apply as on the first try).

Idempotent, so a retried part is never sent twice:

* only rows the provider never accepted are requeued (``status = 'failed'`` **and** ``external_id IS
  NULL``); a row a provider accepted and then reported ``failed`` keeps its status (statuses only move
  forward, :mod:`switchboard.outbox.statuses`);
* the change is one ``UPDATE ... WHERE status = 'failed'`` under the row lock: a second click (or a
  second operator) finds nothing failed and gets :class:`NotRetryable`, while the first retry's rows
  are claimed once by the loop (``FOR UPDATE SKIP LOCKED``);
* the rows keep their ``correlation_id``, so a provider echo of an earlier attempt still finds them.

Not offered for retry (:func:`why_not_retryable`, the reason the console shows and the admin API's 409
gives): a part the provider accepted, and a part refused because the channel's customer-service window
had closed (``window_closed``, or the provider's own code for it, e.g. WhatsApp ``131047``: more than
24 hours since the customer's last message, so a free-form reply can no longer be sent; sending it
again would fail the same way, and once the customer writes again their new message is answered
instead) or the agent's (``agent_window_closed``: it goes out by itself when the agent next writes,
:mod:`switchboard.handoff.relay`), and a message to an agent dropped when their window opened because
its conversation was no longer theirs (``agent_notice_stale``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import text, update
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.channels.base import channel_capabilities
from switchboard.db.models import Outbox, OutboxStatus, utcnow
from switchboard.i18n import DEFAULT_LANGUAGE, N_, gettext
from switchboard.observability import get_logger
from switchboard.outbox.delivery import same_group

__all__ = ["NotRetryable", "RetryRefusal", "failed_parts", "requeue_failed", "why_not_retryable"]

log = get_logger(__name__)


@dataclass(frozen=True)
class RetryRefusal:
    """Why a failed outbox part may not be retried (:func:`why_not_retryable`)."""

    message: str
    """English msgid of the gettext catalog, with ``%(hours)s`` where the window's length goes."""
    hours: int = 24
    """The channel's window, in hours."""

    def text(self, language: str = DEFAULT_LANGUAGE) -> str:
        """The reason in ``language`` (the console's; the admin API answers in English)."""
        return gettext(language, self.message) % {"hours": self.hours}


NOT_FAILED = RetryRefusal(
    N_("It is not a failed outbox part: unknown, or retried already (pending, sending or sent).")
)
ACCEPTED = RetryRefusal(
    N_("The provider accepted it (then reported it failed): sending it again could deliver it twice.")
)
WINDOW_CLOSED = RetryRefusal(
    N_(
        "The %(hours)s-hour customer-service window had closed: a free-form reply can no longer be sent. "
        "Answer with a template, or wait for the customer to write again."
    )
)
AGENT_WINDOW_CLOSED = RetryRefusal(
    N_(
        "The agent had not written to the business number within %(hours)s hours: it is sent by itself "
        "when the agent next writes."
    )
)

STALE_AGENT_NOTICE = RetryRefusal(
    N_(
        "By the time the agent wrote again, the conversation was no longer theirs (or was closed): "
        "the message would be out of date."
    )
)


class NotRetryable(LookupError):
    """No failed, never-accepted outbox part with that id (unknown, another tenant's, already
    retried — now pending/sending/sent —, or accepted by the provider and then reported failed), or
    one that failed because a service window closed (:func:`why_not_retryable`).

    Attributes:
        refusal: why (``refusal.text(language)``: the console's message, the API's 409 ``detail``).
    """

    def __init__(self, outbox_id: uuid.UUID, refusal: RetryRefusal) -> None:
        self.outbox_id = outbox_id
        self.refusal = refusal
        super().__init__(f"outbox part {outbox_id}: {refusal.text()}")


def why_not_retryable(
    *, channel: str, error_code: str | None, external_id: str | None
) -> RetryRefusal | None:
    """Why a failed outbox part may not be retried, or ``None`` when it may.

    Args:
        channel: the row's channel (its window length and the provider's window error codes come
            from :func:`~switchboard.channels.base.channel_capabilities`).
        error_code: ``outbox.error_code``.
        external_id: ``outbox.external_id`` (set: the provider accepted the part).
    """
    if external_id is not None:
        return ACCEPTED
    caps = channel_capabilities(channel)
    window = caps.service_window if caps is not None else None
    hours = int(window.total_seconds() // 3600) if window else 24
    if error_code == "window_closed" or (caps is not None and error_code in caps.window_error_codes):
        return replace(WINDOW_CLOSED, hours=hours)
    if error_code == "agent_window_closed":
        return replace(AGENT_WINDOW_CLOSED, hours=hours)
    if error_code == "agent_notice_stale":  # switchboard.handoff.relay.STALE_NOTICE_CODE
        return STALE_AGENT_NOTICE
    return None


_FAILED_PARTS = text(
    """
    SELECT o.id, o.tenant_id, t.slug AS tenant, o.conversation_id, o.channel, o.purpose, o.part_index,
           o.error_code, o.error_message AS last_error, o.attempts, o.external_id,
           o.created_at, o.updated_at
    FROM outbox o JOIN tenants t ON t.id = o.tenant_id
    WHERE o.status = 'failed' AND (CAST(:tenant AS uuid) IS NULL OR o.tenant_id = CAST(:tenant AS uuid))
    ORDER BY o.updated_at DESC, o.part_index LIMIT :limit
    """
)


async def failed_parts(
    session: AsyncSession, *, tenant_id: uuid.UUID | None = None, limit: int = 100
) -> list[dict[str, Any]]:
    """The newest failed outbox parts (of ``tenant_id``, else of every tenant), newest failure first.

    Returns:
        ``[{"id", "tenant_id", "tenant" (slug), "conversation_id", "channel", "purpose", "part_index",
        "error_code", "last_error", "attempts", "external_id", "retryable" (bool), "not_retryable"
        (a :class:`RetryRefusal`, ``None`` when retryable), "created_at", "updated_at"}]``.
    """
    params = {"tenant": str(tenant_id) if tenant_id else None, "limit": limit}
    rows = await session.execute(_FAILED_PARTS, params)  # text(): rows, not models
    found = []
    for row in rows.mappings():
        part = dict(row)
        why = why_not_retryable(
            channel=part["channel"], error_code=part["error_code"], external_id=part["external_id"]
        )
        found.append({**part, "retryable": why is None, "not_retryable": why})
    return found


async def requeue_failed(
    session: AsyncSession, outbox_id: uuid.UUID, *, actor: str, tenant_id: uuid.UUID | None = None
) -> list[Outbox]:
    """Put the failed, never-accepted parts of ``outbox_id``'s group back to ``pending`` (attempts 0,
    due now, error cleared); the caller commits, then asks for a delivery
    (:func:`switchboard.outbox.jobs.deliver_soon`).

    Args:
        outbox_id: any failed part of the group.
        actor: who retried (logged).
        tenant_id: when given, the row must be this tenant's.

    Returns:
        The requeued rows, by ``part_index``.

    Raises:
        NotRetryable: see the class.
    """
    row = await session.get(Outbox, outbox_id)
    if row is None or (tenant_id is not None and row.tenant_id != tenant_id):
        raise NotRetryable(outbox_id, NOT_FAILED)
    # Lock the whole group in part order before looking: two retries of one reply (any of its parts)
    # queue behind each other instead of deadlocking, and the second sees the first's result.
    group = (
        await session.exec(
            select(Outbox)
            .where(same_group(row))
            .order_by(col(Outbox.part_index), col(Outbox.id))
            .with_for_update()
            .execution_options(populate_existing=True)
        )
    ).all()
    row = next((r for r in group if r.id == outbox_id), None)
    if row is None or row.status != OutboxStatus.failed.value:
        raise NotRetryable(outbox_id, NOT_FAILED)
    why = why_not_retryable(channel=row.channel, error_code=row.error_code, external_id=row.external_id)
    if why is not None:
        log.info(
            "outbox_retry_refused",
            tenant_id=str(row.tenant_id),
            conversation_id=str(row.conversation_id),
            outbox_id=str(outbox_id),
            error_code=row.error_code,
            reason=why.text(),
            actor=actor,
        )
        raise NotRetryable(outbox_id, why)
    now = utcnow()
    requeued = (
        await session.exec(
            update(Outbox)
            .where(
                same_group(row),
                col(Outbox.status) == OutboxStatus.failed.value,
                col(Outbox.external_id).is_(None),
            )
            .values(
                status=OutboxStatus.pending.value,
                attempts=0,
                next_attempt_at=None,
                sending_at=None,
                error_code=None,
                error_message=None,
                updated_at=now,
            )
            .returning(Outbox.id, Outbox.part_index)
        )
    ).all()
    ids = [r.id for r in sorted(requeued, key=lambda r: r.part_index)]
    log.warning(
        "outbox_failed_retried",
        tenant_id=str(row.tenant_id),
        conversation_id=str(row.conversation_id),
        trace_id=row.trace_id,
        outbox_id=str(outbox_id),
        parts=len(ids),
        actor=actor,
    )
    return list(
        (
            await session.exec(select(Outbox).where(col(Outbox.id).in_(ids)).order_by(col(Outbox.part_index)))
        ).all()
    )
