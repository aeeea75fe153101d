"""Make a webhook delivery durable (DESIGN.md step 1), then enqueue one job per new row — for every channel.

A channel's webhook route verifies and parses the provider's body, normalizes it into a
:class:`NormalizedDelivery` (messages, delivery statuses, account-level errors), and hands it to
:func:`ingest_delivery`, which is the same for every channel:

* Each receiving account is routed to its tenant (:class:`~switchboard.channels.accounts.AccountDirectory`);
  messages for unknown accounts are logged and dropped (the provider must stop retrying them).
* One ``INSERT ... ON CONFLICT DO NOTHING RETURNING id`` per delivery into ``messages``, unique on
  ``(channel, channel_account_id, external_id)``: a redelivered webhook (even two copies at the same
  instant on two processes) inserts nothing the second time, so it is processed once.
* Edits and revokes change the original row instead of adding one (INDEX: "no new message row");
  a revoked message still waiting for its turn is marked done so it is never answered.
* Only after the transaction commits are jobs enqueued (job id ``inbound:<row id>``, deferred by the
  debounce window so bursts coalesce). An enqueue failure is logged and left to the sweeper: the
  row is already safe. Delivery statuses go to one ``apply_delivery_statuses`` job per delivery.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from arq.connections import ArqRedis
from sqlalchemy import and_, case, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.channels.accounts import AccountDirectory, AccountRef
from switchboard.contracts import InboundMessage
from switchboard.db.models import InboundState, Message, utcnow
from switchboard.observability import get_logger
from switchboard.outbox.statuses import DeliveryStatus
from switchboard.queue.keys import channel_throttle_key, inbound_job_id

__all__ = [
    "IngestResult",
    "NormalizedDelivery",
    "StatusUpdate",
    "Throttle",
    "WebhookErrorEvent",
    "enqueue_inbound",
    "ingest_delivery",
    "status_to_job_arg",
    "to_delivery_statuses",
]

log = get_logger(__name__)


@dataclass(frozen=True)
class StatusUpdate:
    """The delivery state of a message *we* sent, as a provider reported it."""

    account_id: str
    """The provider's id of the sending account."""
    external_id: str
    """The provider's id of our outbound message (WhatsApp ``wamid``, Instagram ``mid``)."""
    status: str
    """``sent`` | ``delivered`` | ``read`` | ``failed`` | anything newer (``played``...), kept as is."""
    timestamp: datetime
    recipient_id: str | None
    error_code: int | None = None
    error_title: str | None = None
    biz_opaque_callback_data: str | None = None
    """The correlation id we attached to the send, when the provider echoes it back."""
    conversation_reason: str | None = None
    """Set by the channel for a permanent recipient error: recorded on the conversation."""


@dataclass(frozen=True)
class WebhookErrorEvent:
    """An account-level error event with no message (e.g. WhatsApp 130429 throughput limit reached)."""

    account_id: str
    code: int | None
    title: str | None
    details: str | None


@dataclass
class NormalizedDelivery:
    """Everything one webhook POST carried, in order of provider timestamp.

    Attributes:
        messages: customer messages, control events (reaction, edit, revoke), system messages and
            echoes, sorted by ``sent_at`` (then by position in the body).
        statuses: delivery updates of our own messages.
        errors: account-level error events.
        skipped: number of items that were not understood (logged, never raised).
    """

    messages: list[InboundMessage] = field(default_factory=list)
    statuses: list[StatusUpdate] = field(default_factory=list)
    errors: list[WebhookErrorEvent] = field(default_factory=list)
    skipped: int = 0

    @property
    def account_ids(self) -> set[str]:
        return (
            {m.account_id for m in self.messages}
            | {s.account_id for s in self.statuses}
            | {e.account_id for e in self.errors}
        )


@dataclass(frozen=True)
class Throttle:
    """Which account-level error codes mean "slow down", and for how long the account's sends wait."""

    codes: Collection[int]
    backoff_s: float


@dataclass
class IngestResult:
    """What one delivery did."""

    stored_ids: list[uuid.UUID] = field(default_factory=list)
    """Rows inserted now (duplicates are not listed)."""
    duplicates: int = 0
    updated_originals: int = 0
    """Edits/revokes applied to earlier rows."""
    statuses: int = 0
    unknown_accounts: set[str] = field(default_factory=set)
    enqueue_failures: int = 0


