"""Make a webhook delivery durable (DESIGN.md step 1), then enqueue one job per new row.

* One ``INSERT ... ON CONFLICT DO NOTHING RETURNING id`` per delivery into ``messages``, unique on
  ``(channel, channel_account_id, external_id)``: a redelivered webhook (even two copies at the same
  instant on two processes) inserts nothing the second time, so it is processed once.
* Edits and revokes change the original row instead of adding one (INDEX: "no new message row");
  a revoked message still waiting for its turn is marked done so it is never answered.
* Only after the transaction commits are jobs enqueued (job id ``inbound:<row id>``, deferred by the
  debounce window so bursts coalesce). An enqueue failure is logged and left to the sweeper: the
  row is already safe.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from arq.connections import ArqRedis
from sqlalchemy import and_, case, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.channels.whatsapp.accounts import AccountDirectory, AccountRef
from switchboard.channels.whatsapp.normalize import NormalizedDelivery, StatusUpdate
from switchboard.contracts import InboundMessage
from switchboard.db.models import InboundState, Message, utcnow
from switchboard.observability import get_logger
from switchboard.queue.keys import channel_throttle_key, inbound_job_id
from switchboard.settings import Settings

__all__ = ["IngestResult", "ingest_delivery", "enqueue_inbound", "status_to_job_arg"]

log = get_logger(__name__)


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
        "channel": "whatsapp",
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
        Message.channel == "whatsapp",
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
    }


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
    settings: Settings,
) -> IngestResult:
    """Store every message of ``delivery`` durably, then enqueue jobs for new rows and statuses.

    Raises:
        sqlalchemy.exc.SQLAlchemyError / OSError: the database could not take the insert (the caller
            answers 503 so Meta retries; nothing was committed).
    """
    result = IngestResult()
    routed: dict[str, AccountRef] = {}
    for account_id in sorted(delivery.account_ids):
        ref = await accounts.resolve(account_id)
        if ref is None:
            result.unknown_accounts.add(account_id)
            log.warning("whatsapp_unknown_account", phone_number_id=account_id)
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
        if (account.id, msg.external_id) in seen:  # the same wamid twice in one body
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
                channel="whatsapp",
                tenant_id=str(account.tenant_id),
                kind=msg.kind,
                action=msg.action,
            )
    for err in delivery.errors:
        log.warning(
            "whatsapp_account_error",
            phone_number_id=err.account_id,
            code=err.code,
            title=err.title,
            details=err.details,
        )
        if redis is not None and err.account_id in routed and err.code in (130429, 131056, 80007, 4):
            try:
                await redis.set(
                    channel_throttle_key("whatsapp", err.account_id),
                    str(err.code),
                    px=int(settings.whatsapp_throttle_backoff_s * 1000),
                )
            except Exception as exc:  # noqa: BLE001 (a lost hint is harmless; logged)
                log.warning("whatsapp_throttle_flag_failed", error=str(exc))

    statuses = [s for s in delivery.statuses if s.account_id in routed]
    result.statuses = len(statuses)
    if redis is None:
        result.enqueue_failures = len(result.stored_ids) + (1 if statuses else 0)
        return result
    for row_id in result.stored_ids:
        defer_s = settings.inbound_debounce_s if actions.get(row_id) == "process" else 0.0
        try:
            await enqueue_inbound(redis, row_id, defer_s=defer_s)
        except Exception as exc:  # noqa: BLE001 (row is durable; the sweeper re-enqueues it)
            result.enqueue_failures += 1
            log.error("inbound_enqueue_failed", inbound_message_id=str(row_id), error=str(exc))
    if statuses:
        args = [status_to_job_arg(s) for s in statuses]
        digest = hashlib.sha256(json.dumps(args, sort_keys=True).encode()).hexdigest()[:32]
        try:
            await redis.enqueue_job("apply_whatsapp_statuses", args, _job_id=f"wa-statuses:{digest}")
        except Exception as exc:  # noqa: BLE001 (statuses are hints; Meta will send later ones)
            result.enqueue_failures += 1
            log.error("status_enqueue_failed", count=len(args), error=str(exc))
    return result
