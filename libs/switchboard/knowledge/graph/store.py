"""Store a document's extractions next to its chunks: entities (upserted), mentions and relations.

Runs inside the ingestion transaction that inserts the chunks, so a document's graph appears and
disappears with its chunks (mentions and relations cascade from ``knowledge_documents``). Entities
are per tenant and shared by documents: ``PTFE`` read from the property sheet and from the
compatibility table is one row. Entities left without any mention (their documents replaced or
deleted) are removed by :func:`prune_orphans`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import KgEntity, KgMention, KgRelation
from switchboard.knowledge.graph.schema import ChunkExtraction, ExtractedEntity, normalize_name

__all__ = ["GraphCounts", "store_graph", "prune_orphans"]

_BATCH = 1000
"""Rows per multi-VALUES statement (asyncpg takes at most 32,767 parameters per statement)."""


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
    entities: dict[tuple[str, str], ExtractedEntity] = {}
    for extraction in extractions:
        for entity in extraction.entities:
            entities.setdefault(entity.key, entity)
    if not entities:
        return GraphCounts(0, 0, 0)
    # a code another document names as a family ("V200 series") is that family here too
    products = [norm for kind, norm in entities if kind == "product"]
    families = set()
    if products:
        families = set(
            (
                await session.exec(
                    text(
                        "SELECT norm_name FROM kg_entities WHERE tenant_id = :tenant_id AND kind = 'family' "
                        "AND norm_name = ANY(:names)"
                    ),
                    params={"tenant_id": tenant_id, "names": products},
                )
            ).scalars()
        )

    def key_of(entity: ExtractedEntity) -> tuple[str, str]:
        kind, norm = entity.key
        return ("family", norm) if kind == "product" and norm in families else (kind, norm)

    table = KgEntity.__table__  # type: ignore[attr-defined]
    rows = {}
    for entity in entities.values():
        kind, norm = key_of(entity)
        rows.setdefault((kind, norm), {"tenant_id": tenant_id, "kind": kind, "name": entity.name[:255],
                                       "norm_name": norm[:255], "attributes": _attributes(entity)})  # fmt: skip
    ids: dict[tuple[str, str], int] = {}
    values = list(rows.values())
    for start in range(0, len(values), _BATCH):
        statement = pg_insert(table).values(values[start : start + _BATCH])
        statement = statement.on_conflict_do_update(
            index_elements=[table.c.tenant_id, table.c.kind, table.c.norm_name],
            set_={
                "name": table.c.name
            },  # keep the first spelling; the no-op update makes RETURNING see the row
        ).returning(table.c.id, table.c.kind, table.c.norm_name)
        for row in (await session.exec(statement)).all():
            ids[(row.kind, row.norm_name)] = row.id
    mentions: dict[tuple[int, int], dict[str, object]] = {}
    relations: dict[tuple[int, str, int, int], dict[str, object]] = {}
    for chunk_id, extraction in zip(chunk_ids, extractions, strict=True):
        by_name: dict[str, int] = {}
        for entity in extraction.entities:
            entity_id = ids[key_of(entity)]
            by_name.setdefault(normalize_name(entity.name), entity_id)
            mentions[(entity_id, chunk_id)] = {
                "entity_id": entity_id, "chunk_id": chunk_id, "tenant_id": tenant_id, "source_id": source_id,
            }  # fmt: skip
        for relation in extraction.relations:
            subject, obj = by_name[normalize_name(relation.subject)], by_name[normalize_name(relation.object)]
            if subject == obj:
                continue
            relations[(subject, relation.relation, obj, chunk_id)] = {
                "tenant_id": tenant_id, "subject_id": subject, "relation": relation.relation,
                "object_id": obj, "chunk_id": chunk_id, "source_id": source_id,
            }  # fmt: skip
    mention_table = KgMention.__table__  # type: ignore[attr-defined]
    mention_rows = list(mentions.values())
    for start in range(0, len(mention_rows), _BATCH):
        await session.exec(
            pg_insert(mention_table).values(mention_rows[start : start + _BATCH]).on_conflict_do_nothing()
        )
    relation_rows = list(relations.values())
    for start in range(0, len(relation_rows), _BATCH):
        await session.exec(pg_insert(KgRelation.__table__).values(relation_rows[start : start + _BATCH]))  # type: ignore[attr-defined]
    return GraphCounts(len(rows), len(mention_rows), len(relation_rows))


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
