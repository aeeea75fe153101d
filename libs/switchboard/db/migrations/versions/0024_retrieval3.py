"""A tenant's coarse vector candidates from an index alone: ``knowledge_documents.embedding_bits``.

Revision ID: 0024_retrieval3
Revises: 0023_events
Create Date: 2026-12-02 01:30:00

The exact scan of a tenant (``vector``, ``hybrid`` and ``neighborhood`` modes, tenants up to
``KB_EXACT_SCAN_MAX_CHUNKS``) ranked every one of the tenant's rows by its 3 KB half-precision
embedding (``embedding_half``, 0021): one heap page and one 1,536-dimension product per chunk,
~12 ms for 5,000 chunks, and at 100,000 chunks in the table those pages no longer stay in shared
buffers. The new generated column holds the embedding's signs as 3,072 bits (384 bytes): the
positive dimensions (``binary_quantize(embedding)``) then the negative ones (``binary_quantize``
of the negated embedding). A partial b-tree on ``(tenant_id, source_id)`` of the active chunks
carries ``id`` and the bits (``INCLUDE``), so the first pass reads only the index (an index-only
scan, ~1 MB for 5,000 chunks) and ranks by the shared signs with the question
(``bit_count(embedding_bits & q)``); only its best candidates go on to the half-precision and
the exact re-rank (``switchboard.knowledge.retrieval``). Adding a stored generated column rewrites
the table and rebuilds its indexes, HNSW included: expect about a minute per 100,000 chunks.
Downgrade drops the index and the column.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0024_retrieval3"
down_revision: str | None = "0023_events"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

EMBEDDING_BITS_SQL = (
    "(binary_quantize(embedding) || binary_quantize(embedding * CAST(array_fill(CAST(-1 AS real), ARRAY[1536]) "
    "AS vector(1536))))::bit(3072)"
)


def upgrade() -> None:
    op.execute(
        f"ALTER TABLE knowledge_documents ADD COLUMN embedding_bits bit(3072) "
        f"GENERATED ALWAYS AS ({EMBEDDING_BITS_SQL}) STORED"
    )
    op.execute(
        "CREATE INDEX ix_knowledge_documents_tenant_bits ON knowledge_documents (tenant_id, source_id) "
        "INCLUDE (id, embedding_bits) WHERE is_active"
    )


def downgrade() -> None:
    op.drop_index("ix_knowledge_documents_tenant_bits", table_name="knowledge_documents")
    op.drop_column("knowledge_documents", "embedding_bits")
