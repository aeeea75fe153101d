"""Per-tenant HNSW indexes: only tenants above ``kb_exact_scan_max_chunks`` have one.

Vector search scans a tenant exactly while it has at most ``kb_exact_scan_max_chunks`` active chunks
(:mod:`switchboard.knowledge.retrieval`); only larger tenants read an HNSW index. One HNSW index over
every tenant's chunks made every tenant's ingestion keep it up, ~4.7 ms of PostgreSQL CPU per chunk of
the ~5.9 ms an ingested chunk cost (``loadtests/kb_graph_benchmark.py --ingest-only``), for
an index most tenants' searches never use. So (migration ``0025_tenant_hnsw_indexes``) each tenant above
the threshold has its own **partial** index::

    CREATE INDEX CONCURRENTLY ix_knowledge_documents_hnsw_<tenant id hex> ON knowledge_documents
    USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)
    WHERE tenant_id = '<tenant uuid>'

which only that tenant's inserts keep up. :func:`sync_vector_indexes` (the background worker's
``knowledge_vector_indexes`` job, once a minute) makes the index of every tenant whose active chunk
count (the sum of its active sources' ``chunk_count``, as retrieval counts) is above the threshold and
drops the index of every tenant at or below it (or deleted), and any index a failed or interrupted
build left ``INVALID``. Both run ``CONCURRENTLY``: writes and searches go on while an index builds
(the build waits for transactions older than it to finish, an ingestion's included). Retrieval uses
HNSW only for a tenant above the threshold whose index is valid (``pg_index.indisvalid``, read in
the search's first round trip); until then it scans the tenant exactly: the same hits, slower.

The HNSW statement names the tenant as a literal (:func:`tenant_literal`), not a parameter: the
planner uses a partial index only when it can prove the index's ``WHERE`` from the query's, and the
search runs on a generic plan (``plan_cache_mode = force_generic_plan``), which knows no parameter's
value.

Log lines (INFO): ``knowledge_vector_index_created`` (``tenant_id``, ``index``, ``chunks``,
``seconds``), ``knowledge_vector_index_dropped`` (``tenant_id``, ``index``, ``chunks``, ``reason``:
``below_threshold`` or ``invalid``); WARNING ``knowledge_vector_index_failed`` (``tenant_id``,
``index``, ``error``: the next run drops what the build left and tries again).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from switchboard.db.models.knowledge import TENANT_HNSW_INDEX_PREFIX
from switchboard.observability import get_logger
from switchboard.settings import Settings

__all__ = [
    "HNSW_EF_CONSTRUCTION",
    "HNSW_M",
    "IndexChange",
    "hnsw_index_name",
    "sync_vector_indexes",
    "tenant_literal",
]

log = get_logger(__name__)

HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64
"""The tenant indexes' build parameters: those of the global index before (``0001_initial_schema``),
so HNSW recall is what ``loadtests/kb_benchmark.py`` measured with it."""

BUILD_MAINTENANCE_WORK_MEM = "256MB"
"""``maintenance_work_mem`` for one build (PostgreSQL's default 64 MB): pgvector builds the graph in
memory while it fits, much faster than after (its notice "hnsw graph no longer fits"); a
20,000-chunk tenant's graph is ~150 MB."""

SYNC_LOCK_KEY = 0x5B_4B_48_4E_53_57  # "[KHNSW"
"""Session advisory lock held by :func:`sync_vector_indexes`: one sync at a time in a database, so an
index another sync is still building (``INVALID`` until it ends) is never taken for a failed one."""

_INDEXES_SQL = """
SELECT c.relname AS name, i.indisvalid AS valid
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid = 'knowledge_documents'::regclass AND starts_with(c.relname, :prefix)
"""

_COUNTS_SQL = """
SELECT ks.tenant_id, sum(ks.chunk_count) AS chunks
FROM knowledge_sources ks
WHERE ks.is_active
GROUP BY ks.tenant_id
"""


def hnsw_index_name(tenant_id: uuid.UUID) -> str:
    """``ix_knowledge_documents_hnsw_`` + the tenant id's 32 hex digits (60 characters)."""
    return TENANT_HNSW_INDEX_PREFIX + tenant_id.hex


def tenant_literal(tenant_id: uuid.UUID) -> str:
    """``'<uuid>'::uuid``: the tenant as SQL text, for the partial index's predicate and the HNSW query.

    Raises:
        ValueError: ``tenant_id`` is not a UUID (so nothing but a UUID's text is ever spliced in).
    """
    return f"'{uuid.UUID(str(tenant_id))}'::uuid"


@dataclass(frozen=True, kw_only=True)
class IndexChange:
    """One index made or dropped by :func:`sync_vector_indexes`."""

    tenant_id: uuid.UUID
    index: str
    action: Literal["created", "dropped", "failed"]
    chunks: int
    """The tenant's active chunks when the sync looked."""
    reason: str | None = None
    """``dropped``: ``below_threshold`` or ``invalid``; ``failed``: the error's class."""
    seconds: float = 0.0
    """Wall time of the statement."""


async def sync_vector_indexes(
    engine: AsyncEngine, settings: Settings, *, tenant_id: uuid.UUID | None = None
) -> list[IndexChange] | None:
    """Make the HNSW index of every tenant above ``kb_exact_scan_max_chunks``, drop the others'.

    Args:
        engine: the database; one of its connections runs in autocommit for the sync (``CREATE INDEX
            CONCURRENTLY`` cannot run in a transaction), and must not be in a transaction of the caller.
        settings: ``kb_exact_scan_max_chunks``.
        tenant_id: only this tenant's index (tests, an operator); ``None``: every tenant's.

    Returns:
        What changed, drops first (``[]``: nothing to do), or ``None`` when another sync holds the lock.
        A failed build is returned as ``failed`` and logged; the other tenants still get theirs.
    """
    async with engine.connect() as raw:
        conn = await raw.execution_options(isolation_level="AUTOCOMMIT")
        if not (
            await conn.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": SYNC_LOCK_KEY})
        ).scalar():
            return None
        try:
            return await _sync(conn, settings, tenant_id)
        finally:
            await conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": SYNC_LOCK_KEY})


async def _sync(conn: AsyncConnection, settings: Settings, only: uuid.UUID | None) -> list[IndexChange]:
    counts = {row.tenant_id: int(row.chunks) for row in await conn.execute(text(_COUNTS_SQL))}
    existing = {
        row.name: bool(row.valid)
        for row in await conn.execute(text(_INDEXES_SQL), {"prefix": TENANT_HNSW_INDEX_PREFIX})
    }
    limit = settings.kb_exact_scan_max_chunks
    wanted = {
        hnsw_index_name(tenant): tenant
        for tenant, chunks in sorted(counts.items(), key=lambda item: -item[1])
        if chunks > limit and (only is None or tenant == only)
    }
    changes: list[IndexChange] = []
    for name, valid in sorted(existing.items()):
        tenant = _index_tenant(name)
        if tenant is None or (only is not None and tenant != only) or (valid and name in wanted):
            continue
        started = time.perf_counter()
        await conn.execute(text(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"'))
        change = IndexChange(
            tenant_id=tenant,
            index=name,
            action="dropped",
            chunks=counts.get(tenant, 0),
            reason="below_threshold" if valid else "invalid",
            seconds=time.perf_counter() - started,
        )
        log.info(
            "knowledge_vector_index_dropped",
            tenant_id=str(tenant),
            index=name,
            chunks=change.chunks,
            reason=change.reason,
        )
        changes.append(change)
    for name, tenant in wanted.items():
        if existing.get(name):
            continue
        changes.append(await _build(conn, tenant, name, counts[tenant]))
    return changes


async def _build(conn: AsyncConnection, tenant: uuid.UUID, name: str, chunks: int) -> IndexChange:
    started = time.perf_counter()
    try:
        await conn.execute(text(f"SET maintenance_work_mem = '{BUILD_MAINTENANCE_WORK_MEM}'"))
        await conn.execute(
            text(
                f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{name}" ON knowledge_documents '
                f"USING hnsw (embedding vector_cosine_ops) "
                f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION}) "
                f"WHERE tenant_id = {tenant_literal(tenant)}"
            )
        )
    except DBAPIError as exc:
        # the build left an INVALID index (or none): the next sync drops it and builds again
        log.warning("knowledge_vector_index_failed", tenant_id=str(tenant), index=name, error=str(exc.orig))
        return IndexChange(
            tenant_id=tenant, index=name, action="failed", chunks=chunks, reason=type(exc.orig).__name__
        )
    finally:
        if not conn.invalidated:
            await conn.execute(text("RESET maintenance_work_mem"))
    seconds = time.perf_counter() - started
    log.info(
        "knowledge_vector_index_created",
        tenant_id=str(tenant),
        index=name,
        chunks=chunks,
        seconds=round(seconds, 2),
    )
    return IndexChange(tenant_id=tenant, index=name, action="created", chunks=chunks, seconds=seconds)


def _index_tenant(name: str) -> uuid.UUID | None:
    """The tenant of an index named by :func:`hnsw_index_name` (``None``: not one of those)."""
    try:
        return uuid.UUID(hex=name.removeprefix(TENANT_HNSW_INDEX_PREFIX))
    except ValueError:
        return None
