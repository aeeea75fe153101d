"""The knowledge graph on a product catalogue it has no lexicon for: codes written several ways,
abbreviations defined in the text, glossaries, table rows that link their key columns, and the walk
from a question's names to every document on the path (through the real ingestion and search)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import text
from switchboard.knowledge import ingest_source, register_upload, search_chunks
from switchboard.knowledge.graph.explore import explore_entities
from switchboard.knowledge.graph.extract import extract_chunk, extract_document, question_names
from switchboard.knowledge.graph.schema import ChunkExtraction, entity_key
from switchboard.knowledge.retrieval import explain_search

from tests.utils.documents import make_csv
from tests.utils.tenants import new_tenant


def triples(extraction: ChunkExtraction) -> set[tuple[str, str, str]]:
    return {(r.subject, r.relation, r.object) for r in extraction.relations}


# --- names: one key for the spellings of a code or a term ------------------------------------------
_LETTERS = st.text(alphabet="ABCDEFGHJKLMNPRSTUVWXZ", min_size=1, max_size=4)
_DIGITS = st.integers(min_value=1, max_value=9999).map(str)


@given(letters=_LETTERS, digits=_DIGITS, separator=st.sampled_from(["", "-", " ", "  ", "_", ".", " - "]))
def test_a_code_written_with_or_without_hyphen_space_or_case_has_one_key(letters, digits, separator):
    written = f"{letters}{separator}{digits}"
    assert (
        entity_key(written) == entity_key(f"{letters}-{digits}") == entity_key(f"{letters.lower()}{digits}")
    )
    assert entity_key(f"{letters}-{digits}") in question_names(f"Is the {written} rated for steam?")


def test_term_keys_fold_hyphens_case_and_plurals_but_keep_ranges():
    assert entity_key("Cross-linked polyethylene") == entity_key("crosslinked Polyethylene")
    assert entity_key("mineral oils") == entity_key("Mineral oil")
    assert entity_key("brass") == "brass"  # -ss is not a plural
    assert entity_key("-20..200 °C", "range") == "-20..200 °c"


# --- aliases: abbreviations, parentheses, glossaries -----------------------------------------------
def test_an_abbreviation_defined_in_a_parenthesis_is_the_same_entity():
    extraction = extract_chunk(
        "## QPX (quaternary polyxylene, Quadrolon)\nHardness 64 Shore D. Maximum temperature 150 °C."
    )
    assert {
        ("QPX", "equivalent_of", "quaternary polyxylene"),
        ("QPX", "equivalent_of", "Quadrolon"),
    } <= triples(extraction)
    assert ("QPX", "rated_for", "..150 °C") in triples(extraction)
    assert ("QPX", "rated_for", "64 Shore D") in triples(extraction)
    long_first = extract_chunk("Seals in methyl ethyl ketone (MEK) swell within hours.")
    assert ("methyl ethyl ketone", "equivalent_of", "MEK") in triples(long_first)


def test_a_glossary_gives_aliases_from_for_means_and_are_sentences():
    extraction = extract_chunk(
        "# Glossary of media\nCustomers often write: MEK for methyl ethyl ketone (butanone); NaOCl or\n"
        "chlorine bleach for sodium hypochlorite. HFC means water-glycol hydraulic fluid. Cutting oil and\n"
        "machine oil are mineral oils."
    )
    found = triples(extraction)
    assert {
        ("MEK", "equivalent_of", "methyl ethyl ketone"),
        ("butanone", "equivalent_of", "methyl ethyl ketone"),
        ("NaOCl", "equivalent_of", "sodium hypochlorite"),
        ("HFC", "equivalent_of", "water-glycol hydraulic fluid"),
        ("Cutting oil", "equivalent_of", "mineral oils"),
        ("machine oil", "equivalent_of", "mineral oils"),
    } <= found


def test_an_alias_written_in_the_plural_names_the_entity_the_chunk_keeps():
    extraction = extract_chunk(
        "# Glossary\nOur tables say mineral oil.\nCutting oil and machine oil are mineral oils.\n\n"
        "## 6. Tables: one fact per row, clear headers"
    )
    assert triples(extraction) == {
        ("Cutting oil", "equivalent_of", "mineral oil"),
        ("machine oil", "equivalent_of", "mineral oil"),
    }


def test_prose_outside_a_glossary_makes_no_alias_of_is_sentences():
    extraction = extract_chunk("EPDM is almost universally resistant. PEEK is hard.")
    assert not any(r.relation == "equivalent_of" for r in extraction.relations)


# --- table rows and specifications -----------------------------------------------------------------
def test_a_row_links_its_key_columns_whatever_the_rating_word():
    limited = extract_chunk(
        "Sheath material: PUR; Medium: Water-glycol hydraulic fluid; Resistance: limited",
        {"keys": {"Sheath material": "PUR", "Medium": "Water-glycol hydraulic fluid"}},
    )
    assert triples(limited) == {("PUR", "compatible_with", "Water-glycol hydraulic fluid")}
    poor = extract_chunk(
        "Material: QPX; Medium: Sulfuric acid 98%; Rating: not resistant", {"keys": {"Material": "QPX"}}
    )
    assert triples(poor) == {("QPX", "incompatible_with", "sulfuric acid")}  # the concentration is not a name
    aliased = extract_chunk(
        "Sheath material: PUR; Medium: Hydrolysis (hot water); Resistance: good",
        {"keys": {"Sheath material": "PUR"}},
    )
    assert triples(aliased) == {
        ("PUR", "compatible_with", "Hydrolysis"),
        ("Hydrolysis", "equivalent_of", "hot water"),
    }
    part = extract_chunk(
        "Article: XR12-0715; Series: XR-12; Sheath: QPX",
        {"keys": {"Article": "XR12-0715", "Series": "XR-12"}},
    )
    assert triples(part) == {("XR12-0715", "belongs_to_family", "XR-12"), ("XR12-0715", "made_of", "QPX")}


def test_a_specification_names_the_parts_of_its_series_and_headings_switch_the_topic():
    [spec] = extract_document(
        [
            (
                "# ZETA XR 12: control cable\n\nTwo outer sheath options: QPX for oil, or PVC for general\nuse.",
                None,
            )
        ]
    )
    assert {("XR 12", "made_of", "QPX"), ("XR 12", "made_of", "PVC")} <= triples(spec)
    [sheet] = extract_document(
        [
            (
                "# Data sheet\n\n## QPX\nMaximum temperature 150 °C.\n\n## KLM (karl lambda monomer)\nMaximum temperature 90 °C.",
                None,
            )
        ]
    )
    assert {("QPX", "rated_for", "..150 °C"), ("KLM", "rated_for", "..90 °C")} <= triples(sheet)
    assert ("QPX", "rated_for", "..90 °C") not in triples(sheet)


# --- rules that hold for any catalogue: a saddlery's, with no word of it in a lexicon -------------
def test_a_glossary_entry_lists_the_other_names_of_its_term_but_a_legend_is_no_name():
    extraction = extract_chunk(
        "# Glossary: other names of leathers\n\n- Vegetable-tanned leather: veg-tan, bark-tanned leather.\n"
        "- Microfibre: synthetic suede, ultrasuede, 2-way suede.\n\nRating key: A excellent, B good, C limited."
    )
    found = triples(extraction)
    assert {
        ("veg-tan", "equivalent_of", "Vegetable-tanned leather"),
        ("bark-tanned leather", "equivalent_of", "Vegetable-tanned leather"),
        ("synthetic suede", "equivalent_of", "Microfibre"),
        ("ultrasuede", "equivalent_of", "Microfibre"),
        ("2-way suede", "equivalent_of", "Microfibre"),
    } <= found
    assert not any("Rating key" in (a, b) or "Glossary" in a for a, _, b in found)


def test_a_long_form_row_links_its_subject_and_the_other_name_by_its_verdict():
    def row(subject: str, other: str, status: str) -> set[tuple[str, str, str]]:
        text = f"Ingredient: {subject}; Claim or allergen: {other}; Status: {status}"
        return triples(extract_chunk(text, {"keys": {"Ingredient": subject}}))

    assert row("Lanolin", "Wool alcohols", "contains") == {("Lanolin", "made_of", "Wool alcohols")}
    assert row("Beeswax", "Vegan", "not suitable") == {("Beeswax", "incompatible_with", "Vegan")}
    assert row("Jojoba oil", "Vegan", "suitable") == {("Jojoba oil", "compatible_with", "Vegan")}
    assert row("Jojoba oil", "Nuts", "free") == {("Jojoba oil", "compatible_with", "Nuts")}
    [subject] = [
        e
        for e in extract_chunk(
            "Ingredient: Lanolin; Claim or allergen: Wool alcohols; Status: may contain",
            {"keys": {"Ingredient": "Lanolin"}},
        ).entities
        if e.name == "Lanolin"
    ]
    assert subject.kind == "material"  # what the table rates, not a product


def test_a_specification_lists_its_components_after_a_cue_a_colon_or_as_list_items():
    [spec] = extract_document(
        [
            (
                "# TR-9 touring saddle\n\nThe TR-9 is made from vegetable-tanned leather, a steel frame and\n"
                "copper rivets. Two padding options: memory foam for long rides, cheap and soft, or gel (suffix\n"
                "-G). Weight 450 g, limited by the rails.\n\nRail options:\n- chromoly (standard);\n"
                "- carbon fibre (suffix -C).",
                None,
            )
        ]
    )
    parts = {b for a, relation, b in triples(spec) if a == "TR-9" and relation == "made_of"}
    assert parts == {
        "vegetable-tanned leather",
        "steel frame",
        "copper rivets",
        "copper",  # the lexicon's word in "copper rivets", with "made from"
        "memory foam",
        "gel",
        "chromoly",
        "carbon fibre",
    }


def test_a_heading_names_what_its_section_is_about_and_a_class_noun_is_no_part_of_the_name():
    [sheet] = extract_document(
        [
            (
                "# Material data sheet: saddle leathers\n\n## Latigo leather (oil-tanned cowhide)\n"
                "Service temperature -20 to 60 °C.\n\n## Microfibre\nService temperature -30 to 80 °C.",
                None,
            )
        ]
    )
    assert {
        ("Latigo leather", "equivalent_of", "oil-tanned cowhide"),
        ("Latigo leather", "rated_for", "-20..60 °C"),
        ("Microfibre", "rated_for", "-30..80 °C"),
    } <= triples(sheet)
    [polymer] = extract_document([("# Data sheet: santoprene compound (TPV)\n\nHardness 64 Shore A.", None)])
    assert {
        ("santoprene compound", "equivalent_of", "TPV"),
        ("santoprene", "equivalent_of", "santoprene compound"),
        ("santoprene compound", "rated_for", "64 Shore A"),
    } <= triples(polymer)
    [rubber] = extract_document([("# Data sheet\n\n## Cork rubber (CR-K)\nHardness 60 Shore A.", None)])
    assert ("Cork", "equivalent_of", "Cork rubber") in triples(rubber)
    [guide] = extract_document([("# Guide: caring for leather\n\nClean it every month.", None)])
    assert guide.entities == []


def test_a_product_described_with_one_material_is_made_of_it():
    extraction = extract_chunk("TR-9 saddles are light, hand-stitched PVC saddles.")
    assert ("TR-9", "made_of", "PVC") in triples(extraction)
    classed = extract_chunk(
        "The KX-5 is a 6 mm cork rubber mat. The rubber is soft; synthetic rubber is not."
    )
    assert triples(classed) == {("KX-5", "made_of", "cork rubber"), ("KX-5", "rated_for", "6 mm")}
    assert {e.name for e in classed.entities if e.kind == "material"} == {"cork rubber"}


# --- rules that hold for any catalogue: a boatyard's, with no word of it in a lexicon -------------
def test_a_wide_table_rates_the_thing_each_column_header_names():
    def row(text: str, keys: dict[str, str]) -> set[tuple[str, str, str]]:
        return triples(extract_chunk(text, {"keys": keys}))

    assert row("Chemical: Glorine; KVN: A; TPX: X; Glassfibre: B", {"Chemical": "Glorine"}) == {
        ("KVN", "compatible_with", "Glorine"),
        ("TPX", "incompatible_with", "Glorine"),
        ("Glassfibre", "compatible_with", "Glorine"),
    }
    # one rating-like cell is no column of ratings; a header with a unit or a table word is no name
    assert row("Item code: KB7-20; Size: 2; Pack: 10", {"Item code": "KB7-20"}) == set()
    rated = row("Chemical: Glorine; Rating: A; Max temp °C: C; Grade: B", {"Chemical": "Glorine"})
    assert not any({"Rating", "Max temp °C", "Grade"} & {a, b} for a, _, b in rated)


def test_a_glossary_chain_of_equals_signs_names_one_thing():
    extraction = extract_chunk(
        "# Glossary: other names of cleaners\n\n- Glorine = chlorosol = GL-4 solution.\n"
        "- Hull wash = salt of tartar = HW-2."
    )
    pairs = {frozenset((a, b)) for a, relation, b in triples(extraction) if relation == "equivalent_of"}
    assert {
        frozenset(("Glorine", "chlorosol")),
        frozenset(("GL-4 solution", "chlorosol")),
        frozenset(("Hull wash", "salt of tartar")),
        frozenset(("HW-2", "salt of tartar")),
    } <= pairs
    assert not any("salt" in pair for pair in pairs)  # "of" does not cut a name of a chain


def test_a_label_with_a_material_names_what_the_part_is_made_of_and_an_inner_label_is_no_part():
    [spec] = extract_document(
        [
            (
                "# KB-7 series: TPX kayak\n\nHull and deck: KVN.\n"
                "Construction: hull: KVN, glossy, rigid; deck: TPX, matt.",
                None,
            )
        ]
    )
    parts = {b for a, relation, b in triples(spec) if a == "KB-7" and relation == "made_of"}
    assert {"KVN", "TPX"} <= parts
    assert not {"hull", "deck", "Hull and deck"} & parts


def test_a_row_names_a_known_thing_with_one_more_word_as_that_thing():
    extraction = extract_chunk(
        "Chemical: Acetone bath; KVN: A; TPX: X", {"keys": {"Chemical": "Acetone bath"}}
    )
    assert ("Acetone bath", "equivalent_of", "acetone") in triples(extraction)
    plain = extract_chunk("Chemical: Glorine bath; KVN: A; TPX: X", {"keys": {"Chemical": "Glorine bath"}})
    assert not any(relation == "equivalent_of" for _, relation, _ in triples(plain))


def test_a_listed_condition_with_a_quantity_or_an_action_is_no_component():
    [spec] = extract_document(
        [
            (
                "# KB-7 series\n\nCare: rinse up to 40 °C for 5 minutes, or polishing with a soft cloth.\n"
                "Fittings: KVN cleats, TPX handles.",
                None,
            )
        ]
    )
    parts = {b for a, relation, b in triples(spec) if a == "KB-7" and relation == "made_of"}
    assert parts == {"KVN cleats", "TPX handles", "KVN", "TPX"}


_PIECES = st.sampled_from(
    [
        "# Glossary\n",
        "## Latigo leather (veg-tan)\n",
        "# Data sheet: cork rubber\n",
        "\n",
        "- Microfibre: synthetic suede, 2-way suede, B good.\n",
        "Rail options:\n",
        "- chromoly (standard);\n",
        "Our tables say mineral oil. ",
        "Cutting oil and machine oil are mineral oils. ",
        "The TR-9 is made from cork rubber, a steel frame and PVC. ",
        "TR 9 saddles are PVC saddles. ",
        "Service temperature -20 to 60 °C. ",
        "Contains 45 % type 550 flour and the rubber. ",
    ]
)


@given(pieces=st.lists(_PIECES, max_size=30))
def test_any_arrangement_of_catalogue_text_extracts_without_error(pieces):
    """Whatever order a document puts headings, glossary entries, lists and names in, every relation
    names one of its chunk's entities (:class:`ChunkExtraction` validates it)."""
    text = "".join(pieces)
    for extraction in extract_document([(text, None)]):
        names = {e.name.lower() for e in extraction.entities}
        assert all(r.subject.lower() in names and r.object.lower() in names for r in extraction.relations)


