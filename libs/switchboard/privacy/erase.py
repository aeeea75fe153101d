"""Erase one customer everywhere: every row and media file that holds their data or words is deleted
or irreversibly anonymized, in one resumable, idempotent run.

What happens, in order (each step in small committed batches, so no lock is held for long):

1. **Freeze.** The customer's identities are retired (a message arriving from that phone, IGSID or
   address now starts a new customer) and ``customers.external_user_id`` becomes ``erasing:<id>``; an
   audit row ``customer_erase_started`` says who asked, with no personal data.
2. **Loose records** that name the customer only inside their contents — audit logs, security alerts,
   events and their webhook deliveries, Gmail sent-message records — are deleted when they mention the
   customer's id, a conversation, message or trace of theirs, or one of their identities.
3. **Messages** lose their words: text, media references (the stored copies are deleted from media
   storage unless another customer's message holds the same file), transcripts and descriptions, the
   provider payload, tool-call arguments, provider ids. The rows stay, so the tenant's message counts
   stay.
4. **Turns, outbox, receipts, conversations** keep their counts, costs and times but lose every text:
   reply results, summaries, guardrail records, errors, recipients, tool rejection reasons.
5. **Memory, leads, meetings, pending actions** are deleted; orders keep their business figures but
   lose the customer link and reference.
6. **A sweep** replaces the customer's identities (phone, e-mail, IGSID, BSUID) wherever they are left
   in any text or JSON column of any of the tenant's tables (found in the database catalogue, so a new
   table is covered) with ``***``.
7. **Finish.** Identities are deleted, the customer row keeps only its id (``external_user_id`` becomes
   ``erased:<id>``), and an audit row ``customer_erased`` records the counts.

A run that dies anywhere is run again with the same arguments and completes: every step selects only
what is not yet cleaned, and the identities it needs are deleted last. A run on an erased customer
does nothing and returns ``already_erased``.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, async_sessionmaker
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import AuditLog, Customer, CustomerIdentity, utcnow
from switchboard.errors import SwitchboardError
from switchboard.media.store import MediaCopyFailed, MediaStore, is_stored
from switchboard.observability import get_logger
from switchboard.queue.keys import profile_cache_key

__all__ = [
    "confirms_identity",
    "ERASED_PREFIX",
    "ERASING_PREFIX",
    "MESSAGE_HOLDS_WORDS",
    "clear_messages",
    "CustomerNotFound",
    "EraseReport",
    "erase_customer",
    "find_customer",
    "is_erased",
]

log = get_logger(__name__)

ERASING_PREFIX = "erasing:"
"""``customers.external_user_id`` of a customer whose erase has started and not finished."""
ERASED_PREFIX = "erased:"
"""``customers.external_user_id`` of an erased customer (the row keeps only its id and times)."""
ERASE_BATCH = 200
"""Rows changed per transaction."""
MASK = "***"
"""What an identity left in a free text becomes (shorter than any identity: never overflows a column)."""
AUDIT_ACTIONS = ("customer_erase_started", "customer_erased")
_MIN_SWEEP_NEEDLE = 6
"""Identities shorter than this are not swept from free text (too likely to hit unrelated words)."""
_LOOSE_TABLES: dict[str, tuple[str, ...]] = {
    "audit_logs": ("target_id", "details", "trace_id"),
    "security_alerts": ("details", "trace_id"),
    "webhook_deliveries": ("log", "last_error"),
    "event_outbox": ("payload",),
    "gmail_sent_messages": ("thread_id", "correlation_id", "rfc_message_id", "gmail_message_id"),
}
"""Tables that name a customer only inside their contents, and the columns that may."""

OnBatch = Callable[[str, int], Awaitable[None]]
"""Called after each committed batch with the step's name and the rows it changed (progress)."""


class CustomerNotFound(SwitchboardError):
    """No customer with that id (or identity) in the tenant."""


