"""A narrow copy of the active chunks' half-precision embeddings for the exact scan: ``knowledge_chunk_vectors``.

Revision ID: 0024_chunk_vectors
Revises: 0023_events
Create Date: 2026-12-02 04:40:00

The exact scan (``vector`` and the vector half of ``hybrid``, tenants up to
``KB_EXACT_SCAN_MAX_CHUNKS``) ranks every active chunk of the tenant by its ``embedding_half``. In
``knowledge_documents`` that 3 KB column shares the row with the chunk's text and ``tsv``
(``toast_tuple_target = 8160``, migration ``0021_retrieval``), so a chunk fills most of an 8 KB page
and the scan of a 5,000-chunk tenant touched ~5,000 pages. ``knowledge_chunk_vectors`` holds only
``(id, tenant_id, source_id, embedding_half)`` of the **active** chunks that have an embedding:
two rows a page (``STORAGE PLAIN``: never compressed, never out of line; pglz-compressed rows were
4x fewer pages but the scan was ~2x slower for decompressing them; this server has no lz4), half
the pages (measured with ``loadtests/kb_coarse_ab.py``).

Upkeep is in the database, so every writer (ingestion's ``INSERT .. unnest``, the benchmark's
``COPY``, the evaluation copy, ``set_source_active``'s ``UPDATE``) keeps it without knowing of it:

* statement-level ``AFTER INSERT`` / ``AFTER UPDATE`` triggers on ``knowledge_documents`` with
  transition tables (one statement per statement, not per row) insert the active rows, remove
  rows that became inactive or lost their embedding, and rewrite a row whose tenant, source or
  embedding changed;
* deletion follows ``id REFERENCES knowledge_documents ON DELETE CASCADE`` (deleting a source, a
  tenant, a re-ingested document's old chunks); ``TRUNCATE knowledge_documents`` needs ``CASCADE``.

The backfill copies the active rows ordered by tenant and source, so a tenant's rows sit on
neighbouring pages. The table has ``tenant_id`` and gets the tool role's row-level security of
``0012_tool_server_rls`` (the trigger runs as whoever wrote the chunk, so that role also writes
here). Downgrade drops the triggers, their functions and the table.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import HALFVEC

revision: str = "0024_chunk_vectors"
down_revision: str | None = "0023_events"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLE = "switchboard_tools"
POLICY = "tool_server_tenant_isolation"
_TENANT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"
TABLE = "knowledge_chunk_vectors"

_ON_INSERT = f"""
CREATE FUNCTION {TABLE}_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {TABLE} (id, tenant_id, source_id, embedding_half)
    SELECT n.id, n.tenant_id, n.source_id, n.embedding_half FROM inserted n
    WHERE n.is_active AND n.embedding_half IS NOT NULL;
    RETURN NULL;
END
$$
"""

_ON_UPDATE = f"""
CREATE FUNCTION {TABLE}_on_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM {TABLE} v USING updated n
    WHERE v.id = n.id AND NOT (n.is_active AND n.embedding_half IS NOT NULL);
    INSERT INTO {TABLE} AS v (id, tenant_id, source_id, embedding_half)
    SELECT n.id, n.tenant_id, n.source_id, n.embedding_half FROM updated n
    WHERE n.is_active AND n.embedding_half IS NOT NULL
    ON CONFLICT (id) DO UPDATE
        SET tenant_id = excluded.tenant_id, source_id = excluded.source_id,
            embedding_half = excluded.embedding_half
        -- an UPDATE that changed none of them (re-activating an active source) writes nothing
        WHERE (v.tenant_id, v.source_id, v.embedding_half)
            IS DISTINCT FROM (excluded.tenant_id, excluded.source_id, excluded.embedding_half);
    RETURN NULL;
END
$$
"""


def upgrade() -> None:
    op.create_table(
        TABLE,
        sa.Column("id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("source_id", sa.Uuid(), nullable=False),
        sa.Column("embedding_half", HALFVEC(1536), nullable=False),
        sa.ForeignKeyConstraint(["id"], ["knowledge_documents.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.execute(f"ALTER TABLE {TABLE} ALTER COLUMN embedding_half SET STORAGE PLAIN")
    op.execute(
        f"INSERT INTO {TABLE} (id, tenant_id, source_id, embedding_half) "
        "SELECT id, tenant_id, source_id, embedding_half FROM knowledge_documents "
        "WHERE is_active AND embedding_half IS NOT NULL ORDER BY tenant_id, source_id, id"
    )
    op.create_index(f"ix_{TABLE}_tenant_source", TABLE, ["tenant_id", "source_id"])
    op.execute(f"ANALYZE {TABLE}")
    op.execute(_ON_INSERT)
    op.execute(_ON_UPDATE)
    op.execute(
        f"CREATE TRIGGER {TABLE}_insert AFTER INSERT ON knowledge_documents "
        f"REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION {TABLE}_on_insert()"
    )
    op.execute(
        f"CREATE TRIGGER {TABLE}_update AFTER UPDATE ON knowledge_documents "
        f"REFERENCING NEW TABLE AS updated FOR EACH STATEMENT EXECUTE FUNCTION {TABLE}_on_update()"
    )
    op.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON "{TABLE}" TO {ROLE}')
    op.execute(f'ALTER TABLE "{TABLE}" ENABLE ROW LEVEL SECURITY')
    op.execute(
        f'CREATE POLICY {POLICY} ON "{TABLE}" '
        f"USING (current_user <> '{ROLE}' OR tenant_id = {_TENANT}) "
        f"WITH CHECK (current_user <> '{ROLE}' OR tenant_id = {_TENANT})"
    )


def downgrade() -> None:
    op.execute(f"DROP TRIGGER IF EXISTS {TABLE}_update ON knowledge_documents")
    op.execute(f"DROP TRIGGER IF EXISTS {TABLE}_insert ON knowledge_documents")
    op.execute(f"DROP FUNCTION IF EXISTS {TABLE}_on_update()")
    op.execute(f"DROP FUNCTION IF EXISTS {TABLE}_on_insert()")
    op.execute(f'DROP POLICY IF EXISTS {POLICY} ON "{TABLE}"')
    op.drop_table(TABLE)
