"""Make a webhook delivery durable (docs/concepts.md#the-message-path), then enqueue one job per new row — for every channel.

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
* A stored row with an expiring media handle (an Instagram CDN link, a WhatsApp media id) also gets a
  ``copy_inbound_media`` job at once (:mod:`switchboard.media.jobs`), so the bytes are ours before the
  handle dies.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg
from arq.connections import ArqRedis
from sqlalchemy import and_, case, update
from sqlalchemy.dialects.postgresql import JSONB, insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, async_sessionmaker
from sqlalchemy.pool import QueuePool
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.channels.accounts import AccountDirectory, AccountRef
from switchboard.channels.sanitize import UNPROCESSABLE_PREFIX, clean_tree, unprocessable_reason
from switchboard.contracts import InboundMessage
from switchboard.db.driver_pool import DriverPool
from switchboard.db.errors import is_connection_error
from switchboard.db.models import InboundState, Message, utcnow
from switchboard.observability import get_logger, tracing
from switchboard.queue import jobs
from switchboard.queue.enqueue import JobSpec, enqueue_jobs
from switchboard.queue.keys import channel_throttle_key

__all__ = [
    "UNPROCESSABLE_FLAG",
    "IngestResult",
    "NormalizedDelivery",
    "StatusUpdate",
    "Throttle",
    "WebhookErrorEvent",
    "ingest_delivery",
    "status_to_job_arg",
]

log = get_logger(__name__)

UNPROCESSABLE_FLAG = "unprocessable"
"""``InboundMessage.flags`` key a normalizer sets (to the reason) on a message it could only partly read:
the row is stored with that reason and never processed (:mod:`switchboard.channels.sanitize`)."""
_EXTERNAL_ID_MAX = 512
"""``messages.external_id`` column length."""


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


def _stored_external_id(external_id: str) -> str:
    """The provider id as stored: as is when it fits the column, else a stable digest of it (so a
    redelivery of the same over-long id is still a duplicate, and never collides with a real id)."""
    if len(external_id) <= _EXTERNAL_ID_MAX:
        return external_id
    return "sha256:" + hashlib.sha256(external_id.encode("utf-8", "surrogatepass")).hexdigest()


def _nothing_to_answer(msg: InboundMessage) -> bool:
    """A message that would wake the agent with nothing to read (blank text, no media, no payload):
    recorded instead, so it never takes over the turn of the customer's earlier messages (coalescing
    defers to the newest waking message, and a blank one would answer none of them)."""
    return msg.action == "process" and not msg.text.strip() and not msg.media and not msg.payload


def _row_values(msg: InboundMessage, account: AccountRef, *, cleaned: bool = False) -> dict[str, Any]:
    if _nothing_to_answer(msg):
        msg = msg.model_copy(update={"action": "record", "flags": {**msg.flags, "blank": True}})
    is_echo = msg.echo
    reason = msg.flags.get(UNPROCESSABLE_FLAG) or unprocessable_reason(msg)
    row = {
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
        "external_id": _stored_external_id(msg.external_id),
        "reply_to_external_id": (msg.reply_to or None) and msg.reply_to[:512],
        "sender_external_id": msg.sender_id[:255],
        "raw": {**msg.raw, "normalized": msg.stored_view()},
        "sent_at": msg.sent_at,
        "inbound_state": InboundState.done.value if reason else InboundState.pending.value,
        "last_error": f"{UNPROCESSABLE_PREFIX}{reason}"[:1000] if reason else None,
        "processing_attempts": 0,
        "created_at": utcnow(),
    }
    if cleaned:  # from a body the webhook route already made storable
        return row
    # channels whose messages do not come through the webhook route (Gmail's sync) are cleaned here
    for key in _CLEANED_COLUMNS:
        row[key] = clean_tree(row[key])
    return row


_CLEANED_COLUMNS = (
    "kind",
    "text",
    "media",
    "external_id",
    "reply_to_external_id",
    "sender_external_id",
    "raw",
)
"""Columns a provider's text reaches: made storable (:mod:`switchboard.storable`) before the insert."""


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


_ENQUEUE_FAILED = {
    jobs.COPY_INBOUND_MEDIA.name: "media_copy_enqueue_failed",
    jobs.APPLY_DELIVERY_STATUSES.name: "status_enqueue_failed",
}
"""Log event of a failed enqueue per job function (``inbound_enqueue_failed`` otherwise)."""


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]