# --- through ingestion and search ------------------------------------------------------------------
CATALOGUE = {
    "series-xr-12.md": "# XR-12 series: dosing valves\n\nXR-12 valves dose aggressive media. The body is PVDF;\n"
    "the seat is QPX. Operating temperature -10 to 140 °C.",
    "series-xr-13.md": "# XR-13 series: dosing valves\n\nXR-13 valves share the XR-12 body in PVDF with a KLM seat.\n"
    "Operating temperature -10 to 90 °C.",
    "datasheet-qpx.md": "# Data sheet: QPX (quaternary polyxylene)\n\nA hard seat polymer. Maximum continuous\n"
    "temperature as a seat: 160 °C.",
    "datasheet-klm.md": "# Data sheet: KLM (karl lambda monomer)\n\nA soft seat elastomer. Maximum continuous\n"
    "temperature as a seat: 95 °C.",
    "glossary.md": "# Glossary\n\nCustomers often write MEK for methyl ethyl ketone; DCM for dichloromethane.",
    "news-xr-12.md": "# News\n\nThe XR-12 won a design award for its quick-release handle.",
    "faq.md": "# FAQ\n\nOrders placed before 2 pm ship the same day.",
}
RESISTANCE = [
    ["Material", "Medium", "Rating"],
    ["QPX", "Methyl ethyl ketone", "A"],
    ["QPX", "Dichloromethane", "D"],
    ["KLM", "Methyl ethyl ketone", "D"],
    ["KLM", "Dichloromethane", "B"],
    ["PVDF", "Methyl ethyl ketone", "D"],
]


