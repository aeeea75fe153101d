"""``knowledge_chunk_vectors`` (migration ``0024_chunk_vectors``): the exact scan's narrow table.

The database keeps it (triggers on ``knowledge_documents``, a cascade on delete), so every check
here goes through the real writers (ingestion, ``set_source_active``, re-ingestion, deletion) and
compares the table with what it must hold: the active chunks with an embedding, the same values.
"""

from __future__ import annotations

import asyncio
import uuid

from sqlalchemy import text
from switchboard.db.engine import create_engine
from switchboard.db.migrate import upgrade
from switchboard.knowledge import delete_source, search_chunks, set_source_active
from switchboard.knowledge.retrieval import explain_search

from tests.utils.documents import OPENING_HOURS, RETURNS_POLICY, SHIPPING, WARRANTY
from tests.utils.tenants import insert_raw_tenant

_EXPECTED = """
SELECT id, source_id, embedding_half::text AS half FROM knowledge_documents
WHERE tenant_id = :t AND is_active AND embedding_half IS NOT NULL ORDER BY id
"""
_STORED = """
SELECT id, source_id, embedding_half::text AS half FROM knowledge_chunk_vectors WHERE tenant_id = :t ORDER BY id
"""


async def _mirror(sessions, tenant_id):  # type: ignore[no-untyped-def]
    """(what the narrow table must hold, what it holds) for the tenant: (id, source, half) rows."""
    async with sessions() as session:
        expected = [
            tuple(row) for row in (await session.exec(text(_EXPECTED), params={"t": tenant_id})).all()
        ]
        stored = [tuple(row) for row in (await session.exec(text(_STORED), params={"t": tenant_id})).all()]
    return expected, stored


async def _set_active(sessions, tenant_id, source_id, active):  # type: ignore[no-untyped-def]
    async with sessions() as session, session.begin():
        await set_source_active(session, tenant_id=tenant_id, source_id=source_id, is_active=active)


async def test_the_narrow_table_follows_ingestion_deactivation_reingestion_and_deletion(
    make_tenant, ingest, sessions
):
    tenant, other = await make_tenant(), await make_tenant()
    faq = await ingest(tenant, "faq.txt", "\n\n".join([RETURNS_POLICY, SHIPPING, WARRANTY]).encode())
    hours = await ingest(tenant, "hours.txt", OPENING_HOURS.encode())
    await ingest(other, "hours.txt", OPENING_HOURS.encode())
    expected, stored = await _mirror(sessions, tenant.id)
    assert len(stored) == faq.chunk_count + hours.chunk_count >= 2
    assert stored == expected

    await _set_active(sessions, tenant.id, faq.source_id, False)
    expected, stored = await _mirror(sessions, tenant.id)
    assert {source for _, source, _ in stored} == {hours.source_id}
    assert stored == expected

    await _set_active(sessions, tenant.id, faq.source_id, True)
    expected, stored = await _mirror(sessions, tenant.id)
    assert len(stored) == faq.chunk_count + hours.chunk_count
    assert stored == expected

    before = {row[0] for row in stored}
    again = await ingest(tenant, "hours.txt", (OPENING_HOURS + "\n\nClosed on public holidays.").encode())
    assert again.status == "ready"
    expected, stored = await _mirror(sessions, tenant.id)
    assert stored == expected
    assert {row[0] for row in stored if row[1] == hours.source_id}.isdisjoint(before)  # new chunks, old gone

    async with sessions() as session, session.begin():
        await delete_source(session, tenant_id=tenant.id, source_id=faq.source_id)
    expected, stored = await _mirror(sessions, tenant.id)
    assert {source for _, source, _ in stored} == {hours.source_id}
    assert stored == expected
    other_expected, other_stored = await _mirror(sessions, other.id)
    assert other_stored == other_expected and other_stored  # the other tenant's rows untouched


