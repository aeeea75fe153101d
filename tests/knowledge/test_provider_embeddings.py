"""Provider embeddings through LiteLLM against a loopback OpenAI-compatible server."""

from __future__ import annotations

from sqlmodel import select
from switchboard.db.models import KnowledgeDocument, Tenant
from switchboard.knowledge import list_sources, resolve_embedding_config, search_chunks, set_tenant_embedding
from switchboard.llm.lexical import LEXICAL_MODEL_NAME

from tests.utils.documents import OPENING_HOURS, RETURNS_POLICY, SHIPPING, WARRANTY, make_pdf
from tests.utils.fake_embeddings import FakeEmbeddingProvider, serve_fake_embeddings

PAGES = [RETURNS_POLICY, SHIPPING, WARRANTY, OPENING_HOURS, "Gift cards are valid for two years."]


def _fast(settings):
    return settings.model_copy(
        update={
            "kb_embedding_batch_size": 2,
            "kb_embedding_max_attempts": 2,
            "kb_embedding_retry_wait_s": 0.0,
        }
    )


async def _use_provider(sessions, settings, tenant_id, base_url):
    async with sessions() as session, session.begin():
        tenant = await session.get(Tenant, tenant_id)
        set_tenant_embedding(
            settings, tenant, model="text-embedding-3-small", api_key="sk-test-key", api_base=base_url
        )
        session.add(tenant)


async def _chunk_count(sessions, tenant_id):
    async with sessions() as session:
        rows = await session.exec(
            select(KnowledgeDocument.id).where(KnowledgeDocument.tenant_id == tenant_id)
        )
        return len(rows.all())


async def test_provider_failing_mid_batch_leaves_no_partial_document(make_tenant, ingest, sessions, settings):
    settings = _fast(settings)
    tenant = await make_tenant()
    async with serve_fake_embeddings(FakeEmbeddingProvider(fail_from=2)) as provider:
        await _use_provider(sessions, settings, tenant.id, provider.base_url)
        report = await ingest(tenant, "faq.pdf", make_pdf(PAGES), settings_=settings)
    assert report.status == "failed"
    assert "text-embedding-3-small" in report.error and "after 2 attempts" in report.error
    assert report.details == {"failure": "embedding_failed"}
    # batch 1 succeeded, batch 2 failed twice (2 attempts), batch 3 never sent
    assert [len(r["inputs"]) for r in provider.requests] == [2, 2, 2]
    assert await _chunk_count(sessions, tenant.id) == 0
    async with sessions() as session:
        [source] = await list_sources(session, tenant_id=tenant.id)
    assert (source.status, source.chunk_count) == ("failed", 0)
    assert source.details["failure"] == "embedding_failed" and source.details["chunks"] == 5


async def test_provider_failure_keeps_previous_version_intact(make_tenant, ingest, sessions, settings):
    settings = _fast(settings)
    tenant = await make_tenant()
    async with serve_fake_embeddings(FakeEmbeddingProvider(fail_from=3)) as provider:
        await _use_provider(sessions, settings, tenant.id, provider.base_url)
        first = await ingest(tenant, "faq.pdf", make_pdf(PAGES[:2]), settings_=settings)
        assert first.status == "ready" and first.chunk_count == 2
        second = await ingest(tenant, "faq.pdf", make_pdf(PAGES), settings_=settings)
    assert second.status == "failed"
    assert await _chunk_count(sessions, tenant.id) == 2


async def test_transient_provider_error_is_retried_and_search_uses_the_provider(
    make_tenant, ingest, sessions, session, settings
):
    settings = _fast(settings)
    tenant = await make_tenant()
    async with serve_fake_embeddings(FakeEmbeddingProvider(fail_requests={2})) as provider:
        await _use_provider(sessions, settings, tenant.id, provider.base_url)
        report = await ingest(tenant, "faq.pdf", make_pdf(PAGES), settings_=settings)
        assert (report.status, report.chunk_count, report.embedding_model) == (
            "ready",
            5,
            "text-embedding-3-small",
        )
        assert len(provider.requests) == 4  # 3 batches + 1 retry
        assert {r["authorization"] for r in provider.requests} == {"Bearer sk-test-key"}
        assert {r["model"] for r in provider.requests} == {"text-embedding-3-small"}
        async with sessions() as s:
            config = resolve_embedding_config(settings, await s.get(Tenant, tenant.id))
        hits = await search_chunks(
            session,
            tenant_id=tenant.id,
            query="Is the pump covered by the 24 month warranty of the espresso machine?",
            mode="vector",
            settings=settings,
            embedding=config,
        )
        assert len(provider.requests) == 5  # the question was embedded by the provider
    assert hits and hits[0].page == 3


async def test_tenant_key_is_stored_encrypted_and_no_key_means_lexical(make_tenant, sessions, settings):
    tenant = await make_tenant()
    async with sessions() as session, session.begin():
        row = await session.get(Tenant, tenant.id)
        assert resolve_embedding_config(settings, row).model == LEXICAL_MODEL_NAME
        set_tenant_embedding(settings, row, model="text-embedding-3-small", api_key="sk-secret-123")
        session.add(row)
    async with sessions() as session:
        row = await session.get(Tenant, tenant.id)
        block = row.settings_extensions["knowledge"]
        assert "sk-secret-123" not in str(row.settings_extensions)
        config = resolve_embedding_config(settings, row)
    assert block["embedding_model"] == "text-embedding-3-small"
    assert (config.model, config.api_key, config.min_similarity) == (
        "text-embedding-3-small",
        "sk-secret-123",
        settings.kb_min_similarity,
    )
