"""Knowledge base: parse uploaded documents, split, embed, store in pgvector, and search them.

At ingestion the chunks' entities and typed relations are stored next to them
(:mod:`switchboard.knowledge.graph`); ``graph``, ``hybrid`` and ``neighborhood`` search walk them.

The stable retrieval API (used by the MCP ``search_knowledge_base`` tool and the orchestrator) is
:func:`search_chunks` returning :class:`ChunkHit` rows.

Names are imported on first use (PEP 562 ``__getattr__``), so importing one submodule does not import
them all: the parse helper (:mod:`switchboard.knowledge.isolation`) starts from ``parsers`` alone,
~70 MB instead of ~100 MB, and every fork of it for a parse copies that many fewer page tables
(branch ``ingest8``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from switchboard.knowledge.embeddings import (
        EmbeddingConfig,
        EmbeddingFailed,
        EmbeddingKeyMissing,
        check_model_usable,
        embed_query,
        embed_texts,
        resolve_embedding_config,
        set_tenant_embedding,
    )
    from switchboard.knowledge.ingest import (
        DocumentNotFound,
        IngestReport,
        UploadOutcome,
        delete_source,
        find_source,
        ingest_in_session,
        ingest_source,
        list_sources,
        mark_for_reindex,
        register_upload,
        set_source_active,
    )
    from switchboard.knowledge.isolation import ParseLimits, parse_isolated
    from switchboard.knowledge.parsers import (
        DocumentKind,
        DocumentRejected,
        DocumentTooComplex,
        ParsedDocument,
        Section,
        parse_document,
    )
    from switchboard.knowledge.retrieval import ChunkHit, SearchMode, search_chunks
    from switchboard.knowledge.splitter import split_text

_LAZY = {
    "ChunkHit": "switchboard.knowledge.retrieval",
    "DocumentKind": "switchboard.knowledge.parsers",
    "DocumentNotFound": "switchboard.knowledge.ingest",
    "DocumentRejected": "switchboard.knowledge.parsers",
    "DocumentTooComplex": "switchboard.knowledge.parsers",
    "EmbeddingConfig": "switchboard.knowledge.embeddings",
    "EmbeddingFailed": "switchboard.knowledge.embeddings",
    "EmbeddingKeyMissing": "switchboard.knowledge.embeddings",
    "IngestReport": "switchboard.knowledge.ingest",
    "ParseLimits": "switchboard.knowledge.isolation",
    "ParsedDocument": "switchboard.knowledge.parsers",
    "SearchMode": "switchboard.knowledge.retrieval",
    "Section": "switchboard.knowledge.parsers",
    "UploadOutcome": "switchboard.knowledge.ingest",
    "check_model_usable": "switchboard.knowledge.embeddings",
    "delete_source": "switchboard.knowledge.ingest",
    "embed_query": "switchboard.knowledge.embeddings",
    "embed_texts": "switchboard.knowledge.embeddings",
    "find_source": "switchboard.knowledge.ingest",
    "ingest_in_session": "switchboard.knowledge.ingest",
    "ingest_source": "switchboard.knowledge.ingest",
    "list_sources": "switchboard.knowledge.ingest",
    "mark_for_reindex": "switchboard.knowledge.ingest",
    "parse_document": "switchboard.knowledge.parsers",
    "parse_isolated": "switchboard.knowledge.isolation",
    "register_upload": "switchboard.knowledge.ingest",
    "resolve_embedding_config": "switchboard.knowledge.embeddings",
    "search_chunks": "switchboard.knowledge.retrieval",
    "set_source_active": "switchboard.knowledge.ingest",
    "set_tenant_embedding": "switchboard.knowledge.embeddings",
    "split_text": "switchboard.knowledge.splitter",
}
"""Public name -> the submodule that defines it."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "ChunkHit",
    "DocumentKind",
    "DocumentNotFound",
    "DocumentRejected",
    "DocumentTooComplex",
    "EmbeddingConfig",
    "EmbeddingFailed",
    "EmbeddingKeyMissing",
    "check_model_usable",
    "IngestReport",
    "ParseLimits",
    "ParsedDocument",
    "SearchMode",
    "Section",
    "UploadOutcome",
    "delete_source",
    "embed_query",
    "embed_texts",
    "find_source",
    "ingest_in_session",
    "ingest_source",
    "list_sources",
    "mark_for_reindex",
    "parse_document",
    "parse_isolated",
    "register_upload",
    "resolve_embedding_config",
    "search_chunks",
    "set_source_active",
    "set_tenant_embedding",
    "split_text",
]
