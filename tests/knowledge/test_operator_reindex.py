"""Re-indexing as a new operator does it: the demo FAQ splits as the seed split it, and a provider model
without a key is refused instead of being recorded while the offline embedding keeps answering."""

from __future__ import annotations

from sqlmodel import select
from switchboard.db.models import KnowledgeDocument, KnowledgeSource, Tenant
from switchboard.knowledge import ingest_source, mark_for_reindex
from switchboard.llm.lexical import LEXICAL_MODEL_NAME
from switchboard.seed import DEMO_FAQ_MD, seed_demo_knowledge
from switchboard.tenant_settings import tenant_settings_from


async def _chunk_texts(sessions, tenant_id) -> list[str]:  # type: ignore[no-untyped-def]
    async with sessions() as session:
        rows = await session.exec(
            select(KnowledgeDocument)
            .where(KnowledgeDocument.tenant_id == tenant_id)
            .order_by(KnowledgeDocument.position)  # type: ignore[arg-type]
        )
        return [row.text for row in rows.all()]


async def test_reindex_splits_the_demo_faq_exactly_as_the_seed(make_tenant, sessions, settings) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    async with sessions() as session, session.begin():
        await seed_demo_knowledge(session, await session.get(Tenant, tenant.id))
    seeded = await _chunk_texts(sessions, tenant.id)
    answers = DEMO_FAQ_MD.count("\n\n") + 1
    assert len(seeded) == answers == 12 and all(len(text) <= 400 for text in seeded)  # six answers, en + es
    assert settings.kb_chunk_size_chars == 1000  # what a reindex used before (two answers a chunk)
    async with sessions() as session, session.begin():
        [pending] = await mark_for_reindex(session, tenant_id=tenant.id)
    report = await ingest_source(
        sessions, settings, tenant_id=tenant.id, source_id=pending.id, content_hash=pending.content_hash
    )
    assert report.status == "ready" and report.chunk_count == answers
    assert await _chunk_texts(sessions, tenant.id) == seeded


async def test_reindex_with_a_provider_model_and_no_key_is_refused_and_changes_nothing(
    make_tenant, sessions, cli
) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    async with sessions() as session, session.begin():
        await seed_demo_knowledge(session, await session.get(Tenant, tenant.id))
    result = await cli.arun(
        "kb", "reindex", "--tenant", tenant.slug, "--model", "text-embedding-3-large", OPENAI_API_KEY=None
    )
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == (
        "error: embedding model 'text-embedding-3-large' needs a provider key: set OPENAI_API_KEY, or give the "
        "tenant one with `switchboard kb set-embedding --api-key` (PUT .../knowledge/embedding); nothing was changed"
    )
    async with sessions() as session:
        row = await session.get(Tenant, tenant.id)
        source = (
            await session.exec(select(KnowledgeSource).where(KnowledgeSource.tenant_id == tenant.id))
        ).one()
    assert tenant_settings_from(row.settings_extensions).knowledge.embedding_model == LEXICAL_MODEL_NAME
    assert (source.status, source.embedding_model) == ("ready", LEXICAL_MODEL_NAME)
