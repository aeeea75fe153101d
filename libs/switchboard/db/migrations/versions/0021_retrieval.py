"""Exact vector scans without TOAST reads: ``knowledge_documents.embedding_half``; a tenant's full-text index.

Revision ID: 0021_retrieval
Revises: 0018_account_api_base
Create Date: 2026-12-01 19:00:00

An exact scan of a tenant's chunks (``vector`` and ``hybrid`` modes, tenants up to
``KB_EXACT_SCAN_MAX_CHUNKS``) read every chunk's 1,536-float embedding: 6 KB stored out of line
(pgvector's ``vector`` type has ``STORAGE EXTERNAL``), four TOAST rows fetched per chunk. The new
generated column holds the L2-normalized embedding in half precision (``halfvec``, 3 KB), kept in
the row (``STORAGE MAIN``), so the scan ranks by an inner product read from the heap page, and only
the best candidates are re-ranked by the exact cosine of the full embeddings
(``switchboard.knowledge.retrieval``). ``toast_tuple_target = 8160`` keeps a chunk's ``text`` and
``tsv`` in the row too (with the 3 KB column the default target of 2 KB would move them out of line,
and full-text ranking would read them from TOAST); the 6 KB ``embedding`` still goes out of line.
The full-text GIN index becomes ``(tenant_id, tsv)`` (``btree_gin``): a tenant's full-text
candidates were found among every tenant's rows containing the words, then filtered by tenant.
Adding a stored generated column rewrites the table and rebuilds its indexes, HNSW included: expect
about a minute per 100,000 chunks. Downgrade drops the column and restores the ``tsv``-only index
and the default target (the extension stays).
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0021_retrieval"
down_revision: str | None = "0020_turns"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

def upgrade() -> None:
    # one statement: the column is MAIN and the target set before the rewrite fills the rows
    op.execute(
        "ALTER TABLE knowledge_documents ADD COLUMN embedding_half halfvec(1536) "
        "GENERATED ALWAYS AS (l2_normalize(embedding)::halfvec(1536)) STORED, "
        "ALTER COLUMN embedding_half SET STORAGE MAIN, SET (toast_tuple_target = 8160)"
    )
    # full-text candidates of one tenant: its rows only, not every tenant's rows with the words
    op.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")
    op.create_index(
        "ix_knowledge_documents_tenant_tsv", "knowledge_documents", ["tenant_id", "tsv"], postgresql_using="gin"
    )
    op.drop_index("ix_knowledge_documents_tsv", table_name="knowledge_documents")


def downgrade() -> None:
    op.create_index("ix_knowledge_documents_tsv", "knowledge_documents", ["tsv"], postgresql_using="gin")
    op.drop_index("ix_knowledge_documents_tenant_tsv", table_name="knowledge_documents")
    op.drop_column("knowledge_documents", "embedding_half")
    op.execute("ALTER TABLE knowledge_documents RESET (toast_tuple_target)")
