"""Knowledge base: parse uploaded documents, split, embed, store in pgvector, and search them.

At ingestion the chunks' entities and typed relations are stored next to them
(:mod:`switchboard.knowledge.graph`); ``graph``, ``hybrid`` and ``neighborhood`` search walk them.

The stable retrieval API (used by the MCP ``search_knowledge_base`` tool and the orchestrator) is
:func:`search_chunks` returning :class:`ChunkHit` rows.
"""

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