@dataclass
class EraseReport:
    """What one :func:`erase_customer` run changed (``counts`` by table)."""

    customer_id: uuid.UUID
    already_erased: bool = False
    media_files: int = 0
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, table: str, n: int) -> None:
        self.counts[table] = self.counts.get(table, 0) + n


def _normal_identity(value: str) -> str:
    """An identity as people type it: e-mail case-folded; a phone number without ``+`` or spaces."""
    value = value.strip()
    return value.lower() if "@" in value else value.removeprefix("+").replace(" ", "")


async def confirms_identity(
    session: AsyncSession, *, tenant_id: uuid.UUID, customer: Customer, typed: str
) -> bool:
    """Whether ``typed`` is one of the customer's identities (a phone number, an e-mail address, an
    Instagram or web id), as the person asking for an erase must type it to confirm."""
    if not typed.strip():
        return False
    rows = await session.exec(
        select(CustomerIdentity.value).where(
            CustomerIdentity.tenant_id == tenant_id, CustomerIdentity.customer_id == customer.id
        )
    )
    values = {_normal_identity(v) for v in rows.all()}
    values |= {_normal_identity(v) for v in (customer.external_user_id, customer.phone, customer.email) if v}
    return _normal_identity(typed) in values


def is_erased(customer: Customer) -> bool:
    """Whether ``customer`` was erased (its row keeps only the id)."""
    return customer.external_user_id.startswith(ERASED_PREFIX)


async def find_customer(session: AsyncSession, tenant_id: uuid.UUID, ref: str) -> Customer | None:
    """The tenant's customer named by ``ref``: a customer id, or one of their identities (a phone with or
    without ``+``, an e-mail address in any case, an IGSID or BSUID; active or retired)."""
    ref = ref.strip()
    try:
        return (
            await session.exec(
                select(Customer).where(Customer.tenant_id == tenant_id, Customer.id == uuid.UUID(ref))
            )
        ).first()
    except ValueError:
        pass
    value = ref.lower() if "@" in ref else ref.removeprefix("+").replace(" ", "")
    row = (
        await session.exec(
            select(CustomerIdentity)
            .where(CustomerIdentity.tenant_id == tenant_id, CustomerIdentity.value == value)
            .order_by(col(CustomerIdentity.retired_at).desc().nulls_first())
        )
    ).first()
    if row is None:
        return (
            await session.exec(
                select(Customer).where(Customer.tenant_id == tenant_id, Customer.external_user_id == value)
            )
        ).first()
    return await session.get(Customer, row.customer_id)


@dataclass
class _Scope:
    """Everything that names the customer: ids to find their rows, values to find their identities."""

    tenant_id: uuid.UUID
    customer_id: uuid.UUID
    conversation_ids: list[uuid.UUID]
    identities: list[str]
    """Identity values and contact fields (phone, e-mail, IGSID, BSUID)."""
    needles: list[str]
    """Strings whose presence in a loose record means it is about the customer."""


def _like(value: str) -> str:
    return "%" + value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


