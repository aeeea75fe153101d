"""Graph retrieval: offline extraction, storage next to the chunks, the CTE walk, the
search modes on multi-hop questions, tenant isolation of the graph, exact SKUs, table rows as chunks,
and extraction by a provider model through the gateway (the offline model server as the provider)."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import event, text
from switchboard.db.rls import enter_tenant_role
from switchboard.knowledge import search_chunks
from switchboard.knowledge.graph.explore import explore_entities
from switchboard.knowledge.graph.extract import extract_chunk, extract_document, question_names
from switchboard.knowledge.graph.schema import ChunkExtraction, DocumentExtraction
from switchboard.standins.offline_server import ScriptedResponse

from tests.utils.agent import deployment, unique_model
from tests.utils.documents import make_csv, make_xlsx
from tests.utils.graph_corpus import documents, material_sheet, questions, series_spec
from tests.utils.model_fixtures import gateway, offline_model

__all__ = ["gateway", "offline_model"]

PTFE_QUESTION = "Is a PTFE seat compatible with a chlorine-based fluid at 180 °C?"
PTFE_SUPPORT = (
    ("chemical-compatibility.csv", "Material: PTFE; Fluid: chlorine;"),
    ("ptfe-properties.txt", "Maximum continuous service temperature: 260 °C"),
    ("v200-series.txt", "PTFE seats"),
)


def triples(extraction: ChunkExtraction) -> set[tuple[str, str, str]]:
    return {(r.subject, r.relation, r.object) for r in extraction.relations}


def supported(hits, support) -> int:  # type: ignore[no-untyped-def]
    return sum(any(h.document == name and marker in h.text for h in hits) for name, marker in support)


# --- offline extraction ----------------------------------------------------------------------------
def test_series_spec_gives_its_seat_material_range_and_standard():
    extraction = extract_chunk(series_spec("V200"))
    kinds = {(e.kind, e.name) for e in extraction.entities}
    assert {("family", "V200"), ("material", "PTFE"), ("material", "stainless steel 316")} <= kinds
    assert ("standard", "EN 1092-1") in kinds
    assert {
        ("V200", "made_of", "PTFE"),
        ("V200", "made_of", "stainless steel 316"),
        ("V200", "rated_for", "-20..200 °C"),
        ("V200", "rated_for", "..16 bar"),
    } <= triples(extraction)
    sized = next(e for e in extraction.entities if e.name == "-20..200 °C")
    assert (sized.low, sized.high, sized.unit) == (-20, 200, "°C")


def test_a_sentence_without_its_subject_uses_the_documents_topic():
    [sheet] = extract_document([(material_sheet("PTFE"), None)])
    assert {("PTFE", "rated_for", "..260 °C"), ("PTFE", "rated_for", "-200.. °C")} == triples(sheet)


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("EPDM seals are not resistant to chlorine.", ("EPDM", "incompatible_with", "chlorine")),
        ("Viton is resistant to sulphuric acid.", ("FKM", "compatible_with", "sulfuric acid")),
        ("Part QX-2040-B replaces QX-1040-A.", ("QX-2040-B", "replaces", "QX-1040-A")),
        ("QX-1040-A was replaced by QX-2040-B.", ("QX-2040-B", "replaces", "QX-1040-A")),
        ("Teflon is equivalent to PTFE.", None),  # one material under two names: nothing to relate
        ("Part AB-100-C is equivalent to AB-100-D.", ("AB-100-C", "equivalent_of", "AB-100-D")),
        ("Valve FV-2050 of the M500 series.", ("FV-2050", "belongs_to_family", "M500")),
    ],
)
def test_prose_relations(sentence, expected):
    found = triples(extract_chunk(sentence))
    assert found == (set() if expected is None else {expected})


def test_table_rows_long_form_matrix_replacements_and_units_from_headers():
    long_form = extract_chunk("Material: EPDM; Fluid: chlorine; Rating: D", {"keys": {"Material": "EPDM"}})
    assert triples(long_form) == {("EPDM", "incompatible_with", "chlorine")}
    matrix = extract_chunk(
        "Material: FKM; Chlorine: A; Ammonia: not recommended; Steam: ✓", {"keys": {"Material": "FKM"}}
    )
    assert triples(matrix) == {
        ("FKM", "compatible_with", "chlorine"),
        ("FKM", "incompatible_with", "ammonia"),
        ("FKM", "compatible_with", "steam"),
    }
    part = extract_chunk(
        "SKU: V200-025; Series: V200; Seat material: PTFE; Max temp (°C): 200; Replaces: V100-025",
        {"keys": {"SKU": "V200-025"}},
    )
    assert triples(part) == {
        ("V200-025", "belongs_to_family", "V200"),
        ("V200-025", "made_of", "PTFE"),
        ("V200-025", "rated_for", "..200 °C"),
        ("V200-025", "replaces", "V100-025"),
    }


def test_a_code_named_as_a_family_elsewhere_in_the_document_is_that_family():
    first, second = extract_document(
        [("The K400 series has FKM seats.", None), ("Order a K400 today.", None)]
    )
    assert [(e.kind, e.name) for e in second.entities] == [("family", "K400")]
    assert ("K400", "made_of", "FKM") in triples(first)


def test_question_names_cover_lexicon_spellings_and_codes():
    names = question_names("Can a Teflon seat on V200-025 take chlorine-based fluids?")
    assert {"ptfe", "teflon", "v200-025", "chlorine"} <= set(names)


def test_the_strict_schema_refuses_what_a_model_might_invent():
    good = {
        "entities": [{"name": "PTFE", "kind": "material"}, {"name": "chlorine", "kind": "fluid"}],
        "relations": [{"subject": "PTFE", "relation": "compatible_with", "object": "chlorine"}],
    }
    assert DocumentExtraction.model_validate({"chunks": [good]}).chunks[0].relations[0].object == "chlorine"
    bad_relation = {**good, "relations": [{"subject": "PTFE", "relation": "loves", "object": "chlorine"}]}
    dangling = {**good, "relations": [{"subject": "PTFE", "relation": "compatible_with", "object": "ozone"}]}
    extra = {**good, "note": "x"}
    range_without_unit = {"entities": [{"name": "0..10", "kind": "range", "low": 0, "high": 10}]}
    for invalid in (bad_relation, dangling, extra, range_without_unit):
        with pytest.raises(ValueError):
            DocumentExtraction.model_validate({"chunks": [invalid]})


# --- storage, the walk and the modes --------------------------------------------------------------
_VALVES: dict[str, object] = {}


@pytest.fixture
async def valves(make_tenant, ingest, settings):
    """A tenant with the whole valve corpus ingested through the real pipeline, once per test database
    (the tests only read it). Ingesting it again for every test put hundreds of identical vectors of
    other tenants into the shared HNSW index, after which the forced-HNSW retrieval tests found nothing
    for their tenant (likely: an HNSW graph loses connectivity with many exact duplicates)."""
    key = str(settings.database_url)
    if key not in _VALVES:
        tenant = await make_tenant("Valves")
        for name, data in documents().items():
            report = await ingest(tenant, name, data)
            assert report.status == "ready", (name, report.error)
        _VALVES[key] = tenant
    return _VALVES[key]


async def test_ingestion_stores_the_graph_next_to_the_chunks(valves, session, sessions):
    counts = (
        await session.exec(
            text(
                "SELECT (SELECT count(*) FROM kg_entities WHERE tenant_id = :t), "
                "(SELECT count(*) FROM kg_relations WHERE tenant_id = :t), "
                "(SELECT details->'graph' FROM knowledge_sources WHERE tenant_id = :t AND filename = 'v200-series.txt')"
            ),
            params={"t": valves.id},
        )
    ).one()
    entities, relations, v200 = counts
    assert entities > 40 and relations > 60
    assert v200["extractor"] == "deterministic" and v200["relations"] == 4
    row = (
        await session.exec(
            text(
                "SELECT d.text FROM kg_relations r JOIN kg_entities s ON s.id = r.subject_id "
                "JOIN kg_entities o ON o.id = r.object_id JOIN knowledge_documents d ON d.id = r.chunk_id "
                "WHERE r.tenant_id = :t AND s.norm_name = 'ptfe' AND o.norm_name = 'chlorine'"
            ),
            params={"t": valves.id},
        )
    ).one()
    assert row.text == "Material: PTFE; Fluid: chlorine; Rating: A"


async def test_the_cte_walk_follows_relations_hop_by_hop(valves, session):
    one = await explore_entities(session, tenant_id=valves.id, names=["V200"], hops=1)
    assert one.entities == [{"name": "V200", "kind": "family"}]
    crossed = {(r["subject"], r["relation"], r["object"]) for r in one.relations}
    assert ("V200", "made_of", "PTFE") in crossed and ("V200-025", "belongs_to_family", "V200") in crossed
    assert not any(r["relation"] == "compatible_with" for r in one.relations)  # two hops away
    two = await explore_entities(session, tenant_id=valves.id, names=["V200"], hops=2)
    crossed2 = {(r["subject"], r["relation"], r["object"]) for r in two.relations}
    assert ("PTFE", "compatible_with", "chlorine") in crossed2 and (
        "PTFE",
        "rated_for",
        "..260 °C",
    ) in crossed2
    zero = await explore_entities(session, tenant_id=valves.id, names=["teflon"], hops=0)
    assert zero.entities == [{"name": "PTFE", "kind": "material"}] and zero.relations == []
    assert zero.chunks and all("PTFE" in chunk["text"] for chunk in zero.chunks)


@pytest.mark.parametrize("mode", ["graph", "hybrid"])
async def test_the_ptfe_chlorine_180_question_gets_all_three_documents(valves, session, settings, mode):
    hits = await search_chunks(
        session, tenant_id=valves.id, query=PTFE_QUESTION, mode=mode, settings=settings
    )
    assert supported(hits, PTFE_SUPPORT) == 3, [(h.document, h.text[:40]) for h in hits]
    if mode == "graph":
        assert hits[0].score == 1.0


async def test_multi_hop_recall_at_5_per_mode(valves, session, settings):
    multi = [q for q in questions() if q.kind == "multi_hop"]
    recall = {}
    for mode in ("vector", "hybrid", "graph", "neighborhood"):
        found = 0
        for question in multi:
            hits = await search_chunks(
                session, tenant_id=valves.id, query=question.text, mode=mode, settings=settings
            )
            found += supported(hits, question.support)
        recall[mode] = found / sum(len(q.support) for q in multi)
    assert recall["graph"] == 1.0 and recall["hybrid"] >= 0.95, recall
    assert recall["neighborhood"] > recall["vector"], recall
    today = 0
    for question in multi:  # hybrid without the walk (KB_HYBRID_GRAPH=false)
        hits = await search_chunks(
            session,
            tenant_id=valves.id,
            query=question.text,
            mode="hybrid",
            settings=settings,
            use_graph=False,
        )
        today += supported(hits, question.support)
    assert today / sum(len(q.support) for q in multi) < 0.7


async def test_single_hop_questions_are_not_worse_in_hybrid(valves, session, settings):
    single = [q for q in questions() if q.kind == "single_hop"]
    for question in single:
        before = await search_chunks(
            session,
            tenant_id=valves.id,
            query=question.text,
            mode="hybrid",
            settings=settings,
            use_graph=False,
        )
        now = await search_chunks(session, tenant_id=valves.id, query=question.text, settings=settings)
        assert supported(now, question.support) >= supported(before, question.support) == 1, question.text


async def test_neighborhood_starts_at_the_closest_chunk_and_walks_one_hop(valves, session, settings):
    hits = await search_chunks(
        session,
        tenant_id=valves.id,
        query="V200 series ball valves",
        mode="neighborhood",
        limit=12,
        settings=settings,
    )
    assert hits[0].document == "v200-series.txt" and hits[0].score == 1.0
    # one relation from what the spec names (V200, PTFE, stainless steel 316, EN 1092-1)
    assert (
        supported(
            hits[1:],
            [
                ("ptfe-properties.txt", "Maximum"),
                ("parts.csv", "V200-"),
                ("chemical-compatibility.csv", "Material: PTFE;"),
            ],
        )
        == 3
    )
    assert all(
        any(name in h.text for name in ("V200", "PTFE", "stainless steel 316", "EN 1092-1")) for h in hits
    )
    assert not any(h.text.startswith("Material: EPDM") for h in hits)  # two hops (PTFE - chlorine - EPDM)


async def test_neighborhood_is_one_search_statement_and_never_repeats_its_closest_chunk(
    valves, session, settings, engine
):
    statements: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
        statements.append(statement)

    event.listen(engine.sync_engine, "before_cursor_execute", record)
    try:
        hits = await search_chunks(
            session,
            tenant_id=valves.id,
            query="V200 series ball valves",
            mode="neighborhood",
            limit=12,
            settings=settings,
        )
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", record)
    # the prepare round trip (chunk count, tenant row, SET LOCAL options), then one statement: the
    # closest chunk and the one-hop walk from it (it was two, with a Python step between them),
    # which also puts the transaction's plan_cache_mode back (it was a third round trip)
    assert len(statements) == 2 and "closest AS MATERIALIZED" in statements[1], statements
    assert "set_config('plan_cache_mode', $" in statements[1], statements
    ids = [hit.chunk_id for hit in hits]
    assert len(ids) > 3 and len(set(ids)) == len(ids)
    assert [h.score for h in hits[1:]] == sorted((h.score for h in hits[1:]), reverse=True)
    for limit in (1, 2):
        fewer = await search_chunks(
            session,
            tenant_id=valves.id,
            query="V200 series ball valves",
            mode="neighborhood",
            limit=limit,
            settings=settings,
        )
        assert [hit.chunk_id for hit in fewer] == ids[:limit]


async def test_graph_mode_returns_nothing_for_a_question_naming_no_entity(valves, session, settings):
    assert (
        await search_chunks(
            session,
            tenant_id=valves.id,
            query="How long does delivery take?",
            mode="graph",
            settings=settings,
        )
        == []
    )


# --- tenant isolation -----------------------------------------------------------------------------
async def test_another_tenants_entities_are_never_walked_or_returned(
    valves, make_tenant, ingest, session, settings
):
    other = await make_tenant("Other")
    secret = "Material: PTFE; Fluid: ozone; Rating: D; Note: OTHER-TENANT-ONLY"
    await ingest(
        other,
        "other.csv",
        make_csv(
            [
                ["Material", "Fluid", "Rating", "Note"],
                ["PTFE", "ozone", "D", "OTHER-TENANT-ONLY"],
                ["Z900", "chlorine", "A", "OTHER-TENANT-ONLY"],
            ]
        ),
    )
    own_chunks = set(
        (
            await session.exec(
                text("SELECT id FROM knowledge_documents WHERE tenant_id = :t"), params={"t": valves.id}
            )
        )
        .scalars()
        .all()
    )
    for mode in ("graph", "hybrid", "neighborhood", "vector", "exact"):
        for query in (PTFE_QUESTION, "Is PTFE compatible with ozone?", "Z900 chlorine", "OTHER-TENANT-ONLY"):
            hits = await search_chunks(
                session, tenant_id=valves.id, query=query, mode=mode, settings=settings
            )
            assert {h.chunk_id for h in hits} <= own_chunks, (mode, query)
            assert all(secret not in h.text and "OTHER-TENANT-ONLY" not in h.text for h in hits)
    explored = await explore_entities(session, tenant_id=valves.id, names=["Z900", "PTFE"], hops=2)
    assert [e["name"] for e in explored.entities] == ["PTFE"]
    assert all(r["document"] != "other.csv" for r in explored.relations)
    theirs = await explore_entities(session, tenant_id=other.id, names=["V200"], hops=2)
    assert theirs.entities == [] and theirs.chunks == []


async def test_the_tool_role_sees_only_its_tenants_graph_rows(valves, make_tenant, ingest, sessions):
    other = await make_tenant("Other")
    await ingest(other, "other.csv", make_csv([["Material", "Fluid", "Rating"], ["PTFE", "ozone", "D"]]))
    async with sessions() as session, session.begin():
        await enter_tenant_role(session, other.id)
        for table in ("kg_entities", "kg_mentions", "kg_relations"):
            tenants = (await session.exec(text(f"SELECT DISTINCT tenant_id FROM {table}"))).scalars().all()
            assert tenants == [other.id], table


# --- exact SKUs and table rows --------------------------------------------------------------------
async def test_exact_mode_returns_that_part_row_only(valves, session, settings):
    hits = await search_chunks(
        session, tenant_id=valves.id, query="V200-025", mode="exact", settings=settings
    )
    assert sorted(h.text for h in hits) == [  # its row, and the row saying it replaces V100-025
        "Old part: V100-025; Replaced by: V200-025; Note: same face-to-face",
        "Part number: V200-025; Series: V200; Size: DN25; Price EUR: 65.00",
    ]
    row = next(h for h in hits if h.document == "parts.csv")
    assert row.attributes == {"row": 3, "keys": {"Part number": "V200-025", "Series": "V200"}}
    replaced = await search_chunks(
        session, tenant_id=valves.id, query="V100-025", mode="exact", settings=settings
    )
    assert [h.document for h in replaced] == ["replacements.csv"]
    assert (
        await search_chunks(session, tenant_id=valves.id, query="V200-026", mode="exact", settings=settings)
        == []
    )


@pytest.mark.parametrize("filename", ["prices.csv", "prices.xlsx"])
async def test_a_small_table_with_two_skus_gives_one_chunk_per_row(
    make_tenant, ingest, session, settings, filename
):
    tenant = await make_tenant()
    rows = [
        ["SKU", "Product", "Price EUR"],
        ["FVAM-2050-B", "Steam wand gasket, black", "4.90"],
        ["FVAM-2050-C", "Steam wand gasket, chrome", "6.40"],
    ]
    data = make_csv(rows) if filename.endswith(".csv") else make_xlsx({"Prices": rows})
    report = await ingest(tenant, filename, data)
    assert report.status == "ready" and report.chunk_count == 2
    for sku, price in (("FVAM-2050-B", "4.90"), ("FVAM-2050-C", "6.40")):
        hits = await search_chunks(session, tenant_id=tenant.id, query=sku, mode="exact", settings=settings)
        assert len(hits) == 1 and sku in hits[0].text and price in hits[0].text
        assert hits[0].attributes["keys"]["SKU"] == sku
        other = "FVAM-2050-C" if sku.endswith("B") else "FVAM-2050-B"
        assert other not in hits[0].text


# --- extraction by a provider model ---------------------------------------------------------------
async def test_a_provider_model_extracts_through_the_gateway_and_is_validated(
    make_tenant, ingest, sessions, settings, gateway, offline_model, session
):
    from switchboard.knowledge import ingest_source, register_upload

    state, url = offline_model
    model = unique_model("extract")
    tenant = await make_tenant(
        "LLM", llm={"deployments": [deployment(url, model, provider="openai_compatible")], "num_retries": 0}
    )
    answer = {
        "chunks": [
            {
                "entities": [{"name": "Zorbex", "kind": "material"}, {"name": "brine", "kind": "fluid"}],
                "relations": [{"subject": "Zorbex", "relation": "compatible_with", "object": "brine"}],
            }
        ]
    }
    state.script(model).push(
        ScriptedResponse(content="```json\n" + json.dumps(answer) + "\n```"),
        ScriptedResponse(
            content='{"chunks": [{"entities": [], "relations": [{"subject": "a", "relation": "loves", "object": "b"}]}]}'
        ),
    )

    async def upload(name: str, body: bytes):  # type: ignore[no-untyped-def]
        async with sessions() as s, s.begin():
            outcome = await register_upload(s, settings, tenant_id=tenant.id, filename=name, data=body)
        return await ingest_source(
            sessions,
            settings,
            tenant_id=tenant.id,
            source_id=outcome.source.id,
            content_hash=outcome.source.content_hash,
            gateway=gateway,
        )

    first = await upload("zorbex.txt", b"Zorbex linings handle brine well.")
    assert first.details["graph"] == {"extractor": "llm", "entities": 2, "mentions": 2, "relations": 1}
    assert "Zorbex" in state.script(model).requests[0]["messages"][1]["content"]
    explored = await explore_entities(session, tenant_id=tenant.id, names=["zorbex"], hops=1)
    assert [(r["subject"], r["relation"], r["object"]) for r in explored.relations] == [
        ("Zorbex", "compatible_with", "brine")
    ]
    # an answer out of schema is not stored: the deterministic extractor reads the chunk instead
    second = await upload("epdm.txt", b"EPDM is not resistant to chlorine.")
    assert second.details["graph"]["extractor"] == "llm+deterministic"
    assert second.details["graph"]["relations"] == 1
    explored = await explore_entities(session, tenant_id=tenant.id, names=["EPDM"], hops=1)
    assert [(r["subject"], r["relation"], r["object"]) for r in explored.relations] == [
        ("EPDM", "incompatible_with", "chlorine")
    ]


def test_the_extraction_schema_and_the_tables_name_the_same_kinds_and_relations():
    from typing import get_args

    from switchboard.db.models import ENTITY_KINDS, RELATION_TYPES
    from switchboard.knowledge.graph.schema import EntityKind, RelationType

    assert get_args(EntityKind) == ENTITY_KINDS and get_args(RelationType) == RELATION_TYPES


def test_the_lexicon_pattern_matches_as_the_longest_first_alternation():
    import random
    import re

    from switchboard.knowledge.graph import extract

    flat = re.compile(
        r"(?<![\w-])("
        + "|".join(re.escape(k) for k in sorted(extract._LEXICON, key=len, reverse=True))
        + r")(?![\w])",
        re.IGNORECASE,
    )
    assert [
        m.group(1) for m in extract._LEXICON_RE.finditer("Stainless steel 316Lx, AISI 316L; ptfe-lined")
    ] == [
        "Stainless steel",
        "AISI 316L",
        "ptfe",  # 316Lx is no word: the shorter names that fit win
    ]
    rng = random.Random(3)
    keys = list(extract._LEXICON)
    pieces = keys + [k.upper() for k in keys] + [k.title() for k in keys] + ["x", "-", "_", "316", "airs"]
    for _ in range(2000):
        text = "".join(rng.choice(pieces) + rng.choice(["", " ", "-", ".", "\n"]) for _ in range(12))
        assert [m.span() for m in extract._LEXICON_RE.finditer(text)] == [
            m.span() for m in flat.finditer(text)
        ]
