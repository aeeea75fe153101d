"""Folded embeddings for a fast exact vector scan: ``knowledge_documents.embedding_fold``.

Revision ID: 0021_retrieval
Revises: 0018_account_api_base
Create Date: 2026-12-01 19:00:00

An exact scan of a tenant's chunks (``vector`` and ``hybrid`` modes, tenants up to
``KB_EXACT_SCAN_MAX_CHUNKS``) read every chunk's 1,536-float embedding: 6 KB stored out of line
(pgvector's ``vector`` type has ``STORAGE EXTERNAL``), four TOAST rows fetched and a 1,536-dimension
cosine computed per chunk, about 5-10 ms per 1,000 chunks. The new generated column holds the
L2-normalized embedding folded to 384 dimensions (the sum of its four 384-float quarters: feature
hashing of the embedding, whose inner products estimate the cosine), kept inline in the row
(``STORAGE MAIN``, 1.5 KB), so the scan ranks candidates by one 384-dimension inner product per
chunk without TOAST reads, and only the best candidates are re-ranked by the exact cosine
(``switchboard.knowledge.retrieval``). Adding a stored generated column rewrites the table (and
rebuilds its indexes, HNSW included): expect about a minute per 100,000 chunks.
The full-text GIN index becomes ``(tenant_id, tsv)`` (``btree_gin``): a tenant's full-text
candidates were found among every tenant's rows containing the words, then filtered by tenant.
Downgrade drops the column and restores the ``tsv``-only index (the extension stays).
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0021_retrieval"
down_revision: str | None = "0018_account_api_base"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FOLD = (
    "subvector(l2_normalize(embedding), 1, 384) + subvector(l2_normalize(embedding), 385, 384)"
    " + subvector(l2_normalize(embedding), 769, 384) + subvector(l2_normalize(embedding), 1153, 384)"
)


def upgrade() -> None:
    # one statement: the column is stored MAIN before the rewrite fills it
    op.execute(
        f"ALTER TABLE knowledge_documents ADD COLUMN embedding_fold vector(384) GENERATED ALWAYS AS ({FOLD}) STORED, "
        "ALTER COLUMN embedding_fold SET STORAGE MAIN"
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
    op.drop_column("knowledge_documents", "embedding_fold")