async def _scope(conn: AsyncConnection, tenant_id: uuid.UUID, customer_id: uuid.UUID) -> _Scope:
    params = {"t": tenant_id, "c": customer_id}
    conversations = [
        r[0]
        for r in await conn.execute(
            text("SELECT id FROM conversations WHERE tenant_id = :t AND customer_id = :c"), params
        )
    ]
    values = {
        r[0]
        for r in await conn.execute(
            text("SELECT value FROM customer_identities WHERE tenant_id = :t AND customer_id = :c"), params
        )
    }
    row = (
        await conn.execute(
            text("SELECT phone, email FROM customers WHERE tenant_id = :t AND id = :c"), params
        )
    ).first()
    if row is not None:
        values |= {v for v in row if v}
    identities = sorted(v for v in values if v and '"' not in v and "\\" not in v)
    ids: set[str] = {str(customer_id), *(str(c) for c in conversations)}
    if conversations:
        cp = {"t": tenant_id, "cs": conversations}
        for query in (
            "SELECT id::text FROM messages WHERE tenant_id = :t AND conversation_id = ANY(:cs)",
            "SELECT trace_id FROM messages WHERE tenant_id = :t AND conversation_id = ANY(:cs)",
            "SELECT external_id FROM messages WHERE tenant_id = :t AND conversation_id = ANY(:cs)",
            "SELECT trace_id FROM turns WHERE tenant_id = :t AND conversation_id = ANY(:cs)",
            "SELECT correlation_id FROM outbox WHERE tenant_id = :t AND conversation_id = ANY(:cs)",
            "SELECT external_id FROM outbox WHERE tenant_id = :t AND conversation_id = ANY(:cs)",
            "SELECT external_thread_id FROM conversations WHERE tenant_id = :t AND id = ANY(:cs)",
            "SELECT id::text FROM leads WHERE tenant_id = :t AND customer_id = :c",
        ):
            ids |= {r[0] for r in await conn.execute(text(query), {**cp, "c": customer_id}) if r[0]}
    needles = sorted(ids | {v for v in identities if len(v) >= _MIN_SWEEP_NEEDLE})
    return _Scope(tenant_id, customer_id, conversations, identities, needles)


async def _start(
    sessions: async_sessionmaker[AsyncSession], tenant_id: uuid.UUID, customer_id: uuid.UUID, actor: str
) -> bool:
    """Freeze the customer (retire identities, mark the row); ``True`` when it was already erased."""
    async with sessions() as session, session.begin():
        customer = (
            await session.exec(
                select(Customer)
                .where(Customer.tenant_id == tenant_id, Customer.id == customer_id)
                .with_for_update()
            )
        ).first()
        if customer is None:
            raise CustomerNotFound(f"no customer {customer_id} in this tenant")
        if is_erased(customer):
            return True
        started = (
            await session.exec(
                select(AuditLog.id).where(
                    AuditLog.tenant_id == tenant_id,
                    AuditLog.action == "customer_erase_started",
                    AuditLog.target_id == str(customer_id),
                )
            )
        ).first()
        if started is None:
            session.add(_audit(tenant_id, customer_id, actor, "customer_erase_started", {}))
        now = utcnow()
        await session.exec(
            text(
                "UPDATE customer_identities SET retired_at = :now "
                "WHERE tenant_id = :t AND customer_id = :c AND retired_at IS NULL"
            ),
            params={"now": now, "t": tenant_id, "c": customer_id},
        )
        customer.external_user_id = f"{ERASING_PREFIX}{customer_id}"
        session.add(customer)
    return False


def _audit(
    tenant_id: uuid.UUID, customer_id: uuid.UUID, actor: str, action: str, details: dict[str, Any]
) -> AuditLog:
    return AuditLog(
        tenant_id=tenant_id,
        actor=actor[:128],
        action=action,
        target_type="customer",
        target_id=str(customer_id),
        details=details,
    )


async def _batched(
    sessions: async_sessionmaker[AsyncSession],
    statement: str,
    params: dict[str, Any],
    *,
    step: str,
    batch: int,
    report: EraseReport,
    on_batch: OnBatch | None,
) -> None:
    """Run ``statement`` (which changes at most ``:batch`` rows that still need it) until it changes none."""
    while True:
        async with sessions() as session, session.begin():
            conn = await session.connection()
            n = int((await conn.execute(text(statement), {**params, "batch": batch})).rowcount or 0)
        if not n:
            return
        report.add(step, n)
        if on_batch is not None:
            await on_batch(step, n)


