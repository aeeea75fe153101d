"""Knowledge graph: entities and typed relations read from chunks at ingestion, walked in SQL.

* :mod:`.schema`: the strict shape of an extraction (pydantic), shared by both extractors.
* :mod:`.extract`: the deterministic extractor (tables, part-number patterns, lexicons, units).
* :mod:`.llm`: extraction by a provider model through the LLM gateway, validated, with fallback.
* :mod:`.store`: entities, mentions and relations stored next to the chunks (``kg_*`` tables).
* :mod:`.walk`: the recursive-CTE walk that ``graph``, ``hybrid`` and ``neighborhood`` search use.
* :mod:`.explore`: the walk for the model's ``explore_knowledge_graph`` tool.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from switchboard.knowledge.graph.extract import extract_chunk, extract_document, question_names
from switchboard.knowledge.graph.schema import ChunkExtraction, DocumentExtraction, entity_key, normalize_name
from switchboard.knowledge.graph.store import GraphCounts, prune_orphans, store_graph

__all__ = [
    "ChunkExtraction",
    "DocumentExtraction",
    "GraphCounts",
    "entity_key",
    "extract_chunk",
    "extract_document",
    "extract_for_ingest",
    "normalize_name",
    "prune_orphans",
    "question_names",
    "store_graph",
]


async def extract_for_ingest(
    chunks: Sequence[tuple[str, Mapping[str, Any] | None]],
    *,
    settings: Any,
    tenant: Any,
    gateway: Any | None,
    trace_id: str,
) -> tuple[list[ChunkExtraction], str]:
    """Extract a document's chunks with the tenant's provider model, or deterministically.

    The model is used when ``gateway`` is given (the worker's) and the tenant's deployments
    include a provider model; a batch the model fails or answers out of schema falls back to the
    deterministic extractor. Returns the extractions and the extractor's name: ``deterministic``,
    ``llm`` or ``llm+deterministic`` (some batches fell back).
    """
    if gateway is not None:
        from switchboard.knowledge.graph.llm import LLMExtractor, uses_provider_model
        from switchboard.tenant_settings import tenant_settings_from

        llm = tenant_settings_from(tenant.settings_extensions, tenant_id=str(tenant.id)).llm
        if uses_provider_model(settings, llm):
            extractor = LLMExtractor(gateway, llm, tenant_id=uuid.UUID(str(tenant.id)), trace_id=trace_id)
            results = await extractor.extract(chunks)
            return results, "llm" if extractor.fallbacks == 0 else "llm+deterministic"
    return extract_document(chunks), "deterministic"