async def _store(
    sessions: async_sessionmaker[AsyncSession],
    rows: list[dict[str, Any]],
    controls: list[tuple[InboundMessage, AccountRef]],
    result: IngestResult,
    driver: DriverPool | None = None,
) -> None:
    """Insert ``rows`` (duplicates ignored) and apply ``controls`` in one transaction; fills ``result``.

    Without controls it is one statement, atomic by itself: it runs in autocommit, one database round
    trip instead of three (``BEGIN``, ``INSERT``, ``COMMIT``); committed when it returns. With a
    ``driver`` pool (and tracing off) it runs on a connection of that pool.
    """
    if not controls and driver is not None and not tracing.is_enabled():
        async with driver.connection() as raw:
            stored, duplicates = await _fetch_inserted(raw, rows)
        result.stored_ids += stored
        result.duplicates += duplicates
        return
    if not controls:
        # on the engine, not an ORM session: the session's bookkeeping cost more CPU than the insert
        engine: AsyncEngine = sessions.kw["bind"]
        async with _pool_gate(engine), engine.connect() as conn:
            if tracing.is_enabled():  # Core: its statement span (instrument_engine) is in the trace
                await conn.execution_options(isolation_level="AUTOCOMMIT")
                stored, duplicates = await _insert_rows(conn, rows)
            else:
                stored, duplicates = await _insert_rows_driver(conn, rows)
        updated = 0
    else:
        async with sessions() as session, session.begin():
            stored, duplicates = await _insert_rows(await session.connection(), rows)
            updated = 0
            for msg, account in controls:
                updated += await _apply_control(session, msg, account)
    result.stored_ids += stored
    result.duplicates += duplicates
    result.updated_originals += updated


_INSERT_MESSAGE = (
    insert(Message.__table__)  # type: ignore[arg-type]
    .on_conflict_do_nothing(constraint="uq_messages_channel_account_external")
    .returning(Message.__table__.c.id)  # type: ignore[attr-defined]
)


async def _insert_rows(conn: AsyncConnection, rows: list[dict[str, Any]]) -> tuple[list[uuid.UUID], int]:
    """``INSERT .. ON CONFLICT DO NOTHING RETURNING id`` of ``rows``: (ids inserted, in order; duplicates)."""
    if not rows:
        return [], 0
    # one constant statement with the rows as parameters: compiled once (SQLAlchemy's compiled cache),
    # prepared once per connection (asyncpg), and several rows still go as one multi-VALUES INSERT
    # ("insertmanyvalues"); ``.values(rows)`` would build and compile a new statement every time
    inserted = set((await conn.execute(_INSERT_MESSAGE, rows)).scalars().all())
    return [row["id"] for row in rows if row["id"] in inserted], len(rows) - len(inserted)


def _pool_gate(engine: AsyncEngine) -> asyncio.Semaphore:
    """A first-come-first-served gate in front of ``engine``'s pool, as wide as the pool (kept
    connections), one per engine and event loop.

    Why: SQLAlchemy's async pool waits on an ``asyncio.Queue``, which lets a newcomer take a connection
    that was just handed back while a woken waiter goes to the back of the line again; with hundreds of
    deliveries waiting for 20 connections some waited seconds (p99 7x the floor's at 250 connections,
    ``loadtests/webhook_vs_floor.py``). ``asyncio.Semaphore`` is FIFO-fair (CPython 3.11: no barging past waiters),
    so at most pool-size deliveries ever ask the pool and none of them waits there.
    """
    loop = asyncio.get_running_loop()
    holder = engine.sync_engine
    gate: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = getattr(holder, _GATE_ATTR, None)
    if gate is None or gate[0] is not loop:
        size = engine.pool.size() if isinstance(engine.pool, QueuePool) else 10
        gate = (loop, asyncio.Semaphore(max(1, size)))
        setattr(holder, _GATE_ATTR, gate)
    return gate[1]


_GATE_ATTR = "_switchboard_ingest_gate"
_MESSAGES = Message.__table__  # type: ignore[attr-defined]
_JSON_COLUMNS = frozenset(c.name for c in _MESSAGES.c if isinstance(c.type, JSONB))
_DRIVER_INSERTS: dict[tuple[tuple[str, ...], int], str] = {}
"""The SQL of :func:`_insert_rows_driver` per (columns, number of rows): built once each."""


def _driver_insert_sql(columns: tuple[str, ...], n_rows: int) -> str:
    key = (columns, n_rows)
    sql = _DRIVER_INSERTS.get(key)
    if sql is None:
        width = len(columns)
        values = ", ".join(
            "(" + ", ".join(f"${r * width + c + 1}" for c in range(width)) + ")" for r in range(n_rows)
        )
        sql = _DRIVER_INSERTS[key] = (
            f"INSERT INTO {_MESSAGES.name} ({', '.join(columns)}) VALUES {values} "
            "ON CONFLICT ON CONSTRAINT uq_messages_channel_account_external DO NOTHING RETURNING id"
        )
    return sql


