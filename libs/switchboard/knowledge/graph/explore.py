"""The walk behind the model's ``explore_knowledge_graph`` tool: named entities → relations and chunks.

The model names entities (``["V200", "chlorine"]``); the server resolves them among the tenant's
entities (its normalized names, so ``Teflon`` finds PTFE), walks ``hops`` relations with the same
recursive CTE as ``graph`` search, and returns what it found: the entities, the relations crossed
with the document each came from, and the best chunks. The model never writes a query and never
names a tenant: ``tenant_id`` comes from the tool call's injected context.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.knowledge.graph.extract import question_names
from switchboard.knowledge.graph.schema import entity_key, normalize_name
from switchboard.knowledge.graph.walk import GRAPH_SQL, RELATIONS_SQL, SEEDS_BY_NAME, graph_ctes

__all__ = ["GraphNeighbourhood", "explore_entities"]

RELATIONS_LIMIT = 40
"""Most relations returned (the model's context is the budget)."""


@dataclass(kw_only=True)
class GraphNeighbourhood:
    entities: list[dict[str, str]] = field(default_factory=list)
    """``[{"name", "kind"}]`` of the named entities found."""
    relations: list[dict[str, str]] = field(default_factory=list)
    """``[{"subject", "relation", "object", "document"}]`` crossed by the walk."""
    chunks: list[dict[str, Any]] = field(default_factory=list)
    """``[{"text", "document", "page", "score"}]``, best first (score 0..1)."""


async def explore_entities(
    session: AsyncSession, *, tenant_id: uuid.UUID, names: list[str], hops: int = 1, limit: int = 5
) -> GraphNeighbourhood:
    """The chunks of the named entities and their neighbours ``hops`` relations away.

    Args:
        session: open session (the tool server's, under the tenant's row-level security).
        tenant_id: from the call's injected context, never from the model.
        names: entity names as written by the model or the customer (1-5).
        hops: relations followed, 0-2 (0: only chunks that mention the entities).
        limit: most chunks, 1-20.

    Returns:
        What was found; empty lists when no name matches an entity of this tenant.

    Raises:
        ValueError: ``hops`` or ``limit`` out of range.
    """
    if not 0 <= hops <= 2 or not 1 <= limit <= 20:
        raise ValueError("hops must be 0-2 and limit 1-20")
    keys: dict[str, None] = {}
    for name in names:
        keys.setdefault(normalize_name(name), None)
        keys.setdefault(entity_key(name), None)
        for candidate in question_names(name):
            keys.setdefault(candidate, None)
    params: dict[str, Any] = {
        "tenant_id": tenant_id,
        "names": list(keys),
        "hops": hops,
        "cued": [],
        "units": [],
        "graph_candidates": limit,
        "limit": limit,
        "relations_limit": RELATIONS_LIMIT,
    }
    found = (
        await session.exec(
            text(
                "SELECT name, kind FROM kg_entities WHERE tenant_id = :tenant_id "
                "AND norm_name = ANY(CAST(:names AS text[])) ORDER BY kind, name"
            ),
            params={"tenant_id": tenant_id, "names": list(keys)},
        )
    ).all()
    result = GraphNeighbourhood(entities=[{"name": row.name, "kind": row.kind} for row in found])
    if not found:
        return result
    ctes = graph_ctes(SEEDS_BY_NAME)
    relations = await session.exec(text(RELATIONS_SQL.replace("{ctes}", ctes)), params=params)
    result.relations = [
        {"subject": r.subject, "relation": r.relation, "object": r.object, "document": r.document}
        for r in relations.all()
    ]
    sql = GRAPH_SQL.replace("{ctes}", ctes).replace("{similarity}", "NULL::float")
    chunks = await session.exec(text(sql), params=params)
    result.chunks = [
        {"text": c.text, "document": c.filename, "page": c.page, "score": round(float(c.score), 6)}
        for c in chunks.all()
    ]
    return result
