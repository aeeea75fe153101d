"""Vector search strategy: exact tenant scan up to ``kb_exact_scan_max_chunks`` chunks, HNSW above.

The plans are checked with ``EXPLAIN`` on the real Postgres + pgvector, with a low threshold. A tenant
above it searches its own partial HNSW index, which the background job's sync builds
(:mod:`switchboard.knowledge.vector_index`, ``tests/knowledge/test_vector_index.py``).
"""

from __future__ import annotations

import pytest
from sqlalchemy import text
from switchboard.knowledge import search_chunks, set_source_active
from switchboard.knowledge.retrieval import explain_search
from switchboard.knowledge.vector_index import hnsw_index_name, sync_vector_indexes

from tests.utils.documents import OPENING_HOURS, RETURNS_POLICY, SHIPPING, WARRANTY

HNSW_INDEX_PREFIX = "ix_knowledge_documents_hnsw_"
THRESHOLD = 3
"""Tenants with more active chunks than this use HNSW in these tests."""


@pytest.fixture
def strategy_settings(settings):
    return settings.model_copy(update={"kb_exact_scan_max_chunks": THRESHOLD, "kb_chunk_size_chars": 400})


@pytest.fixture
async def tenants(make_tenant, ingest, engine, strategy_settings):
    """``(small, large, large_report)``: 1 chunk vs more than ``THRESHOLD`` chunks, the large one's HNSW
    index built (the background job's sync)."""
    small, large = await make_tenant(), await make_tenant()
    report = await ingest(small, "hours.txt", OPENING_HOURS.encode(), settings_=strategy_settings)
    assert report.status == "ready" and report.chunk_count == 1, report
    body = "\n\n".join([RETURNS_POLICY, SHIPPING, WARRANTY, OPENING_HOURS]).encode()
    large_report = await ingest(large, "faq.txt", body, settings_=strategy_settings)
    assert large_report.status == "ready" and large_report.chunk_count > THRESHOLD, large_report
    for tenant in (small, large):
        await sync_vector_indexes(engine, strategy_settings, tenant_id=tenant.id)
    return small, large, large_report


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
async def test_small_tenant_is_scanned_exactly_and_large_tenant_uses_hnsw(
    tenants, session, strategy_settings, mode
):
    small, large, _ = tenants
    query = "showroom opening hours"
    strategy, plan = await explain_search(
        session, tenant_id=small.id, query=query, mode=mode, settings=strategy_settings
    )
    assert strategy == "exact_scan"
    assert not any(HNSW_INDEX_PREFIX in line for line in plan), plan
    assert any("Sort" in line for line in plan), plan  # distances sorted, not read in index order

    strategy, plan = await explain_search(
        session, tenant_id=large.id, query=query, mode=mode, settings=strategy_settings
    )
    assert strategy == "hnsw"
    assert any(f"Index Scan using {hnsw_index_name(large.id)}" in line for line in plan), plan


async def test_both_strategies_return_the_same_chunks(tenants, session, strategy_settings):
    _, large, large_report = tenants
    hnsw_always = strategy_settings.model_copy(update={"kb_exact_scan_max_chunks": 0})
    exact_always = strategy_settings.model_copy(update={"kb_exact_scan_max_chunks": 1_000_000})
    for query in ("how long is the warranty", "when does delivery arrive", "showroom opening hours"):
        by_hnsw = await search_chunks(
            session, tenant_id=large.id, query=query, mode="vector", settings=hnsw_always, min_similarity=-1
        )
        by_scan = await search_chunks(
            session, tenant_id=large.id, query=query, mode="vector", settings=exact_always, min_similarity=-1
        )
        assert len(by_scan) == large_report.chunk_count  # limit 5, threshold off: all of them
        assert [hit.chunk_id for hit in by_hnsw] == [hit.chunk_id for hit in by_scan], query
        assert [hit.similarity for hit in by_hnsw] == [hit.similarity for hit in by_scan], query


async def test_hnsw_search_leaves_the_transactions_planner_settings_as_they_were(
    tenants, session, strategy_settings
):
    _, large, _ = tenants
    hits = await search_chunks(
        session, tenant_id=large.id, query="warranty", mode="vector", settings=strategy_settings
    )
    assert hits and "warranty" in hits[0].text.lower()
    assert (await session.exec(text("SHOW enable_sort"))).scalar_one() == "on"
    assert (await session.exec(text("SHOW hnsw.ef_search"))).scalar_one() == str(
        strategy_settings.kb_hnsw_ef_search
    )