async def _insert_rows_driver(
    conn: AsyncConnection, rows: list[dict[str, Any]]
) -> tuple[list[uuid.UUID], int]:
    """:func:`_insert_rows` as one asyncpg statement on the pooled connection's driver connection, in
    asyncpg's implicit autocommit: the same SQL without SQLAlchemy's execution context and greenlet
    hops per statement (the webhook's hot path). ``jsonb`` values go as JSON text (``json.dumps``, what
    the dialect's own bind does); asyncpg prepares the statement once per connection (its cache).

    Raises:
        Exception: what asyncpg raised. A connection-level one (:func:`is_connection_error`) has
            invalidated the pooled connection first, so the pool opens a fresh one for the next delivery.
    """
    if not rows:
        return [], 0
    raw = await conn.get_raw_connection()
    try:
        return await _fetch_inserted(raw.driver_connection, rows)
    except Exception as exc:
        if is_connection_error(exc):
            await conn.invalidate(exc)
        raise


async def _fetch_inserted(
    driver_connection: asyncpg.Connection, rows: list[dict[str, Any]]
) -> tuple[list[uuid.UUID], int]:
    """The statement of :func:`_insert_rows_driver` on an asyncpg connection: (ids inserted, duplicates).

    Raises:
        Exception: what asyncpg raised (the caller decides about the connection).
    """
    if not rows:
        return [], 0
    columns = tuple(rows[0])
    args: list[Any] = []
    for row in rows:
        args += [json.dumps(row[c]) if c in _JSON_COLUMNS and row[c] is not None else row[c] for c in columns]
    records = await driver_connection.fetch(_driver_insert_sql(columns, len(rows)), *args)
    inserted = {record[0] for record in records}
    return [row["id"] for row in rows if row["id"] in inserted], len(rows) - len(inserted)


def _bare_row(row: dict[str, Any], error: BaseException) -> dict[str, Any]:
    """The least of ``row`` (ids, sender, time) with the reason the full row was refused: the message
    is kept, and an operator sees why it was not processed."""
    reason = f"{UNPROCESSABLE_PREFIX}database refused it ({type(error).__name__})"
    return {
        **row,
        "kind": "unsupported",
        "text": "",
        "media": [],
        "reply_to_external_id": None,
        "raw": {"normalized": {"action": "record"}, "refused": _describe(error)},
        "inbound_state": InboundState.done.value,
        "last_error": reason,
    }


async def _store_one_by_one(
    sessions: async_sessionmaker[AsyncSession],
    rows: list[dict[str, Any]],
    controls: list[tuple[InboundMessage, AccountRef]],
    result: IngestResult,
    *,
    channel: str,
    driver: DriverPool | None = None,
) -> None:
    """Each row (and control) in its own transaction; a refused row is stored bare (:func:`_bare_row`),
    a refused control is logged and dropped.

    Raises:
        Exception: a connection-level error (:func:`is_connection_error`), re-raised as it came.
    """
    for index, row in enumerate(rows):
        try:
            await _store(sessions, [row], [], result, driver)
            continue
        except Exception as exc:
            if is_connection_error(exc):
                raise
            bare = _bare_row(row, exc)
            rows[index] = bare
            log.error(
                "inbound_store_refused",
                channel=channel,
                inbound_message_id=str(row["id"]),
                error=_describe(exc),
            )
        try:
            await _store(sessions, [bare], [], result, driver)
        except Exception as exc:
            if is_connection_error(exc):
                raise
            log.error(
                "inbound_store_dropped",
                channel=channel,
                inbound_message_id=str(row["id"]),
                error=_describe(exc),
            )
    for control in controls:
        try:
            await _store(sessions, [], [control], result)
        except Exception as exc:
            if is_connection_error(exc):
                raise
            log.error("inbound_control_refused", channel=channel, kind=control[0].kind, error=_describe(exc))