async def _loose_records(
    sessions: async_sessionmaker[AsyncSession],
    scope: _Scope,
    *,
    batch: int,
    report: EraseReport,
    on_batch: OnBatch | None,
) -> None:
    if not scope.needles:
        return
    patterns = [_like(n) for n in scope.needles]
    for table, columns in _LOOSE_TABLES.items():
        haystack = " || ' ' || ".join(f"coalesce({c}::text, '')" for c in columns)
        keep = " AND action <> ALL(:actions)" if table == "audit_logs" else ""
        statement = (
            f"DELETE FROM {table} WHERE id IN (SELECT id FROM {table} WHERE tenant_id = :t{keep} "
            f"AND ({haystack}) LIKE ANY(:patterns) LIMIT :batch)"
        )
        params: dict[str, Any] = {"t": scope.tenant_id, "patterns": patterns, "actions": list(AUDIT_ACTIONS)}
        await _batched(sessions, statement, params, step=table, batch=batch, report=report, on_batch=on_batch)


MESSAGE_HOLDS_WORDS = (
    "(text IS NOT NULL OR media <> '[]'::jsonb OR raw IS NOT NULL OR tool_calls IS NOT NULL "
    "OR proxy_metadata IS NOT NULL OR external_id IS NOT NULL OR reply_to_external_id IS NOT NULL "
    "OR sender_external_id IS NOT NULL OR last_error IS NOT NULL)"
)
"""SQL: a ``messages`` row that still holds words, media or provider ids."""


async def clear_messages(
    sessions: async_sessionmaker[AsyncSession],
    store: MediaStore | None,
    *,
    where: str,
    params: dict[str, Any],
    batch: int,
    on_batch: OnBatch | None = None,
    skip_locked: bool = False,
) -> tuple[int, int]:
    """Take the words out of every message matching the SQL ``where`` (over ``messages``, with
        ``params``): text, media (stored files deleted unless a message outside ``where`` holds the same
        file), transcripts and descriptions, provider payload, tool-call arguments, provider ids. The rows
        stay. ``batch`` rows a transaction; files are deleted first (a file already gone is fine: a run that
        died after deleting it finds the reference again). ``skip_locked``: leave rows another transaction holds
    (retention: the next run takes them); an erase waits for them. Returns ``(messages, files deleted)``."""
    lock = "FOR UPDATE SKIP LOCKED" if skip_locked else "FOR UPDATE"
    cleared = files = 0
    while True:
        async with sessions() as session, session.begin():
            conn = await session.connection()
            rows = (
                await conn.execute(
                    text(
                        f"SELECT id, media FROM messages WHERE ({where}) AND {MESSAGE_HOLDS_WORDS} "
                        f"ORDER BY created_at LIMIT :batch {lock}"
                    ),
                    {**params, "batch": batch},
                )
            ).all()
            if not rows:
                return cleared, files
            ids = [r[0] for r in rows]
            refs = {
                str(m.get("ref"))
                for r in rows
                for m in (r[1] or [])
                if isinstance(m, dict) and is_stored(m.get("ref"))
            }
            for ref in sorted(refs):
                shared = (
                    await conn.execute(
                        text(
                            f"SELECT 1 FROM messages WHERE tenant_id = :t AND NOT ({where}) AND NOT (id = ANY(:ids)) "
                            "AND media @> jsonb_build_array(jsonb_build_object('ref', CAST(:ref AS text))) LIMIT 1"
                        ),
                        {**params, "ref": ref, "ids": ids},
                    )
                ).first()
                if shared is None and store is not None:
                    files += await _delete_file(store, ref)
            await conn.execute(
                text(
                    "UPDATE messages SET text = NULL, media = '[]'::jsonb, raw = NULL, tool_calls = NULL, "
                    "proxy_metadata = NULL, external_id = NULL, reply_to_external_id = NULL, "
                    "sender_external_id = NULL, last_error = NULL, "
                    "inbound_state = CASE WHEN inbound_state IS NULL THEN NULL ELSE 'done' END "
                    "WHERE id = ANY(:ids)"
                ),
                {"ids": ids},
            )
        cleared += len(ids)
        if on_batch is not None:
            await on_batch("messages", len(ids))