def _row_values(msg: InboundMessage, account: AccountRef) -> dict[str, Any]:
    is_echo = msg.echo
    return {
        "id": uuid.uuid4(),
        "tenant_id": account.tenant_id,
        "conversation_id": None,
        "channel": account.channel,
        "channel_account_id": account.id,
        "direction": "outbound" if is_echo else "inbound",
        "role": "human_agent" if is_echo else "user",
        "kind": msg.kind[:32],
        "text": msg.text,
        "media": [m.model_dump(exclude_none=True) for m in msg.media],
        "external_id": msg.external_id[:512],
        "reply_to_external_id": (msg.reply_to or None) and msg.reply_to[:512],
        "sender_external_id": msg.sender_id[:255],
        "raw": {**msg.raw, "normalized": msg.stored_view()},
        "sent_at": msg.sent_at,
        "inbound_state": InboundState.pending.value,
        "processing_attempts": 0,
        "created_at": utcnow(),
    }


async def _apply_control(session: AsyncSession, msg: InboundMessage, account: AccountRef) -> int:
    """Edit / revoke of an earlier message of the same sender: update that row. Returns rows changed."""
    target = msg.target_external_id
    if not target:
        return 0
    where = and_(
        Message.channel == account.channel,
        Message.channel_account_id == account.id,
        Message.external_id == target,
    )
    if msg.kind == "edit":
        stmt = (
            update(Message)
            .where(where)
            .values(
                text=msg.text,
                media=[m.model_dump(exclude_none=True) for m in msg.media],
                raw=Message.raw.op("||")(
                    {"edited": {"external_id": msg.external_id, "at": msg.sent_at.isoformat()}}
                ),  # type: ignore[union-attr]
            )
        )
    else:
        stmt = (
            update(Message)
            .where(where)
            .values(
                raw=Message.raw.op("||")(
                    {"deleted": {"external_id": msg.external_id, "at": msg.sent_at.isoformat()}}
                ),  # type: ignore[union-attr]
                inbound_state=_revoked_state(),
                last_error=_revoked_error(),
            )
        )
    result = await session.exec(stmt)  # type: ignore[call-overload]
    return int(result.rowcount or 0)


def _revoked_state() -> Any:
    return case(
        (Message.inbound_state == InboundState.pending.value, InboundState.done.value),
        else_=Message.inbound_state,
    )


def _revoked_error() -> Any:
    return case(
        (
            Message.inbound_state == InboundState.pending.value,
            "revoked by the customer before it was answered",
        ),
        else_=Message.last_error,
    )


def status_to_job_arg(status: StatusUpdate) -> dict[str, Any]:
    """A :class:`StatusUpdate` as a small JSON-able dict (ARQ job argument)."""
    return {
        "account_id": status.account_id,
        "external_id": status.external_id,
        "status": status.status,
        "timestamp": status.timestamp.isoformat(),
        "recipient_id": status.recipient_id,
        "error_code": status.error_code,
        "error_title": status.error_title,
        "biz_opaque_callback_data": status.biz_opaque_callback_data,
        "conversation_reason": status.conversation_reason,
    }


def to_delivery_statuses(items: list[dict[str, Any]]) -> list[DeliveryStatus]:
    """Job arguments of ``apply_delivery_statuses`` as neutral statuses (items without an id are dropped)."""
    out: list[DeliveryStatus] = []
    for item in items:
        external_id = item.get("external_id")
        if not external_id:
            continue
        code = item.get("error_code")
        stamp = item.get("timestamp")
        out.append(
            DeliveryStatus(
                account_id=str(item.get("account_id") or ""),
                external_id=str(external_id),
                status=str(item.get("status") or "").lower(),
                timestamp=datetime.fromisoformat(stamp) if stamp else None,
                correlation_id=item.get("biz_opaque_callback_data") or None,
                error_code=str(code) if code is not None else None,
                error_title=item.get("error_title"),
                conversation_reason=item.get("conversation_reason"),
            )
        )
    return out


async def enqueue_inbound(
    redis: ArqRedis, row_id: uuid.UUID, *, defer_s: float = 0.0, job_id: str | None = None
) -> bool:
    """Enqueue ``process_inbound(row_id)`` with an idempotent job id. Returns ``False`` if it already exists."""
    job = await redis.enqueue_job(
        "process_inbound",
        str(row_id),
        _job_id=job_id or inbound_job_id(row_id),
        _defer_by=timedelta(seconds=defer_s) if defer_s > 0 else None,
    )
    return job is not None


