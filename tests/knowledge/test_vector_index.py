"""Per-tenant HNSW indexes (:mod:`switchboard.knowledge.vector_index`): built when a tenant crosses
``kb_exact_scan_max_chunks``, dropped when it falls back, an invalid leftover replaced; search uses
the index only once it is valid."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from switchboard.knowledge import search_chunks, set_source_active
from switchboard.knowledge.retrieval import explain_search
from switchboard.knowledge.vector_index import (
    SYNC_LOCK_KEY,
    hnsw_index_name,
    sync_vector_indexes,
    tenant_literal,
)
from switchboard.queue.jobs import JOB_QUEUES, KNOWLEDGE_VECTOR_INDEXES
from switchboard.queue.queues import Queue
from switchboard.worker import build_background_worker_settings

from tests.utils.documents import OPENING_HOURS, RETURNS_POLICY, SHIPPING, WARRANTY

THRESHOLD = 3


@pytest.fixture
def index_settings(settings):
    return settings.model_copy(update={"kb_exact_scan_max_chunks": THRESHOLD, "kb_chunk_size_chars": 400})


@pytest.fixture
async def large(make_tenant, ingest, index_settings):
    """``(tenant, report)``: a tenant with more than ``THRESHOLD`` active chunks and no index yet."""
    tenant = await make_tenant()
    body = "\n\n".join([RETURNS_POLICY, SHIPPING, WARRANTY, OPENING_HOURS]).encode()
    report = await ingest(tenant, "faq.txt", body, settings_=index_settings)
    assert report.status == "ready" and report.chunk_count > THRESHOLD, report
    return tenant, report


async def _index(session, tenant) -> tuple[str, bool] | None:
    """``(definition, valid)`` of the tenant's HNSW index, or ``None``."""
    row = (
        await session.exec(
            text(
                "SELECT pg_get_indexdef(i.indexrelid) AS definition, i.indisvalid AS valid FROM pg_index i "
                "WHERE i.indexrelid = to_regclass(:name)"
            ),
            params={"name": hnsw_index_name(tenant.id)},
        )
    ).one_or_none()
    await session.rollback()  # the next sync's CREATE INDEX CONCURRENTLY waits for open transactions
    return None if row is None else (row.definition, row.valid)


async def _strategy(session, tenant, settings) -> tuple[str, list[str]]:
    strategy, plan = await explain_search(
        session, tenant_id=tenant.id, query="showroom opening hours", mode="hybrid", settings=settings
    )
    await session.rollback()
    return strategy, plan


async def test_a_tenant_above_the_threshold_is_scanned_exactly_until_its_index_is_built(
    large, make_tenant, ingest, engine, session, index_settings
):
    tenant, report = large
    small = await make_tenant()
    await ingest(small, "hours.txt", OPENING_HOURS.encode(), settings_=index_settings)
    assert await _index(session, tenant) is None
    assert (await _strategy(session, tenant, index_settings))[0] == "exact_scan"

    changes = await sync_vector_indexes(engine, index_settings, tenant_id=tenant.id)
    assert [(c.action, c.tenant_id, c.chunks) for c in changes] == [
        ("created", tenant.id, report.chunk_count)
    ]
    definition, valid = await _index(session, tenant)
    assert valid
    assert "USING hnsw (embedding vector_cosine_ops)" in definition
    assert f"WHERE (tenant_id = {tenant_literal(tenant.id)})" in definition, definition
    strategy, plan = await _strategy(session, tenant, index_settings)
    assert strategy == "hnsw"
    assert any(f"Index Scan using {hnsw_index_name(tenant.id)}" in line for line in plan), plan

    # the small tenant (one chunk) gets none; a second sync changes nothing
    assert await sync_vector_indexes(engine, index_settings, tenant_id=small.id) == []
    assert await _index(session, small) is None
    assert await sync_vector_indexes(engine, index_settings, tenant_id=tenant.id) == []

    hits = await search_chunks(
        session, tenant_id=tenant.id, query="showroom opening hours", mode="vector", settings=index_settings
    )
    assert hits and "showroom" in hits[0].text.lower()


async def test_the_index_is_dropped_when_the_tenant_falls_back_to_the_threshold(
    large, engine, sessions, session, index_settings
):
    tenant, report = large
    await sync_vector_indexes(engine, index_settings, tenant_id=tenant.id)
    assert await _index(session, tenant) is not None
    async with sessions() as other, other.begin():
        await set_source_active(other, tenant_id=tenant.id, source_id=report.source_id, is_active=False)

    changes = await sync_vector_indexes(engine, index_settings, tenant_id=tenant.id)
    assert [(c.action, c.reason, c.chunks) for c in changes] == [("dropped", "below_threshold", 0)]
    assert await _index(session, tenant) is None
    assert (await _strategy(session, tenant, index_settings))[0] == "exact_scan"


async def test_an_invalid_index_left_by_a_failed_build_is_dropped_and_built_again(
    large, engine, session, index_settings
):
    tenant, _ = large
    name = hnsw_index_name(tenant.id)
    # a concurrent build that fails leaves its index INVALID: here a unique one over duplicate values
    async with engine.connect() as raw:
        conn = await raw.execution_options(isolation_level="AUTOCOMMIT")
        with pytest.raises(Exception, match="could not create unique index"):
            await conn.execute(
                text(
                    f'CREATE UNIQUE INDEX CONCURRENTLY "{name}" ON knowledge_documents (tenant_id) '
                    f"WHERE tenant_id = {tenant_literal(tenant.id)}"
                )
            )
    assert (await _index(session, tenant))[1] is False
    assert (await _strategy(session, tenant, index_settings))[0] == "exact_scan"  # not a usable index

    changes = await sync_vector_indexes(engine, index_settings, tenant_id=tenant.id)
    assert [(c.action, c.reason) for c in changes] == [("dropped", "invalid"), ("created", None)]
    definition, valid = await _index(session, tenant)
    assert valid and "hnsw" in definition
    assert (await _strategy(session, tenant, index_settings))[0] == "hnsw"


async def test_a_sync_while_another_holds_the_lock_does_nothing(large, engine, session, index_settings):
    tenant, _ = large
    async with engine.connect() as other:
        assert (
            await other.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": SYNC_LOCK_KEY})
        ).scalar()
        try:
            assert await sync_vector_indexes(engine, index_settings, tenant_id=tenant.id) is None
        finally:
            await other.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": SYNC_LOCK_KEY})
        await other.commit()
    assert await _index(session, tenant) is None


def test_the_background_worker_runs_the_sync_every_minute(settings):
    worker = build_background_worker_settings(settings)
    [job] = [job for job in worker.cron_jobs if job.name == KNOWLEDGE_VECTOR_INDEXES.name]
    assert job.second == {50}
    assert JOB_QUEUES[KNOWLEDGE_VECTOR_INDEXES.name] is Queue.background