@pytest.fixture
async def catalogue(make_tenant, ingest):
    tenant = await make_tenant("Catalogue")
    files = {name: body.encode() for name, body in CATALOGUE.items()}
    files["resistance.csv"] = make_csv(RESISTANCE)
    for name, data in files.items():
        report = await ingest(tenant, name, data)
        assert report.status == "ready", (name, report.error)
    return tenant


def documents_of(hits) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    return [(hit.document, hit.text) for hit in hits]


QUESTION = "Can the XR12 seat take MEK at 150 °C?"
"""Names the series without its hyphen and the medium by the abbreviation only the glossary defines."""


def has_row(hits, material: str, medium: str) -> bool:  # type: ignore[no-untyped-def]
    return any(
        hit.document == "resistance.csv" and f"{material}; Medium: {medium}" in hit.text for hit in hits
    )


def on_path(hits) -> int:  # type: ignore[no-untyped-def]
    documents = {hit.document for hit in hits}
    named = sum(name in documents for name in ("series-xr-12.md", "datasheet-qpx.md", "glossary.md"))
    return named + has_row(hits, "QPX", "Methyl ethyl ketone")


async def test_graph_search_returns_every_document_on_the_path(catalogue, session, settings):
    hits = await search_chunks(
        session, tenant_id=catalogue.id, query=QUESTION, mode="graph", settings=settings
    )
    assert on_path(hits) == 4, documents_of(hits)
    # the near-identical series' seat and the document that only names the code come after the path
    row = next(i for i, hit in enumerate(hits) if has_row([hit], "QPX", "Methyl ethyl ketone"))
    assert not has_row(hits[:row], "KLM", "Methyl ethyl ketone")
    assert "news-xr-12.md" not in {hit.document for hit in hits}