async def _messages(
    sessions: async_sessionmaker[AsyncSession],
    store: MediaStore | None,
    scope: _Scope,
    *,
    batch: int,
    report: EraseReport,
    on_batch: OnBatch | None,
) -> None:
    where = (
        "tenant_id = :t AND (conversation_id = ANY(:cs) "
        "OR (conversation_id IS NULL AND sender_external_id = ANY(:values)))"
    )
    params = {"t": scope.tenant_id, "cs": scope.conversation_ids, "values": scope.identities}
    messages, files = await clear_messages(
        sessions, store, where=where, params=params, batch=batch, on_batch=on_batch
    )
    report.add("messages", messages)
    report.media_files += files


async def _delete_file(store: MediaStore, ref: str) -> int:
    try:
        await store.delete(ref)
    except MediaCopyFailed:
        return 0
    return 1


async def _conversation_rows(
    sessions: async_sessionmaker[AsyncSession],
    scope: _Scope,
    *,
    batch: int,
    report: EraseReport,
    on_batch: OnBatch | None,
) -> None:
    t, c = scope.tenant_id, scope.customer_id
    p: dict[str, Any] = {"t": t, "c": c, "cs": scope.conversation_ids, "mask": MASK}
    in_conv = "tenant_id = :t AND conversation_id = ANY(:cs)"
    steps: list[tuple[str, str]] = [
        (
            "turns",
            f"UPDATE turns SET result = jsonb_build_object('flags', coalesce(result->'flags', '[]'::jsonb)), "
            f"summary_text = NULL, error = NULL, guardrails = '{{}}'::jsonb WHERE id IN (SELECT id FROM turns "
            f"WHERE {in_conv} AND (summary_text IS NOT NULL OR error IS NOT NULL OR guardrails <> '{{}}'::jsonb "
            f"OR result IS NULL OR result - 'flags' <> '{{}}'::jsonb) LIMIT :batch)",
        ),
        (
            "outbox",
            f"UPDATE outbox SET recipient = :mask, payload = '{{}}'::jsonb, error_message = NULL, external_id = NULL, "
            f"status = CASE WHEN status IN ('pending', 'sending') THEN 'failed' ELSE status END "
            f"WHERE id IN (SELECT id FROM outbox WHERE {in_conv} AND (recipient <> :mask OR payload <> '{{}}'::jsonb "
            f"OR error_message IS NOT NULL OR external_id IS NOT NULL) LIMIT :batch)",
        ),
        (
            "tool_receipts",
            f"UPDATE tool_receipts SET args_hash = :mask, idempotency_key = NULL, rejection_reason = NULL "
            f"WHERE id IN (SELECT id FROM tool_receipts WHERE {in_conv} AND args_hash <> :mask LIMIT :batch)",
        ),
        (
            "conversation_events",
            f"UPDATE conversation_events SET reason = NULL, actor_id = CASE WHEN actor_type = 'customer' THEN NULL "
            f"ELSE actor_id END WHERE id IN (SELECT id FROM conversation_events WHERE {in_conv} AND (reason IS NOT NULL "
            f"OR (actor_type = 'customer' AND actor_id IS NOT NULL)) LIMIT :batch)",
        ),
        (
            "feedback",
            f"UPDATE feedback SET comment = NULL WHERE id IN (SELECT id FROM feedback WHERE {in_conv} "
            f"AND comment IS NOT NULL LIMIT :batch)",
        ),
        (
            "conversations",
            "UPDATE conversations SET escalation_reason = NULL, external_thread_id = NULL, review_flags = '[]'::jsonb, "
            "status = 'closed', closed_at = coalesce(closed_at, now()), queued_at = NULL "
            "WHERE id IN (SELECT id FROM conversations WHERE tenant_id = :t AND customer_id = :c AND "
            "(status <> 'closed' OR escalation_reason IS NOT NULL OR external_thread_id IS NOT NULL "
            "OR review_flags <> '[]'::jsonb) LIMIT :batch)",
        ),
        (
            "user_memories",
            "DELETE FROM user_memories WHERE id IN (SELECT id FROM user_memories WHERE tenant_id = :t "
            "AND customer_id = :c LIMIT :batch)",
        ),
        (
            "leads",
            "DELETE FROM leads WHERE id IN (SELECT id FROM leads WHERE tenant_id = :t AND (customer_id = :c "
            "OR conversation_id = ANY(:cs)) LIMIT :batch)",
        ),
        (
            "meetings",
            "DELETE FROM meetings WHERE id IN (SELECT id FROM meetings WHERE tenant_id = :t AND (customer_id = :c "
            "OR conversation_id = ANY(:cs)) LIMIT :batch)",
        ),
        (
            "pending_actions",
            "DELETE FROM pending_actions WHERE id IN (SELECT id FROM pending_actions WHERE tenant_id = :t AND "
            "(customer_id = :c OR conversation_id = ANY(:cs)) LIMIT :batch)",
        ),
        (
            "orders",
            "UPDATE orders SET customer_id = NULL, customer_ref = NULL WHERE id IN (SELECT id FROM orders "
            "WHERE tenant_id = :t AND customer_id = :c LIMIT :batch)",
        ),
    ]
    for step, statement in steps:
        await _batched(sessions, statement, p, step=step, batch=batch, report=report, on_batch=on_batch)