async def ingest_delivery(
    *,
    delivery: NormalizedDelivery,
    sessions: async_sessionmaker[AsyncSession],
    redis: ArqRedis | None,
    accounts: AccountDirectory,
    debounce_s: float,
    throttle: Throttle | None = None,
) -> IngestResult:
    """Store every message of ``delivery`` durably, then enqueue jobs for new rows and statuses.

    Args:
        delivery: what the channel's normalizer made of one webhook body.
        accounts: the directory of the delivery's channel (its ``channel`` names the rows).
        debounce_s: how long a new ``process`` row's job is deferred so a burst coalesces (seconds).
        throttle: the channel's throughput-limit error codes; such an error holds the account's sends.

    Raises:
        sqlalchemy.exc.SQLAlchemyError / OSError: the database could not take the insert (the caller
            answers 503 so the provider retries; nothing was committed).
    """
    channel = accounts.channel
    result = IngestResult()
    routed: dict[str, AccountRef] = {}
    for account_id in sorted(delivery.account_ids):
        ref = await accounts.resolve(account_id)
        if ref is None:
            result.unknown_accounts.add(account_id)
            log.warning("webhook_unknown_account", channel=channel, account_id=account_id)
        else:
            routed[account_id] = ref

    rows: list[dict[str, Any]] = []
    controls: list[tuple[InboundMessage, AccountRef]] = []
    seen: set[tuple[uuid.UUID, str]] = set()
    for msg in delivery.messages:
        account = routed.get(msg.account_id)
        if account is None:
            continue
        if msg.kind in ("edit", "revoke"):
            controls.append((msg, account))
            continue
        if (account.id, msg.external_id) in seen:  # the same provider id twice in one body
            result.duplicates += 1
            continue
        seen.add((account.id, msg.external_id))
        rows.append(_row_values(msg, account))

    actions = {row["id"]: row["raw"]["normalized"]["action"] for row in rows}
    if rows or controls:
        async with sessions() as session, session.begin():
            if rows:
                stmt = (
                    insert(Message.__table__)  # type: ignore[arg-type]
                    .values(rows)
                    .on_conflict_do_nothing(constraint="uq_messages_channel_account_external")
                    .returning(Message.__table__.c.id)  # type: ignore[attr-defined]
                )
                inserted = (await session.execute(stmt)).scalars().all()
                result.stored_ids = [row_id for row in rows if (row_id := row["id"]) in set(inserted)]
                result.duplicates += len(rows) - len(inserted)
            for msg, account in controls:
                result.updated_originals += await _apply_control(session, msg, account)

    for msg in delivery.messages:
        account = routed.get(msg.account_id)
        if account is not None:
            log.info(
                "inbound_received",
                channel=channel,
                tenant_id=str(account.tenant_id),
                kind=msg.kind,
                action=msg.action,
            )
    for err in delivery.errors:
        log.warning(
            "webhook_account_error",
            channel=channel,
            account_id=err.account_id,
            code=err.code,
            title=err.title,
            details=err.details,
        )
        if redis is not None and throttle and err.account_id in routed and err.code in throttle.codes:
            try:
                await redis.set(
                    channel_throttle_key(channel, err.account_id),
                    str(err.code),
                    px=int(throttle.backoff_s * 1000),
                )
            except Exception as exc:  # noqa: BLE001 (a lost hint is harmless; logged)
                log.warning("channel_throttle_flag_failed", channel=channel, error=str(exc))

    statuses = [s for s in delivery.statuses if s.account_id in routed]
    result.statuses = len(statuses)
    if redis is None:
        result.enqueue_failures = len(result.stored_ids) + (1 if statuses else 0)
        return result
    for row_id in result.stored_ids:
        defer_s = debounce_s if actions.get(row_id) == "process" else 0.0
        try:
            await enqueue_inbound(redis, row_id, defer_s=defer_s)
        except Exception as exc:  # noqa: BLE001 (row is durable; the sweeper re-enqueues it)
            result.enqueue_failures += 1
            log.error("inbound_enqueue_failed", inbound_message_id=str(row_id), error=str(exc))
    if statuses:
        args = [status_to_job_arg(s) for s in statuses]
        digest = hashlib.sha256(json.dumps([channel, args], sort_keys=True).encode()).hexdigest()[:32]
        try:
            await redis.enqueue_job(
                "apply_delivery_statuses", channel, args, _job_id=f"statuses:{channel}:{digest}"
            )
        except Exception as exc:  # noqa: BLE001 (statuses are hints; the provider sends later ones)
            result.enqueue_failures += 1
            log.error("status_enqueue_failed", channel=channel, count=len(args), error=str(exc))
    return result
