"""Knowledge base: uploaded sources and their chunks with embeddings (pgvector) and full-text vectors."""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Any

from pgvector.sqlalchemy import BIT, HALFVEC, VECTOR
from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    Computed,
    ForeignKey,
    Index,
    LargeBinary,
    String,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import TSVECTOR
from sqlmodel import Field

from switchboard.db.models.base import (
    TenantOwned,
    created_at_field,
    id_field,
    jsonb_dict_field,
    updated_at_field,
)

EMBEDDING_DIMS = 1536
"""Width of ``knowledge_documents.embedding``: OpenAI ``text-embedding-3-small`` (1536 dimensions)."""


class SourceStatus(StrEnum):
    pending = "pending"
    processing = "processing"
    ready = "ready"
    failed = "failed"


class KnowledgeSource(TenantOwned, table=True):
    """One uploaded file (PDF, DOCX, XLSX, CSV, TXT, Markdown) and its ingestion state."""

    __tablename__ = "knowledge_sources"
    __table_args__ = (
        CheckConstraint(
            "status IN ('pending', 'processing', 'ready', 'failed')", name="ck_knowledge_sources_status"
        ),
        Index("ix_knowledge_sources_tenant_hash", "tenant_id", "content_hash"),
        Index("uq_knowledge_sources_tenant_filename", "tenant_id", "filename", unique=True),
    )

    id: uuid.UUID = id_field()
    filename: str = Field(max_length=512)
    content_type: str | None = Field(default=None, max_length=128)
    content_hash: str = Field(max_length=64)
    """SHA-256 hex of the file's bytes."""
    size_bytes: int = Field(default=0)
    status: str = Field(default=SourceStatus.pending.value, sa_type=String(16))
    error: str | None = Field(default=None, sa_type=Text)
    is_active: bool = Field(default=True)
    embedding_model: str | None = Field(default=None, max_length=128)
    chunk_count: int = Field(default=0)
    details: dict[str, Any] = jsonb_dict_field()
    """Parser report: pages, sheets, skipped parts and why."""
    created_at: datetime = created_at_field()
    updated_at: datetime = updated_at_field()


EMBEDDING_HALF_SQL = f"l2_normalize(embedding)::halfvec({EMBEDDING_DIMS})"
"""The generated ``knowledge_documents.embedding_half``: the embedding L2-normalized and in half
precision (2 bytes a dimension), so its inner product with a normalized question is their cosine
similarity to about three digits."""

EMBEDDING_BITS_SQL = (
    "(binary_quantize(embedding) || binary_quantize(embedding * CAST(array_fill(CAST(-1 AS real), "
    f"ARRAY[{EMBEDDING_DIMS}]) AS vector({EMBEDDING_DIMS}))))::bit({2 * EMBEDDING_DIMS})"
)
"""The generated ``knowledge_documents.embedding_bits``: the embedding's positive dimensions as bits,
then its negative ones (``2 × EMBEDDING_DIMS`` bits, 384 bytes); ``bit_count(bits & q)`` counts the
dimensions where chunk and question have the same non-zero sign (migration ``0024_retrieval3``)."""


class KnowledgeDocument(TenantOwned, table=True):
    """One chunk of a knowledge source: text, embedding and ``tsvector``, filtered by tenant and ``is_active``.

    The table keeps DESIGN.md's name (``knowledge_documents``); each row is a chunk.
    """

    __tablename__ = "knowledge_documents"
    __table_args__ = (  # toast_tuple_target 8160 (migration 0021_retrieval) keeps text and tsv inline
        Index(
            "ix_knowledge_documents_embedding_hnsw",
            "embedding",
            postgresql_using="hnsw",
            postgresql_with={"m": 16, "ef_construction": 64},
            postgresql_ops={"embedding": "vector_cosine_ops"},
        ),
        Index("ix_knowledge_documents_tenant_tsv", "tenant_id", "tsv", postgresql_using="gin"),
        Index("ix_knowledge_documents_tenant_active", "tenant_id", "is_active"),
        Index(  # the exact scan's first pass reads only this index (index-only scan, migration 0024)
            "ix_knowledge_documents_tenant_bits",
            "tenant_id",
            "source_id",
            postgresql_include=["id", "embedding_bits"],
            postgresql_where=text("is_active"),
        ),
    )

    id: int | None = Field(default=None, sa_column=Column(BigInteger, primary_key=True, autoincrement=True))
    source_id: uuid.UUID = Field(foreign_key="knowledge_sources.id", index=True, ondelete="CASCADE")
    position: int = Field(default=0)
    """Chunk index within its source, from 0."""
    page: int | None = Field(default=None)
    """1-based PDF page the chunk starts on."""
    sheet: str | None = Field(default=None, max_length=255)
    text: str = Field(sa_type=Text)
    embedding: list[float] | None = Field(
        default=None, sa_column=Column(VECTOR(EMBEDDING_DIMS), nullable=True)
    )
    embedding_half: Any = Field(
        default=None,
        sa_column=Column(HALFVEC(EMBEDDING_DIMS), Computed(EMBEDDING_HALF_SQL, persisted=True)),
    )
    """``embedding`` normalized, in half precision, stored inline (``STORAGE MAIN``, 3 KB): the exact
    scan re-ranks the first pass's candidates by it (migration ``0021_retrieval``)."""
    embedding_bits: Any = Field(
        default=None,
        sa_column=Column(BIT(2 * EMBEDDING_DIMS), Computed(EMBEDDING_BITS_SQL, persisted=True)),
    )
    """The embedding's signs (:data:`EMBEDDING_BITS_SQL`), carried by ``ix_knowledge_documents_tenant_bits``
    for the exact scan's first pass."""
    tsv: str | None = Field(
        default=None,
        sa_column=Column(TSVECTOR, Computed("to_tsvector('simple', text)", persisted=True)),
    )
    """Full-text vector, generated by Postgres from ``text`` (``simple`` config: no stemming, keeps codes)."""
    is_active: bool = Field(default=True)
    content_hash: str = Field(max_length=64)
    """SHA-256 hex of the chunk text."""
    attributes: dict[str, Any] = jsonb_dict_field()
    """A table row's place and key columns: ``{"row": 3, "keys": {"SKU": "AB-100"}}`` (``{}`` for prose)."""
    created_at: datetime = created_at_field()


