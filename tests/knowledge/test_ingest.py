"""Ingestion: chunks stored with page/sheet, re-upload idempotence, failures store nothing half-way."""

from __future__ import annotations

import pytest
from sqlalchemy import event
from sqlmodel import func, select
from switchboard.db.models import KgEntity, KnowledgeDocument, KnowledgeSource, SourceStatus
from switchboard.knowledge import (
    DocumentRejected,
    delete_source,
    ingest_source,
    list_sources,
    mark_for_reindex,
    register_upload,
)
from switchboard.llm.lexical import LEXICAL_MODEL_NAME

from tests.utils.documents import (
    OPENING_HOURS,
    RETURNS_POLICY,
    SHIPPING,
    WARRANTY,
    corrupt,
    make_encrypted_pdf,
    make_image_only_pdf,
    make_pdf,
    make_xlsx,
)


async def _chunks(sessions, tenant_id):
    async with sessions() as session:
        rows = await session.exec(
            select(KnowledgeDocument)
            .where(KnowledgeDocument.tenant_id == tenant_id)
            .order_by(KnowledgeDocument.source_id, KnowledgeDocument.position)
        )
        return list(rows.all())


async def _sources(sessions, tenant_id):
    async with sessions() as session:
        return await list_sources(session, tenant_id=tenant_id)


async def test_pdf_chunks_record_their_page_hash_and_embedding(make_tenant, ingest, sessions):
    tenant = await make_tenant()
    report = await ingest(tenant, "faq.pdf", make_pdf([RETURNS_POLICY, SHIPPING]))
    assert (report.status, report.chunk_count, report.embedding_model) == ("ready", 2, LEXICAL_MODEL_NAME)
    chunks = await _chunks(sessions, tenant.id)
    assert [(c.position, c.page) for c in chunks] == [(0, 1), (1, 2)]
    assert all(c.is_active and len(c.content_hash) == 64 for c in chunks)
    assert len(chunks[0].embedding) == 1536
    [source] = await _sources(sessions, tenant.id)
    assert (source.status, source.chunk_count, source.content_type) == ("ready", 2, "application/pdf")
    assert source.details["pages"] == 2 and source.details["kind"] == "pdf"


async def test_xlsx_chunks_record_their_sheet(make_tenant, ingest, sessions):
    tenant = await make_tenant()
    await ingest(
        tenant,
        "book.xlsx",
        make_xlsx({"Prices": [["SKU", "Price"], ["A-1", 3]], "Stock": [["SKU", "Qty"], ["A-1", 7]]}),
    )
    chunks = await _chunks(sessions, tenant.id)
    assert [(c.sheet, c.text) for c in chunks] == [
        ("Prices", "SKU: A-1; Price: 3"),
        ("Stock", "SKU: A-1; Qty: 7"),
    ]


async def test_reupload_of_same_bytes_is_a_no_op(make_tenant, ingest, sessions, settings):
    tenant = await make_tenant()
    data = make_pdf([WARRANTY])
    first = await ingest(tenant, "warranty.pdf", data)
    async with sessions() as session, session.begin():
        again = await register_upload(
            session, settings, tenant_id=tenant.id, filename="copy-of-warranty.pdf", data=data
        )
    assert again.action == "unchanged"
    assert again.source.id == first.source_id
    assert not again.needs_ingest
    second = await ingest(tenant, "warranty.pdf", data)
    assert second.source_id == first.source_id
    assert len(await _sources(sessions, tenant.id)) == 1
    assert len(await _chunks(sessions, tenant.id)) == 1