async def test_hybrid_search_fuses_the_path_with_the_words_of_the_question(catalogue, session, settings):
    hits = await search_chunks(
        session, tenant_id=catalogue.id, query=QUESTION, mode="hybrid", settings=settings
    )
    assert {"series-xr-12.md", "datasheet-qpx.md"} <= {hit.document for hit in hits}, documents_of(hits)
    assert "news-xr-12.md" not in {hit.document for hit in hits}
    without_walk = await search_chunks(
        session, tenant_id=catalogue.id, query=QUESTION, mode="hybrid", settings=settings, use_graph=False
    )
    assert on_path(hits) > on_path(without_walk), (documents_of(hits), documents_of(without_walk))


async def test_an_indirect_question_reaches_the_data_sheet_of_the_part_it_means(catalogue, session, settings):
    hits = await search_chunks(
        session,
        tenant_id=catalogue.id,
        query="How hot can the seat of the XR 13 get?",
        mode="hybrid",
        settings=settings,
    )
    documents = [hit.document for hit in hits]
    assert {"series-xr-13.md", "datasheet-klm.md"} <= set(documents), documents_of(hits)


async def test_a_row_between_two_aliases_is_on_the_path_with_the_glossary_that_names_one(
    catalogue, session, settings
):
    """Material by its long name (the data sheet's parenthesis), medium by the glossary's abbreviation:
    the table writes neither. The row linking the two and the glossary line come before the rows of
    the other seat material and of the body material in the same medium."""
    question = "Does quaternary polyxylene resist DCM?"
    hits = await search_chunks(
        session, tenant_id=catalogue.id, query=question, mode="hybrid", settings=settings
    )
    assert has_row(hits, "QPX", "Dichloromethane"), documents_of(hits)
    assert "glossary.md" in {hit.document for hit in hits}, documents_of(hits)
    row = next(i for i, hit in enumerate(hits) if has_row([hit], "QPX", "Dichloromethane"))
    assert not has_row(hits[:row], "KLM", "Dichloromethane"), documents_of(hits)