class KnowledgeSourceFile(TenantOwned, table=True):
    """The uploaded bytes of a knowledge source, kept so the ingestion job (and a re-index) can parse them.

    A separate table so listing sources never loads file contents.
    """

    __tablename__ = "knowledge_source_files"

    source_id: uuid.UUID = Field(foreign_key="knowledge_sources.id", primary_key=True, ondelete="CASCADE")
    data: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    created_at: datetime = created_at_field()


ENTITY_KINDS = ("product", "family", "material", "fluid", "standard", "range")
"""``kg_entities.kind``: products and part numbers, families/series, materials, fluids, standards,
ranges with units (``attributes`` holds ``low``, ``high``, ``unit``)."""
RELATION_TYPES = (
    "belongs_to_family",
    "compatible_with",
    "incompatible_with",
    "rated_for",
    "equivalent_of",
    "replaces",
    "made_of",
)
"""``kg_relations.relation``: subject → object, e.g. ``PTFE rated_for -200..260 °C``, ``V200 made_of PTFE``."""


class KgEntity(TenantOwned, table=True):
    """An entity of a tenant's knowledge graph: one row per (tenant, kind, normalized name)."""

    __tablename__ = "kg_entities"
    __table_args__ = (
        CheckConstraint(
            "kind IN (" + ", ".join(f"'{k}'" for k in ENTITY_KINDS) + ")", name="ck_kg_entities_kind"
        ),
        Index("uq_kg_entities_tenant_kind_name", "tenant_id", "kind", "norm_name", unique=True),
        Index("ix_kg_entities_tenant_name", "tenant_id", "norm_name"),
    )

    id: int | None = Field(default=None, sa_column=Column(BigInteger, primary_key=True, autoincrement=True))
    kind: str = Field(sa_type=String(16))
    name: str = Field(max_length=255)
    """As first read (``PTFE``, ``FVAM-2050-B``, ``-20..200 °C``)."""
    norm_name: str = Field(max_length=255)
    """Lower case, single spaces (:func:`switchboard.knowledge.graph.extract.normalize_name`): the lookup key."""
    attributes: dict[str, Any] = jsonb_dict_field()
    created_at: datetime = created_at_field()


class KgMention(TenantOwned, table=True):
    """An entity occurs in a chunk (deleted with the chunk)."""

    __tablename__ = "kg_mentions"
    __table_args__ = (Index("ix_kg_mentions_chunk", "chunk_id"),)

    entity_id: int = Field(
        sa_column=Column(BigInteger, ForeignKey("kg_entities.id", ondelete="CASCADE"), primary_key=True)
    )
    chunk_id: int = Field(
        sa_column=Column(
            BigInteger, ForeignKey("knowledge_documents.id", ondelete="CASCADE"), primary_key=True
        )
    )
    source_id: uuid.UUID = Field(foreign_key="knowledge_sources.id", index=True, ondelete="CASCADE")


class KgRelation(TenantOwned, table=True):
    """A typed edge ``subject relation object`` read from one chunk (deleted with the chunk)."""

    __tablename__ = "kg_relations"
    __table_args__ = (
        CheckConstraint(
            "relation IN (" + ", ".join(f"'{r}'" for r in RELATION_TYPES) + ")",
            name="ck_kg_relations_relation",
        ),
        Index("ix_kg_relations_subject", "subject_id"),
        Index("ix_kg_relations_object", "object_id"),
        Index("ix_kg_relations_chunk", "chunk_id"),
    )

    id: int | None = Field(default=None, sa_column=Column(BigInteger, primary_key=True, autoincrement=True))
    subject_id: int = Field(
        sa_column=Column(BigInteger, ForeignKey("kg_entities.id", ondelete="CASCADE"), nullable=False)
    )
    relation: str = Field(sa_type=String(32))
    object_id: int = Field(
        sa_column=Column(BigInteger, ForeignKey("kg_entities.id", ondelete="CASCADE"), nullable=False)
    )
    chunk_id: int = Field(
        sa_column=Column(BigInteger, ForeignKey("knowledge_documents.id", ondelete="CASCADE"), nullable=False)
    )
    source_id: uuid.UUID = Field(foreign_key="knowledge_sources.id", index=True, ondelete="CASCADE")