async def test_inactive_documents_do_not_count_towards_the_threshold(
    tenants, sessions, session, strategy_settings
):
    _, large, large_report = tenants
    async with sessions() as other, other.begin():
        await set_source_active(other, tenant_id=large.id, source_id=large_report.source_id, is_active=False)
    strategy, _ = await explain_search(
        session, tenant_id=large.id, query="warranty", mode="vector", settings=strategy_settings
    )
    assert strategy == "exact_scan"


@pytest.mark.parametrize("mode", ["vector", "hybrid", "neighborhood"])
async def test_search_reuses_one_generic_plan_per_statement_and_restores_the_plan_cache_mode(
    tenants, sessions, strategy_settings, mode
):
    # the driver prepares each statement once per connection: the search plans it once (a generic
    # plan, the question vector an init plan) instead of for every question, and puts the
    # transaction's plan_cache_mode back, so the caller's later statements plan as before
    small, large, _ = tenants
    questions = ["showroom opening hours", "opening hours of the showroom", "when is the showroom open"]
    async with sessions() as session, session.begin():
        assert (await session.exec(text("SHOW plan_cache_mode"))).scalar_one() == "auto"
        before = await _search_plan_counts(session)  # the pooled connection may have run searches
        for tenant in (small, large):  # the exact scan and HNSW: different statements
            for question in questions * 3:
                hits = await search_chunks(
                    session, tenant_id=tenant.id, query=question, mode=mode, settings=strategy_settings
                )
                assert hits and "showroom" in hits[0].text.lower(), (mode, question, hits)
                assert (await session.exec(text("SHOW plan_cache_mode"))).scalar_one() == "auto"
        after = await _search_plan_counts(session)
        used = {
            statement: (generic - before.get(statement, (0, 0))[0], custom - before.get(statement, (0, 0))[1])
            for statement, (generic, custom) in after.items()
            if (generic, custom) != before.get(statement)
        }
        assert sum(generic for generic, _ in used.values()) == 18, used  # every search on a generic plan
        assert all(custom == 0 for _, custom in used.values()), used
        assert 2 <= len(used) <= 4, used  # per strategy, with or without the walk: one plan each
    async with sessions() as session, session.begin():
        assert (await session.exec(text("SHOW plan_cache_mode"))).scalar_one() == "auto"


async def test_search_restores_a_plan_cache_mode_the_caller_set(tenants, session, strategy_settings):
    _, large, _ = tenants
    await session.exec(text("SET LOCAL plan_cache_mode = force_custom_plan"))
    await session.exec(text("SET LOCAL enable_sort = on"))
    hits = await search_chunks(
        session, tenant_id=large.id, query="showroom opening hours", mode="hybrid", settings=strategy_settings
    )
    assert hits and "showroom" in hits[0].text.lower()
    assert (await session.exec(text("SHOW plan_cache_mode"))).scalar_one() == "force_custom_plan"
    assert (await session.exec(text("SHOW enable_sort"))).scalar_one() == "on"


@pytest.mark.parametrize("mode", ["vector", "hybrid", "neighborhood"])
@pytest.mark.parametrize("strategy", ["exact_scan", "hnsw"])
async def test_a_search_without_hits_still_puts_the_planner_options_back(
    tenants, session, strategy_settings, mode, strategy
):
    # the search statement itself restores them (a one-time filter evaluated before its first row):
    # also when no row passes the threshold
    _, large, _ = tenants
    settings = strategy_settings.model_copy(
        update={"kb_exact_scan_max_chunks": 1_000_000 if strategy == "exact_scan" else 0}
    )
    await session.exec(text("SET LOCAL plan_cache_mode = force_custom_plan"))
    await session.exec(text("SET LOCAL enable_sort = on"))
    for _ in range(2):  # the second one on the connection's prepared statement
        hits = await search_chunks(
            session,
            tenant_id=large.id,
            query="zebra quantum xylophone",
            mode=mode,
            settings=settings,
            min_similarity=1.01,
        )
        assert hits == []
        assert (await session.exec(text("SHOW plan_cache_mode"))).scalar_one() == "force_custom_plan"
        assert (await session.exec(text("SHOW enable_sort"))).scalar_one() == "on"
    strategy_used, _ = await explain_search(
        session, tenant_id=large.id, query="zebra quantum xylophone", mode="vector", settings=settings
    )
    assert strategy_used == strategy
    assert (await session.exec(text("SHOW enable_sort"))).scalar_one() == "on"


async def _search_plan_counts(session) -> dict[str, tuple[int, int]]:
    """``{statement: (generic_plans, custom_plans)}`` of the connection's prepared search statements."""
    rows = (
        await session.exec(
            text(
                "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
                " WHERE statement LIKE '%knowledge_documents d%'"
                " AND statement NOT LIKE '%pg_prepared_statements%'"
            )
        )
    ).all()
    return {row.statement: (row.generic_plans, row.custom_plans) for row in rows}