async def _text_columns(conn: AsyncConnection) -> list[tuple[str, str, str]]:
    """``(table, column, type)`` of every text, varchar, json and jsonb column of a table with ``tenant_id``."""
    rows = await conn.execute(
        text(
            "SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c "
            "JOIN information_schema.tables tb ON tb.table_schema = c.table_schema AND tb.table_name = c.table_name "
            "WHERE c.table_schema = current_schema() AND tb.table_type = 'BASE TABLE' "
            "AND c.data_type IN ('text', 'character varying', 'json', 'jsonb') "
            "AND EXISTS (SELECT 1 FROM information_schema.columns t WHERE t.table_schema = c.table_schema "
            "AND t.table_name = c.table_name AND t.column_name = 'tenant_id') "
            "ORDER BY c.table_name, c.column_name"
        )
    )
    return [(r[0], r[1], r[2]) for r in rows]


async def _sweep(
    sessions: async_sessionmaker[AsyncSession],
    scope: _Scope,
    *,
    report: EraseReport,
    on_batch: OnBatch | None,
) -> None:
    """Mask the customer's identities left in any free text of the tenant's tables (the safety net for
    tables this module does not know)."""
    needles = [v for v in scope.identities if len(v) >= _MIN_SWEEP_NEEDLE]
    if not needles:
        return
    async with sessions() as session:
        columns = await _text_columns(await session.connection())
    for table, column, data_type in columns:
        if table in ("customers", "customer_identities"):
            continue  # handled by the finish step
        cast = "::json" if data_type == "json" else "::jsonb" if data_type == "jsonb" else ""
        replaced = f'"{column}"::text'
        for i in range(len(needles)):
            replaced = f"replace({replaced}, :n{i}, :mask)"
        params: dict[str, Any] = {"t": scope.tenant_id, "mask": MASK, "patterns": [_like(n) for n in needles]}
        params |= {f"n{i}": n for i, n in enumerate(needles)}
        try:
            async with sessions() as session, session.begin():
                conn = await session.connection()
                n = (
                    await conn.execute(
                        text(
                            f'UPDATE "{table}" SET "{column}" = ({replaced}){cast} '
                            f'WHERE tenant_id = :t AND "{column}"::text LIKE ANY(:patterns)'
                        ),
                        params,
                    )
                ).rowcount
        except DBAPIError as exc:  # a unique or check constraint: the row is left, and said
            log.error("erase_sweep_failed", table=table, column=column, error=type(exc.orig).__name__)
            continue
        if n:
            report.add(f"{table}.{column}", int(n))
            if on_batch is not None:
                await on_batch("sweep", int(n))


