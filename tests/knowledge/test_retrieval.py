"""Retrieval: tenant isolation in every mode, deactivation, exact codes, the relevance threshold."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text
from switchboard.errors import TenantNotFound
from switchboard.knowledge import search_chunks, set_source_active
from switchboard.knowledge.retrieval import code_tokens, explain_search, keywords
from switchboard.knowledge.vector_index import hnsw_index_name, sync_vector_indexes

from tests.utils.documents import (
    OPENING_HOURS,
    PARTS,
    RELATED_QUESTIONS,
    RETURNS_POLICY,
    SHIPPING,
    UNRELATED_QUESTIONS,
    WARRANTY,
    make_csv,
    make_docx,
    make_pdf,
    make_xlsx,
)

MODES = ("vector", "hybrid", "exact")


@pytest.fixture
async def shop(make_tenant, ingest):
    """A tenant with a 4-page FAQ PDF and a parts price list (XLSX)."""
    tenant = await make_tenant()
    report = await ingest(tenant, "faq.pdf", make_pdf([RETURNS_POLICY, SHIPPING, WARRANTY, OPENING_HOURS]))
    assert report.status == "ready", report.error
    parts = await ingest(tenant, "parts.xlsx", make_xlsx({"Parts": [["Part", "Name", "Price EUR"], *PARTS]}))
    assert parts.status == "ready", parts.error
    return tenant


@pytest.fixture(params=["exact_scan", "hnsw"])
def search_settings(request, settings):
    """Settings under which vector search scans the tenant exactly, or uses the tenant's HNSW index
    (threshold 0: every tenant with a chunk gets one; :func:`search` builds it)."""
    if request.param == "exact_scan":
        return settings
    return settings.model_copy(update={"kb_exact_scan_max_chunks": 0})


async def search(session, settings, tenant, query, mode="hybrid"):
    """``search_chunks``; under threshold 0, first the background job's sync of the tenant's HNSW
    index (made, or dropped when it has no active chunk), then a check that vector and hybrid use it."""
    if settings.kb_exact_scan_max_chunks == 0:
        await session.rollback()  # CREATE INDEX CONCURRENTLY waits for every older transaction
        await sync_vector_indexes(session.bind, settings, tenant_id=tenant.id)
        if mode in ("vector", "hybrid"):
            indexed = await _has_index(session, tenant)
            strategy, plan = await explain_search(
                session, tenant_id=tenant.id, query=query, mode=mode, settings=settings
            )
            assert strategy == ("hnsw" if indexed else "exact_scan"), plan
    return await search_chunks(session, tenant_id=tenant.id, query=query, mode=mode, settings=settings)


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
async def test_question_finds_the_page_that_answers_it(shop, session, search_settings, mode):
    expected_pages = {"return": 1, "delivery": 2, "warranty": 3, "showroom": 4}
    for question, word in RELATED_QUESTIONS:
        hits = await search(session, search_settings, shop, question, mode)
        if search_settings.kb_exact_scan_max_chunks == 0:  # search() checked it used the index
            assert await _has_index(session, shop), "no HNSW index was built for the shop"
        assert hits, question
        assert hits[0].document == "faq.pdf"
        assert hits[0].page == expected_pages[word], (question, hits[0])
        assert word in hits[0].text.lower()
        assert hits[0].score > 0


async def _has_index(session, tenant) -> bool:
    name = hnsw_index_name(tenant.id)
    query = text("SELECT count(*) FROM pg_indexes WHERE indexname = :name")
    return bool((await session.exec(query, params={"name": name})).scalar_one())


@pytest.mark.parametrize("mode", MODES)
async def test_unrelated_question_returns_nothing(shop, session, search_settings, mode):
    for question in UNRELATED_QUESTIONS:
        assert await search(session, search_settings, shop, question, mode) == [], question


async def test_exact_mode_never_confuses_near_identical_part_numbers(
    shop, session, settings, make_tenant, ingest
):
    # One row per chunk would make this trivial: put B and C in the same document but far apart.
    tenant = await make_tenant()
    filler = " ".join(f"Filler sentence number {i} about coffee machines." for i in range(40))
    text = (
        f"Part FVAM-2050-C: chrome gasket, 6.40 EUR.\n\n{filler}\n\nPart FVAM-2050-B: black gasket, 4.90 EUR."
    )
    await ingest(tenant, "catalog.txt", text.encode())
    hits = await search(session, settings, tenant, "FVAM-2050-B", "exact")
    assert hits
    assert all("FVAM-2050-B" in hit.text for hit in hits)
    assert not any("FVAM-2050-C" in hit.text and "FVAM-2050-B" not in hit.text for hit in hits)
    sheet_hits = await search(session, settings, shop, "price of FVAM-2050-C?", "exact")
    assert [hit.sheet for hit in sheet_hits] == ["Parts"]
    assert "Part: FVAM-2050-C" in sheet_hits[0].text
    assert await search(session, settings, shop, "FVAM-2050-D", "exact") == []
    assert await search(session, settings, shop, "FVAM-2050", "exact") == []  # a prefix is not the code


async def test_hybrid_counts_exact_numbers(shop, session, settings):
    hits = await search(session, settings, shop, "9.90 EUR express", "hybrid")
    assert hits and hits[0].page == 2
    assert "9.90" in hits[0].text


@pytest.mark.parametrize("mode", MODES)
async def test_tenant_never_sees_another_tenants_chunks(make_tenant, ingest, session, search_settings, mode):
    tenant_a, tenant_b = await make_tenant(), await make_tenant()
    await ingest(tenant_a, "a.txt", b"Secret recipe of tenant A: the QX-9911 blend uses Ethiopian beans.")
    await ingest(tenant_b, "b.txt", b"Tenant B sells bicycles and repairs flat tyres.")
    query = "QX-9911 blend Ethiopian beans"
    assert [hit.document for hit in await search(session, search_settings, tenant_a, query, mode)] == [
        "a.txt"
    ]
    assert await search(session, search_settings, tenant_b, query, mode) == []


@pytest.mark.parametrize("mode", MODES)
async def test_deactivation_takes_effect_at_once_and_reactivation_restores(
    make_tenant, ingest, sessions, session, search_settings, mode
):
    tenant = await make_tenant()
    report = await ingest(tenant, "hours.docx", make_docx([OPENING_HOURS, "Showroom code SR-42."]))
    query = "Lisbon showroom SR-42"
    assert await search(session, search_settings, tenant, query, mode)
    await session.commit()
    async with sessions() as other, other.begin():
        await set_source_active(other, tenant_id=tenant.id, source_id=report.source_id, is_active=False)
    assert await search(session, search_settings, tenant, query, mode) == []
    await session.commit()
    async with sessions() as other, other.begin():
        await set_source_active(other, tenant_id=tenant.id, source_id=report.source_id, is_active=True)
    assert [hit.document for hit in await search(session, search_settings, tenant, query, mode)] == [
        "hours.docx"
    ]


async def test_csv_rows_are_searchable_with_their_headers(make_tenant, ingest, session, settings):
    tenant = await make_tenant()
    await ingest(
        tenant, "prices.csv", make_csv([["SKU", "Product", "Price"], ["AB-100", "Descaler", "7.50"]])
    )
    hits = await search(session, settings, tenant, "AB-100", "exact")
    assert [hit.text for hit in hits] == ["SKU: AB-100; Product: Descaler; Price: 7.50"]


async def test_csv_rows_are_their_own_chunks_and_exact_mode_returns_the_row_not_its_neighbour(
    make_tenant, ingest, session, settings
):
    tenant = await make_tenant()
    rows = [
        ["SKU", "Product", "Price"],
        ["FV-2050-B", "Black gasket", "4.90"],
        ["FV-2050-C", "Chrome gasket", "6.40"],
        ["FV-2051-C", "Chrome seal", "1.10"],
    ]
    report = await ingest(tenant, "stock.csv", make_csv(rows))
    assert report.status == "ready" and report.chunk_count == 3, report
    hits = await search(session, settings, tenant, "What does FV-2050-C cost?", "exact")
    assert [(hit.text, hit.attributes) for hit in hits] == [
        (
            "SKU: FV-2050-C; Product: Chrome gasket; Price: 6.40",
            {"row": 3, "keys": {"SKU": "FV-2050-C", "Product": "Chrome gasket"}},
        )
    ]
    hybrid = await search(session, settings, tenant, "price of FV-2050-C", "hybrid")
    assert hybrid[0].attributes["keys"]["SKU"] == "FV-2050-C"


def test_keywords_drop_stop_words_and_codes_are_detected():
    assert keywords("What is the price of FVAM-2050-B?") == ["price", "fvam-2050-b"]
    assert code_tokens("What is the price of FVAM-2050-B in 2024?") == ["fvam-2050-b", "2024"]
    assert code_tokens("opening hours") == []


@pytest.mark.parametrize("mode", ["vector", "hybrid", "neighborhood", "exact", "graph"])
@pytest.mark.parametrize("query", ["What is the returns policy?", "?"])
async def test_unknown_tenant_is_an_error_in_every_mode(session, settings, mode, query):
    # vector/hybrid read the tenant row in the statement that counts its chunks; a question without
    # words reads it on its own: either way an unknown tenant is an error, never an empty result
    missing = uuid.uuid4()
    with pytest.raises(TenantNotFound):
        await search_chunks(session, tenant_id=missing, query=query, mode=mode, settings=settings)