async def test_an_embedding_change_is_copied_and_an_update_that_changes_nothing_writes_nothing(
    make_tenant, ingest, sessions
):
    tenant = await make_tenant()
    report = await ingest(tenant, "faq.txt", "\n\n".join([RETURNS_POLICY, SHIPPING]).encode())
    versions = "SELECT id, xmin::text FROM knowledge_chunk_vectors WHERE tenant_id = :t ORDER BY id"
    async with sessions() as session:
        first = (await session.exec(text(versions), params={"t": tenant.id})).all()
    await _set_active(sessions, tenant.id, report.source_id, True)  # already active
    async with sessions() as session:
        assert (await session.exec(text(versions), params={"t": tenant.id})).all() == first

    chunk_id = first[0][0]
    async with sessions() as session, session.begin():
        await session.exec(
            text(
                "UPDATE knowledge_documents SET embedding = array_fill(0.5, ARRAY[1536])::vector WHERE id = :i"
            ),
            params={"i": chunk_id},
        )
    expected, stored = await _mirror(sessions, tenant.id)
    assert stored == expected
    async with sessions() as session:
        updated = (await session.exec(text(versions), params={"t": tenant.id})).all()
    assert [row for row in updated if row[0] != chunk_id] == [row for row in first if row[0] != chunk_id]
    assert dict(updated)[chunk_id] != dict(first)[chunk_id]


async def test_the_exact_scan_reads_the_narrow_table_and_misses_a_deactivated_document(
    make_tenant, ingest, sessions, session, settings
):
    tenant = await make_tenant()
    hours = await ingest(tenant, "hours.txt", OPENING_HOURS.encode())
    await ingest(tenant, "faq.txt", RETURNS_POLICY.encode())
    query = "showroom opening hours"
    strategy, plan = await explain_search(
        session, tenant_id=tenant.id, query=query, mode="vector", settings=settings
    )
    assert strategy == "exact_scan"
    assert any("knowledge_chunk_vectors" in line for line in plan), plan
    found = await search_chunks(session, tenant_id=tenant.id, query=query, mode="vector", settings=settings)
    assert found and found[0].source_id == hours.source_id

    await _set_active(sessions, tenant.id, hours.source_id, False)
    async with sessions() as fresh:
        found = await search_chunks(
            fresh, tenant_id=tenant.id, query=query, mode="vector", settings=settings, min_similarity=-1.0
        )
    assert found and hours.source_id not in {hit.source_id for hit in found}


async def test_the_migration_backfills_the_active_chunks_only(scratch_database_url):
    """Chunks written before ``0024_chunk_vectors``: the active ones with an embedding are copied."""
    await asyncio.to_thread(upgrade, scratch_database_url, "0023_events")
    engine = create_engine(scratch_database_url, pool_size=1)
    tenant, source = uuid.uuid4(), uuid.uuid4()
    try:
        async with engine.begin() as conn:
            await insert_raw_tenant(conn, tenant)
            await conn.execute(
                text(
                    "INSERT INTO knowledge_sources (id, tenant_id, filename, content_hash, size_bytes, status, "
                    "is_active, chunk_count, details, created_at, updated_at) "
                    "VALUES (:id, :t, 'a.txt', 'h', 1, 'ready', true, 3, '{}', now(), now())"
                ),
                {"id": source, "t": tenant},
            )
            for position, (active, value) in enumerate([(True, 0.25), (False, 0.5), (True, None)]):
                await conn.execute(
                    text(
                        "INSERT INTO knowledge_documents (tenant_id, source_id, position, text, embedding, "
                        "is_active, content_hash, attributes, created_at) VALUES (:t, :s, :p, 'x', "
                        "CASE WHEN CAST(:v AS real) IS NULL THEN NULL "
                        "ELSE array_fill(CAST(:v AS real), ARRAY[1536])::vector END, :a, 'h', '{}', now())"
                    ),
                    {"t": tenant, "s": source, "p": position, "v": value, "a": active},
                )
        await asyncio.to_thread(upgrade, scratch_database_url)
        async with engine.connect() as conn:
            stored = (
                await conn.execute(
                    text(
                        "SELECT d.position, v.embedding_half = d.embedding_half FROM knowledge_chunk_vectors v "
                        "JOIN knowledge_documents d ON d.id = v.id"
                    )
                )
            ).all()
        assert [tuple(row) for row in stored] == [(0, True)]
    finally:
        await engine.dispose()
