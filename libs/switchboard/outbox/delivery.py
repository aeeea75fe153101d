"""The one delivery loop: every outbox row (reply, notice, relay, a person's reply) is sent from here.

:func:`deliver` sends what is due, in order, through the row's :class:`~switchboard.channels.base.Channel`:

* **Due rows**: ``pending`` with ``next_attempt_at`` null or past, and ``sending`` rows left behind by a
  worker (see *reconcile*), in ``(created_at, inbound_message_id, purpose, part_index)`` order, picked
  with ``FOR UPDATE SKIP LOCKED``. Each row is then claimed in its own short transaction (row lock,
  re-checked), so two loops never send one part twice.
* **Parts go out in order**: rows of one group (same ``inbound_message_id`` and ``purpose``; rows
  without an inbound message: same conversation, purpose and ``created_at``, i.e. one writer call)
  are sent by ``part_index``; a part waits while an earlier one is ``pending``/``sending``, and fails
  (with the earlier part's code) when an earlier one failed.
* **Windows**: a free-form part goes out only within the channel's service window
  (:func:`~switchboard.channels.base.within_window`), counted from the conversation's
  ``last_customer_message_at`` (audience ``customer``) or the agent's ``human_agents.last_inbound_at``
  (audience ``agent``). Outside it an agent gets the tenant's ``handoff.agent_template_name``
  template when the channel sends templates outside the window (``error_code = 'agent_template'``
  on the sent row), else the row fails ``agent_window_closed``; a customer's row fails
  ``window_closed`` and the reason is recorded on the conversation.
* **Throttle**: a provider's throughput error (:attr:`SendErrorKind.throttled`) sets
  :func:`~switchboard.queue.keys.channel_throttle_key` for the sending account, for a hold that grows
  with the limits hit in a row, jittered and capped (:func:`~switchboard.outbox.policy.throttle_hold_s`:
  ``WHATSAPP_THROTTLE_BACKOFF_S`` doubled up to ``WHATSAPP_THROTTLE_BACKOFF_MAX_S``, at least the
  ``Retry-After``); while it is set, every row of that account waits, each until a random moment within
  ``DELIVERY_THROTTLE_SPREAD_S`` after the key's expiry (:func:`~switchboard.outbox.policy.throttle_release`),
  so the end of a hold does not send them all at once. A throttled call does not count as an attempt.
* **Mark sending, then send, then record**: the claim sets ``status='sending'``, ``sending_at`` and
  ``attempts + 1`` and commits before the provider call; the answer is recorded afterwards (``sent``,
  ``external_id``, ``sent_at``; statuses parked for that id are applied then).
* **Reconcile**: a row found ``sending`` was handed to the provider by a worker that died, or whose
  answer was lost (no answer, or a 5xx that is not a provider error: the provider may have accepted
  it). On a channel that echoes a correlation id (``Capabilities.correlation_echo``), a status
  callback carrying ``correlation_id`` moves the row forward by itself
  (:func:`switchboard.outbox.statuses.apply_statuses`); when none came within
  ``DELIVERY_RECONCILE_AFTER_S`` the row is logged ``delivery_unconfirmed`` and sent again — delivery
  is **at-least-once**: a provider that accepted the first copy and never reported it shows the
  customer two. Channels without the echo put such a row back to ``pending`` once it is older than
  :data:`IN_FLIGHT_S` (no callback can ever confirm it).
* **Transient errors**: capped exponential back-off with full jitter (``DELIVERY_BACKOFF_BASE_S`` ×
  2^(attempt-1), at most ``DELIVERY_BACKOFF_MAX_S``; a ``Retry-After`` is a lower bound), and after
  ``DELIVERY_MAX_ATTEMPTS`` provider calls the row is dead-lettered: ``failed`` / ``dead_letter`` and
  an error log ``delivery_dead_letter`` (there is no operations-alert table; security alerts are for
  denials, so this is a log only).
* **Permanent and window errors from the provider** fail the part and the later parts of its group
  with the provider's code; a customer's conversation records why.
* **Read receipts**: once the first part of a reply is sent, the customer's message is marked read
  (:meth:`Channel.mark_read`, once per inbound message; a failure is logged ``mark_read_failed``).

Every log line carries ``tenant_id``, ``conversation_id``, ``trace_id`` and ``outbox_id``.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import structlog
from arq.connections import ArqRedis
from sqlalchemy import and_, case, func, or_, update
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.channels.base import Channel, OutboundPart, SendError, SendErrorKind
from switchboard.db.models import (
    ChannelAccount,
    Conversation,
    Message,
    MessageDirection,
    Outbox,
    OutboxPurpose,
    OutboxStatus,
    utcnow,
)
from switchboard.live_updates import publish_conversation_event
from switchboard.observability import get_logger, message_context, metrics, tracing
from switchboard.outbox.policy import (
    Refusal,
    audience_of,
    backoff_s,
    conversation_reason,
    may_send,
    outcome_unknown,
    throttle_hold_s,
    throttle_release,
)
from switchboard.outbox.statuses import apply_statuses, take_parked
from switchboard.queue.keys import channel_throttle_count_key, channel_throttle_key, mark_read_key
from switchboard.settings import Settings

__all__ = [
    "IN_FLIGHT_S",
    "DeliveryDeps",
    "DeliveryReport",
    "DeliveryScope",
    "deliver",
    "same_group",
]

log = get_logger(__name__)

IN_FLIGHT_S = 60.0
"""A live worker records the provider's answer within this long of marking a row ``sending`` (one
provider call times out after ``WHATSAPP_SEND_TIMEOUT_S``, 15 s; a media part makes a few). An older
``sending`` row on a channel without correlation echo belongs to a dead worker (seconds)."""
LEFT_OVER_SCAN = 10_000
"""Unfinished rows :func:`deliver` reads to tell when the next one is due (the count is exact)."""
MARK_READ_MEMORY_S = 7 * 86_400
"""How long "this inbound message was marked read" is remembered (seconds; replies come within hours)."""

_PENDING = OutboxStatus.pending.value
_SENDING = OutboxStatus.sending.value
_FAILED = OutboxStatus.failed.value
_UNFINISHED = (_PENDING, _SENDING)


@dataclass(frozen=True, kw_only=True)
class DeliveryScope:
    """Which rows :func:`deliver` looks at; fields combine (AND). Empty: everything due."""

    inbound_message_id: uuid.UUID | None = None
    """Rows written for one inbound message (its reply, relay, command answers)."""
    conversation_id: uuid.UUID | None = None
    """Rows of one conversation (a customer's, or an agent's console conversation)."""
    tenant_id: uuid.UUID | None = None
    recipient: str | None = None
    """Rows to one provider address (an agent's phone); needs ``tenant_id``."""
    purposes: frozenset[OutboxPurpose] | None = None
    """Only these purposes (``None``: all)."""
    plus_conversation_id: uuid.UUID | None = None
    """Also every row of this conversation: with ``inbound_message_id``, the rows of the message OR of
    the conversation (an inbound message's parts, wherever they go, and what its conversation has due,
    such as a notice written meanwhile) in one pass."""

    def __post_init__(self) -> None:
        if self.plus_conversation_id is not None and (
            self.inbound_message_id is None or self.conversation_id is not None
        ):
            raise ValueError("DeliveryScope.plus_conversation_id goes with inbound_message_id alone")
        if self.recipient is not None and self.tenant_id is None:
            raise ValueError("DeliveryScope.recipient needs tenant_id (addresses are per tenant)")
        if self.purposes is not None and not isinstance(self.purposes, frozenset):
            object.__setattr__(self, "purposes", frozenset(OutboxPurpose(p) for p in self.purposes))


@dataclass(kw_only=True)
class DeliveryDeps:
    """What the delivery loop uses (built once per worker process)."""

    sessions: async_sessionmaker[AsyncSession]
    redis: ArqRedis
    """Throttle keys, parked statuses, "marked read" memory."""
    channels: dict[str, Channel]
    """Channel name → instance (:func:`switchboard.channels.base.build_channels`)."""
    settings: Settings
    rng: Callable[[], float] = field(default=random.random)
    """Source of the back-off jitter (uniform in [0, 1))."""


@dataclass
class DeliveryReport:
    """What one :func:`deliver` call did, and what is left in its scope."""

    sent: int = 0
    """Parts the provider accepted in this call."""
    failed: int = 0
    """Parts marked ``failed`` in this call (including later parts of a failed group)."""
    pending: int = 0
    """Parts of the scope still ``pending`` or ``sending`` afterwards."""
    retry_in_s: float | None = None
    """Seconds until the earliest of those can be tried again (0: now), ``None`` when none is left."""


@dataclass
class _Run:
    """State of one :func:`deliver` call."""

    deps: DeliveryDeps
    report: DeliveryReport = field(default_factory=DeliveryReport)
    throttled_until: dict[tuple[str, str], datetime | None] = field(default_factory=dict)
    """(channel, provider account id) → when its throttle key expires (``None``: not throttled)."""
    blocked_groups: set[tuple[Any, ...]] = field(default_factory=set)
    """Groups whose next part waits or failed in this call: their later parts are not tried again."""

    async def throttle_expiry(self, channel: str, account_id: str, now: datetime) -> datetime | None:
        key = (channel, account_id)
        if key not in self.throttled_until:
            ttl_ms = int(await self.deps.redis.pttl(channel_throttle_key(channel, account_id)))
            self.throttled_until[key] = now + timedelta(milliseconds=ttl_ms) if ttl_ms > 0 else None
        return self.throttled_until[key]


@dataclass(frozen=True)
class _Claimed:
    """A row marked ``sending``, with what its provider call needs."""

    row: Outbox
    channel: Channel
    account: ChannelAccount
    part: OutboundPart
    via_template: bool


def _group_key(row: Any) -> tuple[Any, ...]:
    if row.inbound_message_id is not None:
        return ("inbound", row.inbound_message_id, row.purpose)
    return ("batch", row.conversation_id, row.purpose, row.created_at)


def same_group(row: Outbox) -> Any:
    """Rows of ``row``'s group (see the module docstring)."""
    if row.inbound_message_id is not None:
        return and_(Outbox.inbound_message_id == row.inbound_message_id, Outbox.purpose == row.purpose)
    return and_(
        col(Outbox.inbound_message_id).is_(None),
        Outbox.conversation_id == row.conversation_id,
        Outbox.purpose == row.purpose,
        Outbox.created_at == row.created_at,
    )


def _in_scope(scope: DeliveryScope) -> list[Any]:
    where: list[Any] = []
    if scope.plus_conversation_id is not None:
        where.append(
            or_(
                Outbox.inbound_message_id == scope.inbound_message_id,
                Outbox.conversation_id == scope.plus_conversation_id,
            )
        )
    elif scope.inbound_message_id is not None:
        where.append(Outbox.inbound_message_id == scope.inbound_message_id)
    if scope.conversation_id is not None:
        where.append(Outbox.conversation_id == scope.conversation_id)
    if scope.tenant_id is not None:
        where.append(Outbox.tenant_id == scope.tenant_id)
    if scope.recipient is not None:
        where.append(Outbox.recipient == scope.recipient)
    if scope.purposes is not None:
        where.append(col(Outbox.purpose).in_(sorted(p.value for p in scope.purposes)))
    return where


@contextmanager
def _row_context(row: Any) -> Iterator[None]:
    """Bind the row's ids to every log line of its delivery."""
    with (
        message_context(
            tenant_id=str(row.tenant_id), conversation_id=str(row.conversation_id), trace_id=row.trace_id
        ),
        structlog.contextvars.bound_contextvars(outbox_id=str(row.id)),
    ):
        yield


async def deliver(
    deps: DeliveryDeps,
    scope: DeliveryScope = DeliveryScope(),
    *,
    limit: int = 200,
    time_budget_s: float | None = None,
) -> DeliveryReport:
    """Send the due outbox rows of ``scope`` (see the module docstring); safe to run any number of
    times, from any number of workers at once.

    Args:
        deps: sessions, Redis, channels, settings.
        scope: which rows (default: every due row).
        limit: rows looked at in this call (oldest first).
        time_budget_s: stop claiming new rows after this long (a job ends before its timeout cancels
            a provider call); ``None``: no bound.

    Returns:
        Counts of this call and what is left in the scope (:class:`DeliveryReport`).
    """
    run = _Run(deps)
    deadline = time.monotonic() + time_budget_s if time_budget_s is not None else None
    for candidate in await _due_rows(deps, scope, limit):
        if deadline is not None and time.monotonic() > deadline:
            break
        if _group_key(candidate) in run.blocked_groups:
            continue
        with _row_context(candidate):
            claimed = await _claim(run, candidate.id)
            if isinstance(claimed, _Claimed):
                await _send(run, claimed)
    run.report.pending, run.report.retry_in_s = await _left_over(deps, scope)
    return run.report


async def _due_rows(deps: DeliveryDeps, scope: DeliveryScope, limit: int) -> list[Any]:
    now = utcnow()
    stale = now - timedelta(seconds=min(deps.settings.delivery_reconcile_after_s, IN_FLIGHT_S))
    async with deps.sessions() as session, session.begin():
        query = (
            select(
                Outbox.id,
                Outbox.tenant_id,
                Outbox.conversation_id,
                Outbox.trace_id,
                Outbox.inbound_message_id,
                Outbox.purpose,
                Outbox.created_at,
            )
            .where(
                or_(
                    and_(
                        Outbox.status == _PENDING,
                        or_(col(Outbox.next_attempt_at).is_(None), col(Outbox.next_attempt_at) <= now),
                    ),
                    and_(
                        Outbox.status == _SENDING,
                        or_(col(Outbox.sending_at).is_(None), col(Outbox.sending_at) < stale),
                    ),
                ),
                *_in_scope(scope),
            )
            .order_by(
                *_message_first(scope),
                col(Outbox.created_at),
                col(Outbox.inbound_message_id),
                col(Outbox.purpose),
                col(Outbox.part_index),
            )
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        return list((await session.exec(query)).all())


def _message_first(scope: DeliveryScope) -> list[Any]:
    """With ``plus_conversation_id``: the message's own rows before the conversation's others (its reply
    reaches the customer before a notice the turn wrote, as two passes did)."""
    if scope.plus_conversation_id is None:
        return []
    return [case((Outbox.inbound_message_id == scope.inbound_message_id, 0), else_=1)]


def _is_due(row: Outbox, channel: Channel, settings: Settings, now: datetime) -> bool:
    if row.status == _PENDING:
        return row.next_attempt_at is None or row.next_attempt_at <= now
    if row.status != _SENDING:
        return False
    grace_s = settings.delivery_reconcile_after_s if channel.capabilities.correlation_echo else IN_FLIGHT_S
    return row.sending_at is None or row.sending_at <= now - timedelta(seconds=grace_s)


async def _claim(run: _Run, row_id: uuid.UUID) -> _Claimed | None:
    """Lock one row and decide: ``_Claimed`` (marked ``sending``, committed) or ``None`` (it waits,
    failed, or is not ours)."""
    deps, settings = run.deps, run.deps.settings
    async with deps.sessions() as session, session.begin():
        row = (
            await session.exec(select(Outbox).where(Outbox.id == row_id).with_for_update(skip_locked=True))
        ).first()
        if row is None:
            return None
        channel = deps.channels.get(row.channel)
        if channel is None:
            log.warning("delivery_channel_unavailable", channel=row.channel)
            run.blocked_groups.add(_group_key(row))
            return None
        now = utcnow()
        if not _is_due(row, channel, settings, now):
            return None
        if row.status == _SENDING:  # reconcile: no status arrived for it (see the module docstring)
            if row.attempts >= settings.delivery_max_attempts:
                await _dead_letter(run, session, row, "no answer from the provider")
                return None
            if channel.capabilities.correlation_echo:
                log.warning(
                    "delivery_unconfirmed",
                    attempts=row.attempts,
                    sending_at=row.sending_at.isoformat() if row.sending_at else None,
                    reconcile_after_s=settings.delivery_reconcile_after_s,
                )
            else:
                log.info("delivery_sending_released", attempts=row.attempts)
            row.status = _PENDING  # sent again below unless it has to wait
        if row.correlation_id is None:  # a row written before correlation ids existed
            row.correlation_id = f"sb:{row.id.hex}"
        earlier = await _earlier_unfinished_or_failed(session, row)
        if earlier is not None and earlier.status == _FAILED:
            await _fail(
                run,
                session,
                row,
                earlier.error_code or "earlier_part_failed",
                f"not sent: part {earlier.part_index} failed: {earlier.error_message or earlier.error_code}",
            )
            return None
        if earlier is not None:
            run.blocked_groups.add(_group_key(row))
            return None
        account = await _account_of(session, row)
        if account is None:
            await _fail(run, session, row, "no_account", f"no active {row.channel} account to send from")
            return None
        expiry = await run.throttle_expiry(row.channel, account.external_account_id, now)
        if expiry is not None:
            release = throttle_release(
                expiry, spread_s=run.deps.settings.delivery_throttle_spread_s, rng=run.deps.rng
            )
            row.status, row.next_attempt_at, row.updated_at = _PENDING, release, now
            session.add(row)
            run.blocked_groups.add(_group_key(row))
            log.info("delivery_throttled_wait", until=expiry.isoformat())
            return None
        part = OutboundPart.from_payload(row.payload or {})
        decision = await may_send(session, row, channel, part, now)
        if isinstance(decision, Refusal):
            await _fail(
                run, session, row, decision.code, decision.message, reason=decision.conversation_reason
            )
            log.warning("delivery_outside_window", error_code=decision.code, audience=audience_of(row))
            return None
        part, via_template = decision
        row.status, row.sending_at, row.updated_at = _SENDING, now, now
        row.attempts += 1
        row.next_attempt_at = None
        session.add(row)
    return _Claimed(row=row, channel=channel, account=account, part=part, via_template=via_template)


async def _earlier_unfinished_or_failed(session: AsyncSession, row: Outbox) -> Outbox | None:
    """The first earlier part of ``row``'s group that failed, else one still pending/sending, else ``None``."""
    if row.part_index == 0:  # the first part (most replies are one): nothing comes before it
        return None
    earlier = list(
        (
            await session.exec(
                select(Outbox)
                .where(
                    same_group(row),
                    Outbox.part_index < row.part_index,
                    col(Outbox.status).in_((*_UNFINISHED, _FAILED)),
                )
                .order_by(col(Outbox.part_index))
            )
        ).all()
    )
    failed = [e for e in earlier if e.status == _FAILED]
    return failed[0] if failed else (earlier[0] if earlier else None)


async def _account_of(session: AsyncSession, row: Outbox) -> ChannelAccount | None:
    """The row's sending account, else its conversation's (rows written before accounts were stored)."""
    account_id = row.channel_account_id
    if account_id is None:
        conversation = await session.get(Conversation, row.conversation_id)
        account_id = conversation.channel_account_id if conversation else None
    account = await session.get(ChannelAccount, account_id) if account_id else None
    if account is None or account.tenant_id != row.tenant_id or account.channel != row.channel:
        return None
    return account


async def _fail(
    run: _Run, session: AsyncSession, row: Outbox, code: str, message: str, *, reason: str | None = None
) -> None:
    """Fail ``row`` and the later pending parts of its group (same code); record ``reason`` on a
    customer's conversation."""
    now = utcnow()
    row.status, row.error_code, row.error_message = _FAILED, code[:32], message
    row.next_attempt_at, row.updated_at = None, now
    session.add(row)
    later = (
        await session.exec(
            update(Outbox)
            .where(same_group(row), Outbox.part_index > row.part_index, Outbox.status == _PENDING)
            .values(
                status=_FAILED,
                error_code=code[:32],
                error_message=f"not sent: part {row.part_index} failed: {message}",
                next_attempt_at=None,
                updated_at=now,
            )
            .returning(Outbox.id)
        )
    ).all()
    run.report.failed += 1 + len(later)
    run.blocked_groups.add(_group_key(row))
    if reason and audience_of(row) == "customer":
        await session.exec(
            update(Conversation)
            .where(Conversation.id == row.conversation_id)
            .values(escalation_reason=reason)
        )
    log.warning("delivery_failed", error_code=code, later_parts_failed=len(later))


async def _dead_letter(run: _Run, session: AsyncSession, row: Outbox, last_error: str) -> None:
    await _fail(run, session, row, "dead_letter", f"gave up after {row.attempts} attempts: {last_error}")
    metrics.DEAD_LETTERS.labels("outbox").inc()
    log.error(
        "delivery_dead_letter",
        tenant_id=str(row.tenant_id),
        conversation_id=str(row.conversation_id),
        trace_id=row.trace_id,
        outbox_id=str(row.id),
        attempts=row.attempts,
        error=last_error,
    )


async def _send(run: _Run, claimed: _Claimed) -> None:
    """One provider call for one claimed part, in an ``outbox.send`` span of the message's trace;
    counted in ``switchboard_sends_total`` by channel and what became of the part."""
    row = claimed.row
    assert row.correlation_id is not None
    attributes = {
        "channel": claimed.channel.name,
        "outbox.id": str(row.id),
        "outbox.part_index": row.part_index,
        "outbox.purpose": str(row.purpose),
        "outbox.attempt": row.attempts,
    }
    with (
        tracing.within_message_trace(row.trace_id),
        tracing.span("outbox.send", kind=tracing.SpanKind.CLIENT, attributes=attributes) as current,
    ):
        try:
            external_id = await claimed.channel.send(
                claimed.account, row.recipient, claimed.part, correlation_id=row.correlation_id
            )
        except SendError as exc:
            status = await _record_error(run, claimed, exc)
            current.set_attribute("send.error_code", exc.code or exc.kind.value)
            tracing.set_error(current, exc.kind.value)
        except Exception as exc:  # noqa: BLE001 (an adapter bug must not leave the part "sending"; logged)
            log.exception("delivery_send_crashed", error=f"{type(exc).__name__}: {exc}")
            error = SendError(
                f"{type(exc).__name__}: {exc}", kind=SendErrorKind.transient, code="send_crashed"
            )
            status = await _record_error(run, claimed, error)
            tracing.set_error(current, "send_crashed")
        else:
            await _record_sent(run, claimed, external_id)
            status = "sent"
        current.set_attribute("send.status", status)
        metrics.SENDS.labels(claimed.channel.name, status).inc()


async def _locked_sending(session: AsyncSession, row_id: uuid.UUID) -> Outbox | None:
    """The row, locked, if it is still ``sending`` (a status callback may have moved it meanwhile)."""
    row = (await session.exec(select(Outbox).where(Outbox.id == row_id).with_for_update())).first()
    return row if row is not None and row.status == _SENDING else None


async def _record_sent(run: _Run, claimed: _Claimed, external_id: str) -> None:
    deps, now = run.deps, utcnow()
    async with deps.sessions() as session, session.begin():
        # one conditional UPDATE (it takes the row's lock and re-checks the status after waiting for it)
        recorded = await session.exec(
            update(Outbox)
            .where(Outbox.id == claimed.row.id, Outbox.status == _SENDING)
            .values(
                status=OutboxStatus.sent.value,
                external_id=external_id,
                sent_at=now,
                updated_at=now,
                error_code="agent_template" if claimed.via_template else None,
                error_message=None,
            )
            .execution_options(synchronize_session=False)
        )
        if not recorded.rowcount:
            # a status callback (by correlation id) got here first: keep what it recorded
            await session.exec(
                update(Outbox)
                .where(Outbox.id == claimed.row.id, col(Outbox.external_id).is_(None))
                .values(external_id=external_id, updated_at=now)
            )
    run.report.sent += 1
    await publish_conversation_event(
        deps.redis,
        tenant_id=claimed.row.tenant_id,
        conversation_id=claimed.row.conversation_id,
        kind="delivery",
    )
    log.info(
        "delivery_sent",
        channel=claimed.channel.name,
        purpose=claimed.row.purpose,
        part_index=claimed.row.part_index,
        attempts=claimed.row.attempts,
        via_template=claimed.via_template,
    )
    parked = await take_parked(
        deps.redis, claimed.channel.name, claimed.account.external_account_id, external_id
    )
    if parked:
        changed = await apply_statuses(deps.sessions, deps.redis, claimed.channel.name, parked)
        log.info("delivery_parked_statuses_applied", statuses=len(parked), changed=changed)
    if claimed.row.purpose == OutboxPurpose.reply.value and claimed.row.inbound_message_id is not None:
        await _mark_read(run, claimed)


async def _mark_read(run: _Run, claimed: _Claimed) -> None:
    if not claimed.channel.capabilities.read_receipts:
        return
    inbound_id = claimed.row.inbound_message_id
    assert inbound_id is not None
    async with run.deps.sessions() as session:  # two columns, not the row and its webhook JSON
        inbound = (
            await session.exec(select(Message.direction, Message.external_id).where(Message.id == inbound_id))
        ).first()
    if inbound is None or inbound.direction != MessageDirection.inbound.value or not inbound.external_id:
        return
    if not await run.deps.redis.set(mark_read_key(inbound_id), "1", nx=True, ex=MARK_READ_MEMORY_S):
        return
    try:
        await claimed.channel.mark_read(claimed.account, inbound.external_id, sender=claimed.row.recipient)
    except Exception as exc:  # noqa: BLE001 (blue ticks are a courtesy; never fatal)
        code = exc.code if isinstance(exc, SendError) else type(exc).__name__
        log.warning("mark_read_failed", error_code=code, inbound_message_id=str(inbound_id))


async def _throttle_hold(run: _Run, channel: str, account_id: str, retry_after_s: float | None) -> float:
    """The hold of an account that just hit a throughput limit (:func:`throttle_hold_s`), seconds: it
    grows with the limits hit in a row (a count that lapses once a hold and as long again passed)."""
    settings = run.deps.settings
    key = channel_throttle_count_key(channel, account_id)
    throttles = int(await run.deps.redis.incr(key))
    hold_s = throttle_hold_s(
        throttles,
        retry_after_s=retry_after_s,
        base_s=settings.whatsapp_throttle_backoff_s,
        cap_s=settings.whatsapp_throttle_backoff_max_s,
        rng=run.deps.rng,
    )
    await run.deps.redis.expire(key, int(2 * hold_s) + 1)
    return hold_s


async def _record_error(run: _Run, claimed: _Claimed, exc: SendError) -> str:
    """Record a failed send. Returns what became of the part: ``throttled``, ``failed``, ``unknown``
    (maybe accepted: awaiting a status), ``dead_letter``, ``retry`` or ``settled`` (a status came first)."""
    deps, settings, now = run.deps, run.deps.settings, utcnow()
    fields = {"kind": exc.kind.value, "error_code": exc.code, "http_status": exc.http_status}
    until: datetime | None = None
    # The account's limit holds every row of the account, whatever the state of this one.
    if exc.kind is SendErrorKind.throttled:
        account_id = claimed.account.external_account_id
        hold_s = await _throttle_hold(run, claimed.channel.name, account_id, exc.retry_after_s)
        await deps.redis.set(
            channel_throttle_key(claimed.channel.name, account_id),
            exc.code or "throttled",
            px=max(int(hold_s * 1000), 1),
        )
        until = now + timedelta(seconds=hold_s)
        run.throttled_until[(claimed.channel.name, account_id)] = until
        log.warning("delivery_throttled", hold_s=hold_s, **fields)
    async with deps.sessions() as session, session.begin():
        row = await _locked_sending(session, claimed.row.id)
        if row is None:
            log.info("delivery_error_after_status", **fields)
            return "settled"
        message = str(exc)[:500]
        if until is not None:
            row.status, row.next_attempt_at = _PENDING, until
            row.attempts -= 1  # the account's limit, not this message's failure
            row.error_code, row.error_message, row.updated_at = (exc.code or "throttled")[:32], message, now
            session.add(row)
            run.blocked_groups.add(_group_key(row))
            return "throttled"
        if exc.kind in (SendErrorKind.permanent, SendErrorKind.window_closed):
            code = exc.code or exc.kind.value
            reason = conversation_reason(claimed.channel, exc, code)
            await _fail(run, session, row, code, message, reason=reason)
            return "failed"
        if outcome_unknown(exc) and claimed.channel.capabilities.correlation_echo:
            # Maybe accepted: wait for a status with our correlation id before sending again.
            row.error_code, row.error_message, row.updated_at = "no_answer", message, now
            session.add(row)
            run.blocked_groups.add(_group_key(row))
            log.warning(  # the error says which network failure (a refused connection was never sent)
                "delivery_outcome_unknown",
                reconcile_after_s=settings.delivery_reconcile_after_s,
                error=message[:200],
                **fields,
            )
            return "unknown"
        if row.attempts >= settings.delivery_max_attempts:
            await _dead_letter(run, session, row, message)
            return "dead_letter"
        delay_s = backoff_s(
            row.attempts,
            base_s=settings.delivery_backoff_base_s,
            max_s=settings.delivery_backoff_max_s,
            rng=deps.rng,
        )
        if exc.retry_after_s:
            delay_s = max(delay_s, exc.retry_after_s)
        row.status, row.next_attempt_at = _PENDING, now + timedelta(seconds=delay_s)
        row.error_code, row.error_message, row.updated_at = (exc.code or "transient")[:32], message, now
        session.add(row)
        run.blocked_groups.add(_group_key(row))
        log.warning("delivery_retry", attempts=row.attempts, delay_s=round(delay_s, 3), **fields)
    return "retry"


async def _left_over(deps: DeliveryDeps, scope: DeliveryScope) -> tuple[int, float | None]:
    """Unfinished rows of ``scope``, and when the first unfinished part of any of their groups is due
    (later parts wait for it; at most :data:`LEFT_OVER_SCAN` rows are looked at for that)."""
    # One statement, so the count and the rows come from one snapshot: with two, a row finished by
    # another delivery in between left a count with no rows (``min()`` of nothing, CI stop 33).
    async with deps.sessions() as session:
        rows = (
            await session.exec(
                select(
                    Outbox.status,
                    Outbox.channel,
                    Outbox.next_attempt_at,
                    Outbox.sending_at,
                    Outbox.inbound_message_id,
                    Outbox.purpose,
                    Outbox.conversation_id,
                    Outbox.created_at,
                    func.count().over().label("unfinished"),
                )
                .where(col(Outbox.status).in_(_UNFINISHED), *_in_scope(scope))
                .order_by(col(Outbox.part_index))
                .limit(LEFT_OVER_SCAN)
            )
        ).all()
    if not rows:
        return 0, None
    now, heads = utcnow(), {}
    for row in rows:
        heads.setdefault(_group_key(row), row)
    return int(rows[0].unfinished), min(_due_in_s(deps, row, now) for row in heads.values())


def _due_in_s(deps: DeliveryDeps, row: Outbox, now: datetime) -> float:
    if row.status == _SENDING:
        channel = deps.channels.get(row.channel)
        echo = channel is not None and channel.capabilities.correlation_echo
        grace_s = deps.settings.delivery_reconcile_after_s if echo else IN_FLIGHT_S
        due = (row.sending_at or now) + timedelta(seconds=grace_s)
    else:
        due = row.next_attempt_at or now
    return max(0.0, (due - now).total_seconds())