async def test_reupload_under_same_name_replaces_never_duplicates(make_tenant, ingest, sessions):
    tenant = await make_tenant()
    first = await ingest(tenant, "faq.pdf", make_pdf([RETURNS_POLICY]))
    second = await ingest(tenant, "faq.pdf", make_pdf([SHIPPING, WARRANTY, OPENING_HOURS]))
    assert second.source_id == first.source_id and second.chunk_count == 3
    [source] = await _sources(sessions, tenant.id)
    chunks = await _chunks(sessions, tenant.id)
    assert [c.page for c in chunks] == [1, 2, 3]
    assert not any("refund" in c.text for c in chunks)
    assert source.chunk_count == 3


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (make_encrypted_pdf(RETURNS_POLICY), "password-protected PDF"),
        (make_image_only_pdf(), "image-only"),
        (corrupt(make_pdf([RETURNS_POLICY, SHIPPING])), "corrupt PDF"),
    ],
)
async def test_unreadable_file_stores_nothing_and_keeps_the_previous_version(
    make_tenant, ingest, sessions, data, reason
):
    tenant = await make_tenant()
    await ingest(tenant, "faq.pdf", make_pdf([WARRANTY]))
    [before] = await _sources(sessions, tenant.id)
    with pytest.raises(DocumentRejected) as rejected:
        await ingest(tenant, "faq.pdf", data)
    assert reason in str(rejected.value)
    [source] = await _sources(sessions, tenant.id)
    assert (source.status, source.error, source.content_hash) == (
        SourceStatus.ready,
        None,
        before.content_hash,
    )
    chunks = await _chunks(sessions, tenant.id)
    assert len(chunks) == 1 and chunks[0].text.replace("\n", " ") == WARRANTY


async def test_unreadable_new_file_stores_no_row_and_a_resubmit_is_refused_again(
    make_tenant, ingest, sessions, settings
):
    tenant = await make_tenant()
    for _ in range(2):
        with pytest.raises(DocumentRejected) as rejected:
            await ingest(tenant, "scan.pdf", make_image_only_pdf())
        assert rejected.value.reason == "no_text"
        assert await _sources(sessions, tenant.id) == []
        assert await _chunks(sessions, tenant.id) == []


async def test_upload_limits_and_sniffing_reject_before_storing(make_tenant, sessions, settings):
    tenant = await make_tenant()
    small = settings.model_copy(update={"kb_max_upload_bytes": 100})
    async with sessions() as session:
        with pytest.raises(DocumentRejected) as too_large:
            await register_upload(session, small, tenant_id=tenant.id, filename="big.txt", data=b"a " * 100)
        assert too_large.value.reason == "too_large"
        with pytest.raises(DocumentRejected) as image:
            await register_upload(
                session,
                settings,
                tenant_id=tenant.id,
                filename="x.pdf",
                data=b"\xff\xd8\xff\xe0" + b"\x00" * 99,
            )
        assert image.value.reason == "unsupported"
    assert await _sources(sessions, tenant.id) == []


async def test_stale_job_for_a_replaced_upload_does_nothing(make_tenant, sessions, settings):
    tenant = await make_tenant()
    async with sessions() as session, session.begin():
        old = await register_upload(
            session, settings, tenant_id=tenant.id, filename="a.txt", data=b"Version one text."
        )
        old_hash = old.source.content_hash
    async with sessions() as session, session.begin():
        await register_upload(
            session, settings, tenant_id=tenant.id, filename="a.txt", data=b"Version two text."
        )
    stale = await ingest_source(
        sessions, settings, tenant_id=tenant.id, source_id=old.source.id, content_hash=old_hash
    )
    assert stale.status == "skipped" and stale.error == "superseded by a newer upload"
    assert await _chunks(sessions, tenant.id) == []


async def test_reindex_and_delete(make_tenant, ingest, sessions, settings):
    tenant = await make_tenant()
    report = await ingest(tenant, "faq.pdf", make_pdf([RETURNS_POLICY, SHIPPING]))
    before = [c.id for c in await _chunks(sessions, tenant.id)]
    async with sessions() as session, session.begin():
        [pending] = await mark_for_reindex(session, tenant_id=tenant.id)
    assert pending.status == "pending"
    again = await ingest_source(
        sessions, settings, tenant_id=tenant.id, source_id=report.source_id, content_hash=pending.content_hash
    )
    assert again.status == "ready" and again.chunk_count == 2
    after = await _chunks(sessions, tenant.id)
    assert len(after) == 2 and not set(before) & {c.id for c in after}
    async with sessions() as session, session.begin():
        await delete_source(session, tenant_id=tenant.id, source_id=report.source_id)
    assert await _sources(sessions, tenant.id) == []
    assert await _chunks(sessions, tenant.id) == []
    async with sessions() as session:
        count = (
            await session.exec(
                select(func.count())
                .select_from(KnowledgeSource)
                .where(KnowledgeSource.tenant_id == tenant.id)
            )
        ).one()
    assert count == 0


