"""Retention per tenant: the daily ``apply_retention`` job removes what is older than each tenant's
``retention`` settings (:class:`~switchboard.tenant_settings.RetentionSettings`), capped by the platform's
``RETENTION_MAX_DAYS``.

What goes, by kind (age from when the row was written; memory: from its last update):

* ``messages``: text, media files, transcripts and payloads of older messages (rows and counts stay),
  and what the outbox sent (``outbox``: a part still waiting to go out stays);
* ``memory``: memory notes and summaries;
* ``traces``: the replies, summaries, errors and guardrail records of older turns, tool receipts'
  rejection reasons, and security alerts (deleted);
* ``leads``: leads (deleted);
* ``event_deliveries``: events and their webhook delivery logs (deleted; one with a delivery still
  ``pending`` stays).

Every kind is one SQL condition, used both by :func:`retention_preview` (the counts the console shows
as "the next run removes") and by :func:`apply_retention` (which changes at most
:data:`RETENTION_BATCH` rows a transaction, ``SKIP LOCKED``: a row a worker holds is left for the next
run), so the preview is what the run does.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import obstore
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, async_sessionmaker
from sqlmodel import select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import Tenant, utcnow
from switchboard.media.store import MediaStore
from switchboard.observability import get_logger
from switchboard.privacy.erase import MESSAGE_HOLDS_WORDS, clear_messages
from switchboard.settings import Settings
from switchboard.tenant_settings import RetentionSettings, tenant_settings_from

__all__ = [
    "KINDS",
    "RETENTION_BATCH",
    "RetentionKind",
    "apply_retention",
    "effective_days",
    "prune_exports",
    "retention_preview",
]

log = get_logger(__name__)

RETENTION_BATCH = 500
"""Rows changed per transaction."""


@dataclass(frozen=True)
class RetentionKind:
    """One kind of data with its retention setting: which rows are due (``where``, over ``table`` with
    ``:t`` the tenant and ``:cutoff`` the oldest time kept) and what happens to them (``action``, with
    ``:ids``); ``None``: :func:`~switchboard.privacy.erase.clear_messages`."""

    name: str
    setting: str
    table: str
    where: str
    action: str | None


_TURN_HOLDS_WORDS = (
    "(summary_text IS NOT NULL OR error IS NOT NULL OR guardrails <> '{}'::jsonb OR result IS NULL "
    "OR result - 'flags' <> '{}'::jsonb)"
)

KINDS: tuple[RetentionKind, ...] = (
    RetentionKind(
        "messages",
        "messages_days",
        "messages",
        f"tenant_id = :t AND created_at < :cutoff AND {MESSAGE_HOLDS_WORDS}",
        None,
    ),
    RetentionKind(
        "outbox",
        "messages_days",
        "outbox",
        "tenant_id = :t AND created_at < :cutoff AND status NOT IN ('pending', 'sending') "
        "AND (payload <> '{}'::jsonb OR error_message IS NOT NULL)",
        "UPDATE outbox SET payload = '{}'::jsonb, error_message = NULL WHERE id = ANY(:ids)",
    ),
    RetentionKind(
        "memory",
        "memory_days",
        "user_memories",
        "tenant_id = :t AND updated_at < :cutoff",
        "DELETE FROM user_memories WHERE id = ANY(:ids)",
    ),
    RetentionKind(
        "traces",
        "traces_days",
        "turns",
        f"tenant_id = :t AND created_at < :cutoff AND {_TURN_HOLDS_WORDS}",
        "UPDATE turns SET result = jsonb_build_object('flags', coalesce(result->'flags', '[]'::jsonb)), "
        "summary_text = NULL, error = NULL, guardrails = '{}'::jsonb WHERE id = ANY(:ids)",
    ),
    RetentionKind(
        "tool_receipts",
        "traces_days",
        "tool_receipts",
        "tenant_id = :t AND created_at < :cutoff AND rejection_reason IS NOT NULL",
        "UPDATE tool_receipts SET rejection_reason = NULL WHERE id = ANY(:ids)",
    ),
    RetentionKind(
        "security_alerts",
        "traces_days",
        "security_alerts",
        "tenant_id = :t AND created_at < :cutoff",
        "DELETE FROM security_alerts WHERE id = ANY(:ids)",
    ),
    RetentionKind(
        "leads",
        "leads_days",
        "leads",
        "tenant_id = :t AND created_at < :cutoff",
        "DELETE FROM leads WHERE id = ANY(:ids)",
    ),
    RetentionKind(
        "event_deliveries",
        "event_deliveries_days",
        "event_outbox",
        "tenant_id = :t AND created_at < :cutoff AND dispatched_at IS NOT NULL AND NOT EXISTS "
        "(SELECT 1 FROM webhook_deliveries d WHERE d.event_id = event_outbox.id AND d.status = 'pending')",
        "DELETE FROM event_outbox WHERE id = ANY(:ids)",
    ),
)
"""Every kind, in the order a run applies them."""


def effective_days(retention: RetentionSettings, setting: str, settings: Settings) -> int | None:
    """Days the tenant keeps ``setting``'s kind: its own value capped by ``RETENTION_MAX_DAYS`` (0: no
    cap); ``None``: kept for ever."""
    days: int | None = getattr(retention, setting)
    cap = settings.retention_max_days
    if cap and (days is None or days > cap):
        return cap
    return days


async def retention_preview(
    conn: AsyncConnection, tenant: Tenant, settings: Settings, *, now: datetime | None = None
) -> dict[str, int | None]:
    """How many rows of each kind the next run would change for ``tenant`` (``None``: kept for ever)."""
    retention = tenant_settings_from(tenant.settings_extensions, tenant_id=str(tenant.id)).retention
    now = now or utcnow()
    out: dict[str, int | None] = {}
    for kind in KINDS:
        days = effective_days(retention, kind.setting, settings)
        if days is None:
            out[kind.name] = None
            continue
        params = {"t": tenant.id, "cutoff": now - timedelta(days=days)}
        out[kind.name] = int(
            (
                await conn.execute(text(f"SELECT count(*) FROM {kind.table} WHERE {kind.where}"), params)
            ).scalar_one()
        )
    return out


async def _apply_kind(
    sessions: async_sessionmaker[AsyncSession],
    kind: RetentionKind,
    params: dict[str, Any],
    *,
    batch: int,
    max_batches: int,
) -> int:
    changed = 0
    for _ in range(max_batches):
        async with sessions() as session, session.begin():
            conn = await session.connection()
            ids = [
                r[0]
                for r in await conn.execute(
                    text(
                        f"SELECT id FROM {kind.table} WHERE {kind.where} ORDER BY created_at "
                        "LIMIT :batch FOR UPDATE SKIP LOCKED"
                    ),
                    {**params, "batch": batch},
                )
            ]
            if ids:
                assert kind.action is not None
                await conn.execute(text(kind.action), {"ids": ids})
        changed += len(ids)
        if len(ids) < batch:
            break
    return changed


async def apply_retention(
    sessions: async_sessionmaker[AsyncSession],
    settings: Settings,
    *,
    store: MediaStore | None = None,
    now: datetime | None = None,
    batch: int = RETENTION_BATCH,
    max_batches: int = 200,
    tenant_ids: list[uuid.UUID] | None = None,
) -> dict[str, dict[str, int]]:
    """One retention run over every tenant (or ``tenant_ids``). Returns what changed, by tenant id and
    kind (tenants with nothing due are left out). A kind with more than ``max_batches`` batches due
    continues at the next run."""
    now = now or utcnow()
    async with sessions() as session:
        query = select(Tenant)
        if tenant_ids is not None:
            query = query.where(Tenant.id.in_(tenant_ids))  # type: ignore[attr-defined]
        tenants = list((await session.exec(query)).all())
    report: dict[str, dict[str, int]] = {}
    for tenant in tenants:
        retention = tenant_settings_from(tenant.settings_extensions, tenant_id=str(tenant.id)).retention
        for kind in KINDS:
            days = effective_days(retention, kind.setting, settings)
            if days is None:
                continue
            params = {"t": tenant.id, "cutoff": now - timedelta(days=days)}
            if kind.action is None:
                n, _files = await clear_messages(
                    sessions, store, where=kind.where, params=params, batch=batch, skip_locked=True
                )
            else:
                n = await _apply_kind(sessions, kind, params, batch=batch, max_batches=max_batches)
            if n:
                report.setdefault(str(tenant.id), {})[kind.name] = n
    if report:
        log.info("retention_applied", tenants=len(report), rows=sum(sum(k.values()) for k in report.values()))
    return report


async def prune_exports(store: MediaStore, settings: Settings, *, now: datetime | None = None) -> int:
    """Delete the customer exports whose download link has expired (older than
    ``CUSTOMER_EXPORT_LINK_TTL_S``); returns how many."""
    cutoff = (now or utcnow()) - timedelta(seconds=settings.customer_export_link_ttl_s)
    gone = 0
    async for page in obstore.list(store.store, prefix="exports/"):
        for meta in page:
            if meta["last_modified"] < cutoff:
                await store.delete(meta["path"])
                gone += 1
    return gone


async def apply_retention_job(ctx: dict[str, Any]) -> dict[str, int]:
    """ARQ cron job (background queue, daily): :func:`apply_retention` and :func:`prune_exports` with the
    worker's resources."""
    deps = ctx["deps"]
    if getattr(deps, "media_store", None) is None:
        deps.media_store = MediaStore.from_settings(deps.settings)
    report = await apply_retention(deps.resources.sessions, deps.settings, store=deps.media_store)
    exports = await prune_exports(deps.media_store, deps.settings)
    return {"tenants": len(report), "rows": sum(sum(k.values()) for k in report.values()), "exports": exports}
