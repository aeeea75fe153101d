"""HNSW only for the tenants that search by it: drop the global ``ix_knowledge_documents_embedding_hnsw``.

Revision ID: 0025_tenant_hnsw_indexes
Revises: 0024_chunk_vectors
Create Date: 2026-12-03 10:00:00

Vector search scans a tenant exactly while it has at most ``KB_EXACT_SCAN_MAX_CHUNKS`` active chunks
(``knowledge_chunk_vectors``, migration ``0024_chunk_vectors``); only larger tenants read an HNSW
index. The one HNSW index over every tenant's chunks was kept up on every chunk insert all the same:
~4.7 of the 5.9 ms of PostgreSQL CPU an ingested chunk cost (measured with
``loadtests/kb_graph_benchmark.py --ingest-only``). From this revision a tenant above the threshold has its own partial index
``ix_knowledge_documents_hnsw_<tenant id hex>`` (``... USING hnsw (embedding vector_cosine_ops) WITH
(m = 16, ef_construction = 64) WHERE tenant_id = '<uuid>'``), which the background worker's
``knowledge_vector_indexes`` job builds ``CONCURRENTLY`` when the tenant crosses the threshold and drops
when it falls back (:mod:`switchboard.knowledge.vector_index`); until it is valid, search scans the
tenant exactly (same hits, slower). So after this upgrade a tenant above the threshold is scanned
exactly until that job's first run (a minute after the worker starts) has built its index.

Downgrade drops the tenants' indexes and builds the global one again (as ``0001_initial_schema``; it
blocks writes to ``knowledge_documents`` while it builds).
"""

from collections.abc import Sequence

from alembic import op
from sqlalchemy import text

revision: str = "0025_tenant_hnsw_indexes"
down_revision: str | None = "0024_chunk_vectors"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

GLOBAL_INDEX = "ix_knowledge_documents_embedding_hnsw"
TENANT_PREFIX = "ix_knowledge_documents_hnsw_"  # TENANT_HNSW_INDEX_PREFIX when this was written


def upgrade() -> None:
    op.execute(f"DROP INDEX IF EXISTS {GLOBAL_INDEX}")


def downgrade() -> None:
    tenant_indexes = (
        op.get_bind()
        .execute(
            text(
                "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "WHERE i.indrelid = 'knowledge_documents'::regclass AND starts_with(c.relname, :prefix)"
            ),
            {"prefix": TENANT_PREFIX},
        )
        .scalars()
        .all()
    )
    for name in tenant_indexes:
        op.execute(f'DROP INDEX IF EXISTS "{name}"')
    op.create_index(
        GLOBAL_INDEX,
        "knowledge_documents",
        ["embedding"],
        unique=False,
        postgresql_using="hnsw",
        postgresql_with={"m": 16, "ef_construction": 64},
        postgresql_ops={"embedding": "vector_cosine_ops"},
    )