async def ingest_delivery(
    *,
    delivery: NormalizedDelivery,
    sessions: async_sessionmaker[AsyncSession],
    redis: ArqRedis | None,
    accounts: AccountDirectory,
    debounce_s: float,
    throttle: Throttle | None = None,
    cleaned: bool = False,
    driver: DriverPool | None = None,
) -> IngestResult:
    """Store every message of ``delivery`` durably, then enqueue jobs for new rows and statuses.

    Args:
        delivery: what the channel's normalizer made of one webhook body.
        accounts: the directory of the delivery's channel (its ``channel`` names the rows).
        debounce_s: how long a new ``process`` row's job is deferred so a burst coalesces (seconds).
        throttle: the channel's throughput-limit error codes; such an error holds the account's sends.
        cleaned: every string of ``delivery`` comes from a body :func:`~switchboard.storable.clean_tree`
            already made storable (the Meta webhook route): its rows are not walked again.
        driver: the service's plain asyncpg pool (``Resources.driver``): the insert of a delivery
            without edits or revokes runs there instead of on ``sessions``' engine.

    A message the database refuses (a value no sanitizer foresaw) never takes its siblings down: the
    delivery is then stored row by row, the refused row bare with its reason (``inbound_store_refused``).
    Rows that cannot be processed (:func:`switchboard.channels.sanitize.unprocessable_reason`) are
    stored ``done`` with ``last_error`` and not enqueued.

    Raises:
        Exception: only a connection-level database error (:func:`is_connection_error`): the caller
            answers 503 so the provider retries (what was committed stays, duplicates are ignored).
    """
    with tracing.span(
        "inbound.ingest", attributes={"channel": accounts.channel, "messages": len(delivery.messages)}
    ) as current:
        result = await _ingest(
            delivery=delivery,
            sessions=sessions,
            redis=redis,
            accounts=accounts,
            debounce_s=debounce_s,
            throttle=throttle,
            cleaned=cleaned,
            driver=driver,
        )
        if current.is_recording():
            current.set_attributes(
                {
                    "stored": len(result.stored_ids),
                    "duplicates": result.duplicates,
                    "statuses": result.statuses,
                }
            )
        return result


async def _ingest(
    *,
    delivery: NormalizedDelivery,
    sessions: async_sessionmaker[AsyncSession],
    redis: ArqRedis | None,
    accounts: AccountDirectory,
    debounce_s: float,
    throttle: Throttle | None,
    cleaned: bool,
    driver: DriverPool | None,
) -> IngestResult:
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
        rows.append(_row_values(msg, account, cleaned=cleaned))

    actions = {row["id"]: row["raw"]["normalized"]["action"] for row in rows}
    if rows or controls:
        try:
            with tracing.span("inbound.store", attributes={"channel": channel, "rows": len(rows)}):
                await _store(sessions, rows, controls, result, driver)
        except Exception as exc:
            if is_connection_error(exc):
                raise
            # one value the database refuses must not take its siblings down: store them one by one
            log.error("webhook_batch_store_failed", channel=channel, error=_describe(exc), rows=len(rows))
            await _store_one_by_one(sessions, rows, controls, result, channel=channel, driver=driver)
    unprocessable = {row["id"] for row in rows if row["inbound_state"] == InboundState.done.value}
    for row in rows:
        if row["id"] in unprocessable and row["id"] in set(result.stored_ids):
            log.error(  # stored with its reason so an operator can see it; never processed
                "inbound_unprocessable",
                channel=channel,
                tenant_id=str(row["tenant_id"]),
                inbound_message_id=str(row["id"]),
                reason=row["last_error"],
            )
    result.stored_ids = [row_id for row_id in result.stored_ids if row_id not in unprocessable]

    for msg in delivery.messages:
        account = routed.get(msg.account_id)
        if account is not None:  # debug: the webhook's hot path (the worker logs every message it handles)
            log.debug(
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
    expiring = {row["id"] for row in rows if any(m.get("expiring") for m in row["media"])}
    trace = tracing.job_trace_kwargs()
    specs: list[JobSpec] = []
    for row_id in result.stored_ids:
        if row_id in expiring:  # the provider's handle dies: copy the bytes now, before the debounce
            specs.append(jobs.copy_media_spec(row_id, trace=trace))
        defer_s = debounce_s if actions.get(row_id) == "process" else 0.0
        specs.append(jobs.process_inbound_spec(row_id, defer_s=defer_s, trace=trace))
    if statuses:
        args = [status_to_job_arg(s) for s in statuses]
        digest = hashlib.sha256(json.dumps([channel, args], sort_keys=True).encode()).hexdigest()[:32]
        specs.append(jobs.delivery_statuses_spec(channel, args, digest, trace=trace))
    if specs:
        try:  # every job of the delivery in one round trip
            await enqueue_jobs(redis, specs)
        except Exception as exc:  # noqa: BLE001 (rows are durable: the sweeper re-enqueues them; logged)
            result.enqueue_failures += len(specs)
            for job in specs:
                log.error(
                    _ENQUEUE_FAILED.get(job.function, "inbound_enqueue_failed"),
                    job_id=job.job_id,
                    channel=channel,
                    error=str(exc)[:300],
                )
    return result
