"""Knowledge base: parse uploaded documents, split, embed, store in pgvector, and search them.

At ingestion the chunks' entities and typed relations are stored next to them
(:mod:`switchboard.knowledge.graph`); ``graph``, ``hybrid`` and ``neighborhood`` search walk them.

The stable retrieval API (used by the MCP ``search_knowledge_base`` tool and the orchestrator) is
:func:`search_chunks` returning :class:`ChunkHit` rows.

Names are imported on first use (PEP 562 ``__getattr__``), so importing one submodule does not import
them all: the parse helper (:mod:`switchboard.knowledge.isolation`) starts from ``parsers`` alone,
~70 MB instead of ~100 MB, and every fork of it for a parse copies that many fewer page tables.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from switchboard.lazy_imports import lazy_getattr

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
        switch_embedding_model,
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
    "ChunkHit": "retrieval",
    "DocumentKind": "parsers",
    "DocumentNotFound": "ingest",
    "DocumentRejected": "parsers",
    "DocumentTooComplex": "parsers",
    "EmbeddingConfig": "embeddings",
    "EmbeddingFailed": "embeddings",
    "EmbeddingKeyMissing": "embeddings",
    "IngestReport": "ingest",
    "ParseLimits": "isolation",
    "ParsedDocument": "parsers",
    "SearchMode": "retrieval",
    "Section": "parsers",
    "UploadOutcome": "ingest",
    "check_model_usable": "embeddings",
    "switch_embedding_model": "embeddings",
    "delete_source": "ingest",
    "embed_query": "embeddings",
    "embed_texts": "embeddings",
    "find_source": "ingest",
    "ingest_in_session": "ingest",
    "ingest_source": "ingest",
    "list_sources": "ingest",
    "mark_for_reindex": "ingest",
    "parse_document": "parsers",
    "parse_isolated": "isolation",
    "register_upload": "ingest",
    "resolve_embedding_config": "embeddings",
    "search_chunks": "retrieval",
    "set_source_active": "ingest",
    "set_tenant_embedding": "embeddings",
    "split_text": "splitter",
}
"""Public name -> the submodule that defines it."""


__getattr__ = lazy_getattr(__name__, _LAZY)


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
    "switch_embedding_model",
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