async def test_the_walk_crosses_a_table_row_between_aliases_of_two_named_things(catalogue, session):
    """Named as "quaternary polyxylene" and "DCM", the row says "QPX" and "Dichloromethane": the walk
    crosses it, and not the row of the other seat material in the same medium."""
    explored = await explore_entities(
        session, tenant_id=catalogue.id, names=["quaternary polyxylene", "DCM"], hops=1
    )
    crossed = {(r["subject"], r["relation"], r["object"].lower(), r["document"]) for r in explored.relations}
    assert ("QPX", "incompatible_with", "dichloromethane", "resistance.csv") in crossed, crossed
    assert not any(subject == "KLM" for subject, *_ in crossed), crossed


async def test_one_entity_per_name_whatever_kind_each_document_read(catalogue, session):
    rows = (
        await session.exec(
            text(
                "SELECT norm_name, count(*) AS n FROM kg_entities WHERE tenant_id = :t AND kind <> 'range' "
                "GROUP BY norm_name HAVING count(*) > 1"
            ),
            params={"t": catalogue.id},
        )
    ).all()
    assert rows == []
    explored = await explore_entities(session, tenant_id=catalogue.id, names=["MEK"], hops=1)
    crossed = {(r["subject"], r["relation"], r["object"], r["document"]) for r in explored.relations}
    assert ("MEK", "equivalent_of", "methyl ethyl ketone", "glossary.md") in crossed
    # the alias is a free step: one hop from MEK reaches the table row of the material
    assert ("QPX", "compatible_with", "methyl ethyl ketone", "resistance.csv") in crossed