async def _forget_cached_profiles(redis: Any, scope: _Scope) -> int:
    """Delete the provider profiles cached under the customer's identities
    (:func:`~switchboard.queue.keys.profile_cache_key`)."""
    gone = 0
    for value in scope.identities:
        pattern = profile_cache_key(
            "*", "*", value.replace("*", "\\*").replace("?", "\\?").replace("[", "\\[")
        )
        keys = [key async for key in redis.scan_iter(match=pattern, count=500)]
        if keys:
            gone += int(await redis.delete(*keys))
    return gone


async def _finish(
    sessions: async_sessionmaker[AsyncSession], scope: _Scope, actor: str, report: EraseReport
) -> None:
    async with sessions() as session, session.begin():
        conn = await session.connection()
        n = (
            await conn.execute(
                text("DELETE FROM customer_identities WHERE tenant_id = :t AND customer_id = :c"),
                {"t": scope.tenant_id, "c": scope.customer_id},
            )
        ).rowcount
        report.add("customer_identities", int(n or 0))
        await conn.execute(
            text(
                "UPDATE customers SET external_user_id = :erased, phone = NULL, email = NULL, display_name = NULL, "
                "profile = '{}'::jsonb WHERE tenant_id = :t AND id = :c"
            ),
            {"t": scope.tenant_id, "c": scope.customer_id, "erased": f"{ERASED_PREFIX}{scope.customer_id}"},
        )
        session.add(
            _audit(
                scope.tenant_id,
                scope.customer_id,
                actor,
                "customer_erased",
                {"counts": dict(sorted(report.counts.items())), "media_files": report.media_files},
            )
        )


async def erase_customer(
    sessions: async_sessionmaker[AsyncSession],
    *,
    tenant_id: uuid.UUID,
    customer_id: uuid.UUID,
    actor: str,
    store: MediaStore | None = None,
    batch: int = ERASE_BATCH,
    on_batch: OnBatch | None = None,
    redis: Any | None = None,
) -> EraseReport:
    """Erase the customer ``customer_id`` of ``tenant_id`` everywhere (the module docstring says what
    goes and what stays); resumable and idempotent.

    Args:
        sessions: the session factory (each batch commits on its own).
        actor: who asked, for the audit record (``console_user:<id>``, ``cli``, ``api_key:<id>``); no
            personal data.
        store: media storage to delete the customer's stored files from (``None``: files are left).
        batch: rows changed per transaction.
        on_batch: awaited after each committed batch with ``(step, rows)``; an exception it raises stops
            the run (which a later run completes).
        redis: the queue's Redis, to drop the customer's cached provider profiles (name, picture);
            ``None``: they expire on their own.

    Returns:
        What was changed; ``already_erased`` when the customer was erased before.

    Raises:
        CustomerNotFound: no such customer in the tenant.
    """
    report = EraseReport(customer_id=customer_id)
    if await _start(sessions, tenant_id, customer_id, actor):
        report.already_erased = True
        return report
    async with sessions() as session:
        scope = await _scope(await session.connection(), tenant_id, customer_id)
    await _loose_records(sessions, scope, batch=batch, report=report, on_batch=on_batch)
    await _messages(sessions, store, scope, batch=batch, report=report, on_batch=on_batch)
    await _conversation_rows(sessions, scope, batch=batch, report=report, on_batch=on_batch)
    await _sweep(sessions, scope, report=report, on_batch=on_batch)
    if redis is not None:
        report.add("redis", await _forget_cached_profiles(redis, scope))
    await _finish(sessions, scope, actor, report)
    log.info(
        "customer_erased",
        tenant_id=str(tenant_id),
        customer_id=str(customer_id),
        media_files=report.media_files,
        rows=sum(report.counts.values()),
    )
    return report