async def test_chunk_insert_stores_the_exact_float4_vectors_and_leaves_no_codec_on_the_pool(
    make_tenant, ingest, sessions
):
    from array import array

    from sqlalchemy import text
    from switchboard.knowledge.ingest import insert_chunks
    from switchboard.llm.lexical import lexical_embedding

    tenant = await make_tenant()
    report = await ingest(tenant, "notes.txt", RETURNS_POLICY.encode())
    async with sessions() as session, session.begin():
        ids = await insert_chunks(
            session,
            tenant_id=tenant.id,
            source_id=report.source_id,
            is_active=False,
            chunks=[(3, "Prices", "first row", {"row": 2}), (None, None, "second", {})],
            vectors=[lexical_embedding("first row"), lexical_embedding("second")],
        )
        rows = (
            await session.exec(
                text(
                    "SELECT id, position, page, sheet, text, is_active, attributes, embedding::text AS vector, "
                    "embedding_half IS NOT NULL AS half, tsv IS NOT NULL AS tsv FROM knowledge_documents "
                    "WHERE id = ANY(:ids) ORDER BY position"
                ),
                params={"ids": ids},
            )
        ).all()
    assert [r.id for r in rows] == ids
    assert [
        (r.position, r.page, r.sheet, r.text, r.is_active, r.attributes, r.half, r.tsv) for r in rows
    ] == [
        (0, 3, "Prices", "first row", False, {"row": 2}, True, True),
        (1, None, None, "second", False, {}, True, True),
    ]
    stored = [float(v) for v in rows[0].vector.strip("[]").split(",")]
    assert array("f", stored) == array("f", lexical_embedding("first row"))  # the same float4s, bit for bit
    # the binary codec was for that one statement: every pooled connection reads vectors as before
    for _ in range(3):
        async with sessions() as session:
            chunk = await session.get(KnowledgeDocument, ids[1])
            assert chunk is not None and isinstance(chunk.embedding[0], float)
            value = (
                await session.exec(
                    text("SELECT embedding FROM knowledge_documents WHERE id = :i"), params={"i": ids[1]}
                )
            ).scalar()
            assert isinstance(value, str) and value.startswith("[")


async def test_a_refused_chunk_insert_rolls_back_and_the_pool_still_works(make_tenant, ingest, sessions):
    import asyncpg
    from switchboard.knowledge.ingest import insert_chunks

    tenant = await make_tenant()
    report = await ingest(tenant, "notes.txt", RETURNS_POLICY.encode())
    with pytest.raises(asyncpg.CharacterNotInRepertoireError):
        async with sessions() as session, session.begin():
            await insert_chunks(
                session,
                tenant_id=tenant.id,
                source_id=report.source_id,
                is_active=True,
                chunks=[(None, None, "a NUL \x00 here", {})],
                vectors=[[0.5] * 1536],
            )
    with pytest.raises(ValueError, match="dimensions"):
        async with sessions() as session, session.begin():
            await insert_chunks(
                session,
                tenant_id=tenant.id,
                source_id=report.source_id,
                is_active=True,
                chunks=[(None, None, "short", {})],
                vectors=[[0.5] * 8],
            )
    assert [c.text for c in await _chunks(sessions, tenant.id)] == [RETURNS_POLICY.strip()]
    again = await ingest(tenant, "more.txt", SHIPPING.encode())
    assert again.status == "ready" and again.chunk_count == 1