async def test_single_hop_and_exact_code_questions_still_find_their_chunk(catalogue, session, settings):
    faq = await search_chunks(
        session, tenant_id=catalogue.id, query="When do orders ship?", mode="hybrid", settings=settings
    )
    assert faq and faq[0].document == "faq.md"
    exact = await search_chunks(
        session, tenant_id=catalogue.id, query="XR-13", mode="exact", settings=settings
    )
    assert exact and all("XR-13" in hit.text for hit in exact)


async def test_the_walk_reads_by_entity_however_stale_the_statistics(scratch_database, settings):
    """A catalogue newer than the tables' statistics counts as next to no rows to the planner; the walk's
    lookups still go by entity: never the tenant's whole relations or mentions, never a merge over every
    entity of every tenant (another tenant's 20,000 entities and relations here)."""
    sessions = scratch_database.sessions
    big, fresh = await new_tenant(sessions, "Big"), await new_tenant(sessions, "Fresh catalogue")

    async def ingest(tenant, name: str, data: bytes) -> None:  # type: ignore[no-untyped-def]
        async with sessions() as session, session.begin():
            outcome = await register_upload(session, settings, tenant_id=tenant.id, filename=name, data=data)
        report = await ingest_source(
            sessions,
            settings,
            tenant_id=tenant.id,
            source_id=outcome.source.id,
            content_hash=outcome.source.content_hash,
        )
        assert report.status == "ready", (name, report.error)

    await ingest(big, "notes.txt", b"The XR-12 series is a ball valve.")
    async with sessions() as session, session.begin():
        params = {"tenant": big.id}
        await session.execute(
            text(
                "INSERT INTO kg_entities (tenant_id, kind, name, norm_name) "
                "SELECT :tenant, 'product', 'P-' || n, 'p' || n FROM generate_series(1, 20000) n"
            ),
            params,
        )
        await session.execute(
            text(
                "INSERT INTO kg_relations (tenant_id, subject_id, relation, object_id, chunk_id, source_id) "
                "SELECT :tenant, e.id, 'made_of', e.id, d.id, d.source_id FROM kg_entities e "
                "CROSS JOIN (SELECT id, source_id FROM knowledge_documents WHERE tenant_id = :tenant) d "
                "WHERE e.tenant_id = :tenant"
            ),
            params,
        )
    async with sessions() as session:  # the statistics of the tables before the fresh catalogue
        await session.execute(text("ANALYZE kg_entities, kg_relations, kg_mentions, knowledge_documents"))
        await session.commit()
    files = {name: body.encode() for name, body in CATALOGUE.items()}
    files["resistance.csv"] = make_csv(RESISTANCE)
    for name, data in files.items():
        await ingest(fresh, name, data)
    async with sessions() as session, session.begin():
        assert (
            on_path(
                await search_chunks(
                    session, tenant_id=fresh.id, query=QUESTION, mode="graph", settings=settings
                )
            )
            == 4
        )
        for mode in ("graph", "hybrid"):
            _, plan = await explain_search(
                session, tenant_id=fresh.id, query=QUESTION, mode=mode, settings=settings, analyze=True
            )
            for wrong in ("ix_kg_relations_tenant_id", "ix_kg_mentions_tenant_id", "Merge Join"):
                assert not any(wrong in line for line in plan), (mode, wrong, "\n".join(plan))


