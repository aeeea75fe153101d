"""Store a document's extractions next to its chunks: entities (upserted), mentions and relations.

Runs inside the ingestion transaction that inserts the chunks, so a document's graph appears and
disappears with its chunks (mentions and relations cascade from ``knowledge_documents``). Entities
are per tenant and shared by documents: ``PTFE`` read from the property sheet and from the
compatibility table is one row. Entities left without any mention (their documents replaced or
deleted) are removed by :func:`prune_orphans`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import text
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.knowledge.graph.schema import ChunkExtraction, ExtractedEntity, normalize_name

__all__ = ["GraphCounts", "store_graph", "prune_orphans"]

# one statement per table and document, the rows as arrays (``unnest``) on the session's asyncpg
# connection: SQLAlchemy compiled a new multi-VALUES statement for every document (about a tenth
# of a document's ingestion, loadtests/kb_profile.py); prepared once per connection now, any row count
_UPSERT_ENTITIES = """
INSERT INTO kg_entities (tenant_id, kind, name, norm_name, attributes)
SELECT $1, u.kind, u.name, u.norm_name, u.attributes::jsonb
FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]) AS u(kind, name, norm_name, attributes)
ON CONFLICT (tenant_id, kind, norm_name) DO UPDATE SET name = kg_entities.name
RETURNING id, kind, norm_name
"""
"""Keeps the first spelling; the no-op update makes ``RETURNING`` see an existing row."""
_INSERT_MENTIONS = """
INSERT INTO kg_mentions (entity_id, chunk_id, tenant_id, source_id)
SELECT u.entity_id, u.chunk_id, $1, $2 FROM unnest($3::bigint[], $4::bigint[]) AS u(entity_id, chunk_id)
ON CONFLICT DO NOTHING
"""
_INSERT_RELATIONS = """
INSERT INTO kg_relations (tenant_id, source_id, subject_id, relation, object_id, chunk_id)
SELECT $1, $2, u.subject_id, u.relation, u.object_id, u.chunk_id
FROM unnest($3::bigint[], $4::text[], $5::bigint[], $6::bigint[]) AS u(subject_id, relation, object_id, chunk_id)
"""


_KIND_ORDER = ("family", "product", "fluid", "material", "standard", "range")
"""Which kind a name takes when documents read it as several (the first of these). A fluid before a
material: an unknown term in capitals is read as a material unless a table or a glossary says it is a
medium (``MEK``)."""


def _identity(entity: ExtractedEntity) -> tuple[str, str]:
    """``("range", key)`` for a range, ``("", key)`` for any other name (one key space)."""
    kind, norm = entity.key
    return ("range", norm) if kind == "range" else ("", norm)


@dataclass(frozen=True)
class GraphCounts:
    entities: int
    """Distinct entities of the document."""
    mentions: int
    relations: int


def _attributes(entity: ExtractedEntity) -> dict[str, object]:
    if entity.kind != "range":
        return {}
    return {"low": entity.low, "high": entity.high, "unit": entity.unit}


async def store_graph(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    source_id: uuid.UUID,
    chunk_ids: Sequence[int],
    extractions: Sequence[ChunkExtraction],
) -> GraphCounts:
    """Upsert the entities of ``extractions`` and insert their mentions and relations.

    Args:
        session: the ingestion transaction (the chunks ``chunk_ids`` are flushed in it).
        tenant_id: owner of the document (every row carries it).
        source_id: the document.
        chunk_ids: ``knowledge_documents.id`` of each chunk, in the order of ``extractions``.
        extractions: validated extractions, one per chunk.

    Returns:
        Counts of what was stored.

    Raises:
        ValueError: ``chunk_ids`` and ``extractions`` differ in length.
    """
    if len(chunk_ids) != len(extractions):
        raise ValueError(f"{len(chunk_ids)} chunk ids for {len(extractions)} extractions")
    # one node per name: a name other than a range is one entity whatever kind each document read it
    # as (``CF8M`` a product in its own data sheet, a material where a valve's body is made of it); the
    # kind is the one the tenant's graph already has, else the most specific one read here
    entities: dict[tuple[str, str], ExtractedEntity] = {}
    for extraction in extractions:
        for entity in extraction.entities:
            identity = _identity(entity)
            known = entities.get(identity)
            if known is None or _KIND_ORDER.index(entity.kind) < _KIND_ORDER.index(known.kind):
                entities[identity] = entity
    if not entities:
        return GraphCounts(0, 0, 0)
    names = [norm for kind, norm in entities if kind != "range"]
    existing: dict[str, str] = {}
    if names:
        for kind, norm in (
            await session.exec(
                text(
                    "SELECT kind, norm_name FROM kg_entities WHERE tenant_id = :tenant_id AND kind <> 'range' "
                    "AND norm_name = ANY(:names)"
                ),
                params={"tenant_id": tenant_id, "names": names},
            )
        ).all():
            if norm not in existing or _KIND_ORDER.index(kind) < _KIND_ORDER.index(existing[norm]):
                existing[norm] = kind

    def key_of(entity: ExtractedEntity) -> tuple[str, str]:
        identity = _identity(entity)
        if identity[0] == "range":
            return identity
        return existing.get(identity[1], entities[identity].kind), identity[1]

    rows: dict[tuple[str, str], tuple[str, str, str, str]] = {}
    for entity in entities.values():
        kind, norm = key_of(entity)
        rows.setdefault((kind, norm), (kind, entity.name[:255], norm[:255], json.dumps(_attributes(entity))))
    raw = (await (await session.connection()).get_raw_connection()).driver_connection
    # in key order: two documents of a tenant stored at once (the worker runs several ingestions)
    # lock the entity rows they share in the same order, so their upserts cannot deadlock
    values = [rows[key] for key in sorted(rows)]
    ids: dict[tuple[str, str], int] = {}
    for record in await raw.fetch(
        _UPSERT_ENTITIES,
        tenant_id,
        [v[0] for v in values],
        [v[1] for v in values],
        [v[2] for v in values],
        [v[3] for v in values],
    ):
        ids[(record["kind"], record["norm_name"])] = record["id"]
    mentions: dict[tuple[int, int], None] = {}
    relations: dict[tuple[int, str, int, int], None] = {}
    for chunk_id, extraction in zip(chunk_ids, extractions, strict=True):
        by_name: dict[str, int] = {}
        for entity in extraction.entities:
            entity_id = ids[key_of(entity)]
            by_name.setdefault(normalize_name(entity.name), entity_id)
            mentions[(entity_id, chunk_id)] = None
        for relation in extraction.relations:
            subject, obj = by_name[normalize_name(relation.subject)], by_name[normalize_name(relation.object)]
            if subject == obj:
                continue
            relations[(subject, relation.relation, obj, chunk_id)] = None
    if mentions:
        await raw.execute(
            _INSERT_MENTIONS, tenant_id, source_id, [e for e, _ in mentions], [c for _, c in mentions]
        )
    if relations:
        await raw.execute(
            _INSERT_RELATIONS,
            tenant_id,
            source_id,
            [r[0] for r in relations],
            [r[1] for r in relations],
            [r[2] for r in relations],
            [r[3] for r in relations],
        )
    return GraphCounts(len(rows), len(mentions), len(relations))


async def prune_orphans(
    session: AsyncSession, *, tenant_id: uuid.UUID, among: Sequence[int] | None = None
) -> int:
    """Delete the tenant's entities that no chunk mentions any more; returns how many.

    Args:
        among: only these entity ids (those a replaced document mentioned: nothing else can have
            lost its last mention); ``None`` checks every entity of the tenant.
    """
    if among is not None and not among:
        return 0
    only = "" if among is None else "AND e.id = ANY(CAST(:among AS bigint[])) "
    result = await session.exec(
        text(
            "DELETE FROM kg_entities e WHERE e.tenant_id = :tenant_id "
            + only
            + "AND NOT EXISTS (SELECT FROM kg_mentions m WHERE m.entity_id = e.id)"
        ),
        params={"tenant_id": tenant_id, **({} if among is None else {"among": list(among)})},
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]