async def test_chunk_inserts_on_one_connection_reuse_one_prepared_statement_and_keep_text_vectors(
    make_tenant, ingest, sessions
):
    from array import array

    from sqlalchemy import text
    from switchboard.knowledge.ingest import insert_chunks
    from switchboard.llm.lexical import lexical_embedding

    tenant = await make_tenant()
    report = await ingest(tenant, "notes.txt", RETURNS_POLICY.encode())
    async with sessions() as session, session.begin():
        connection = await session.connection()
        statements, ids = [], []
        for round_ in range(3):  # three documents' inserts on the same connection
            ids += await insert_chunks(
                session,
                tenant_id=tenant.id,
                source_id=report.source_id,
                is_active=True,
                chunks=[(None, None, f"chunk {round_}", {})],
                vectors=[lexical_embedding(f"chunk {round_}")],
            )
            statements.append(connection.info["switchboard.knowledge.insert_chunks"][1])
            # between inserts the connection exchanges vectors as text, as every other statement expects
            echoed = (
                await session.exec(text("SELECT CAST(:v AS vector)::text"), params={"v": "[1,2.5]"})
            ).scalar()
            assert echoed == "[1,2.5]"
            value = (
                await session.exec(
                    text("SELECT embedding FROM knowledge_documents WHERE id = :i"), params={"i": ids[-1]}
                )
            ).scalar()
            assert isinstance(value, str) and value.startswith("[")
        assert statements[0] is statements[1] is statements[2]
        rows = (
            await session.exec(
                text("SELECT text, embedding::text AS vector FROM knowledge_documents WHERE id = ANY(:ids)"),
                params={"ids": ids},
            )
        ).all()
    assert len(rows) == 3
    for row in rows:
        stored = [float(v) for v in row.vector.strip("[]").split(",")]
        assert array("f", stored) == array("f", lexical_embedding(row.text))  # bit for bit, every round


async def test_an_upload_takes_three_statements_and_its_ingestion_seven_in_two_transactions(
    make_tenant, sessions, settings, engine
):
    """Statements SQLAlchemy sends (the chunk, entity, mention and relation inserts go through the raw
    asyncpg connection and are not seen here). Fewer than a plain implementation's 5 for the upload (two
    look-ups, two flushes and a look-up of the file), 10 for the ingestion in three transactions
    (three reads, the ``processing`` mark on its own, the stale-entity read and the delete apart)."""
    tenant = await make_tenant()
    statements: list[str] = []
    begins: list[None] = []

    def record(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
        statements.append(" ".join(statement.split()))

    def begin(conn):  # type: ignore[no-untyped-def]
        begins.append(None)

    event.listen(engine.sync_engine, "before_cursor_execute", record)
    event.listen(engine.sync_engine, "begin", begin)
    try:
        async with sessions() as session, session.begin():
            outcome = await register_upload(
                session,
                settings,
                tenant_id=tenant.id,
                filename="valves.txt",
                data=b"The V200 valve seals with PTFE.",
            )
        upload, statements[:] = list(statements), []
        begins.clear()
        report = await ingest_source(
            sessions,
            settings,
            tenant_id=tenant.id,
            source_id=outcome.source.id,
            content_hash=outcome.source.content_hash,
        )
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", record)
        event.remove(engine.sync_engine, "begin", begin)
    assert report.status == "ready" and report.chunk_count == 1
    assert [s.split(" ")[0] for s in upload] == ["SELECT", "INSERT", "INSERT"], upload
    assert "knowledge_sources.content_hash = " in upload[0] and "knowledge_sources.filename = " in upload[0]
    assert len(statements) == 7, statements
    assert "JOIN tenants" in statements[0] and "LEFT OUTER JOIN knowledge_source_files" in statements[0]
    assert statements[1:3] == ["SET LOCAL synchronous_commit = off", statements[2]]
    assert statements[2].startswith("UPDATE knowledge_sources SET status=")
    assert statements[4].startswith("WITH deleted AS ( DELETE FROM knowledge_documents")
    assert len(begins) == 2  # the read with the mark, then the store (the mark had its own transaction)


async def test_a_replacement_still_drops_the_old_chunks_and_the_entities_only_they_named(
    make_tenant, ingest, sessions
):
    tenant = await make_tenant()
    first = await ingest(tenant, "valves.txt", b"The V200 valve seals with PTFE.")
    second = await ingest(tenant, "valves.txt", b"The K300 valve seals with EPDM.")
    assert second.source_id == first.source_id and second.status == "ready"
    assert [c.text for c in await _chunks(sessions, tenant.id)] == ["The K300 valve seals with EPDM."]
    async with sessions() as session:
        names = set(
            (await session.exec(select(KgEntity.norm_name).where(KgEntity.tenant_id == tenant.id))).all()
        )
    assert "v200" not in names and "ptfe" not in names and {"k300", "epdm"} <= names, names