BOATYARD = {
    "series-kb-7.md": "# KB-7 series: touring kayak\n\nA touring kayak for lakes and coasts, 5.2 m long.\n"
    "Hull: KVN, glossy. Deck: TPX, matt.\n",
    "series-kb-8.md": "# KB-8 series: sea kayak\n\nA sea kayak, 5.6 m long. Hull: KVN, glossy. Deck: KVN.\n",
    "datasheet-kvn.md": "# Data sheet: KVN\n\nA tough, stiff laminate. Service temperature -30 to 70 °C. "
    "Density 1.1 g/cm³.",
    "datasheet-tpx.md": "# Data sheet: TPX\n\nA light, clear thermoplastic. Service temperature -10 to 90 °C. "
    "Density 0.8 g/cm³.",
    "news-kb-7.md": "# News: the KB-7 wins a design award\n\nJudges praised the KB-7 touring kayak for its "
    "lines and its tracking on open water.",
    "guide-glorine.md": "# Guide: cleaning with Glorine\n\nDilute Glorine one to ten in water, rinse "
    "after cleaning and store it away from sunlight. Glorine is sold in 5 l cans.",
    "faq.md": "# Frequently asked questions\n\nCan I rent a kayak? Yes, by the day or the week.",
}
BOATYARD_RESISTANCE = [
    ["Chemical", "KVN", "TPX", "ABX"],
    ["Glorine", "A", "X", "B"],
    ["Brine", "A", "A", "A"],
    ["Citrosol", "B", "A", "X"],
]


async def test_hybrid_search_reaches_the_data_sheets_of_the_things_between_a_series_and_a_chemical(
    make_tenant, ingest, session, settings
):
    tenant = await make_tenant("Boatyard")
    files = {name: body.encode() for name, body in BOATYARD.items()}
    files["resistance.csv"] = make_csv(BOATYARD_RESISTANCE)
    for name, data in files.items():
        report = await ingest(tenant, name, data)
        assert report.status == "ready", (name, report.error)
    hits = await search_chunks(
        session,
        tenant_id=tenant.id,
        query="Can the KB 7 be cleaned with Glorine?",
        mode="hybrid",
        settings=settings,
    )
    documents = [hit.document for hit in hits]
    assert {"series-kb-7.md", "datasheet-kvn.md", "datasheet-tpx.md"} <= set(documents), documents_of(hits)
    assert any(hit.document == "resistance.csv" and "Chemical: Glorine;" in hit.text for hit in hits)
    assert "series-kb-8.md" not in documents  # the other series of the same hull shares no path


async def test_hybrid_search_reaches_the_data_sheets_of_what_a_named_series_is_made_of(
    make_tenant, ingest, session, settings
):
    tenant = await make_tenant("Boatyard")
    for name, body in BOATYARD.items():
        report = await ingest(tenant, name, body.encode())
        assert report.status == "ready", (name, report.error)
    hits = await search_chunks(
        session,
        tenant_id=tenant.id,
        query="How stiff is the hull material of the KB 7?",
        mode="hybrid",
        settings=settings,
    )
    documents = [hit.document for hit in hits]
    assert {"series-kb-7.md", "datasheet-kvn.md"} <= set(documents), documents_of(hits)
