"""Knowledge graph next to the chunks: entities, their mentions in chunks, typed relations; row keys.

Revision ID: 0016_knowledge_graph
Revises: 0015_guardrails_feedback_cost
Create Date: 2026-12-01 15:30:00

docs/knowledge-base.md#the-knowledge-graph. ``kg_entities`` holds one row per (tenant, kind, normalized name);
``kg_mentions`` links an entity to each chunk it occurs in; ``kg_relations`` holds typed edges
(``belongs_to_family``, ``compatible_with``, ``incompatible_with``, ``rated_for``, ``equivalent_of``,
``replaces``, ``made_of``), each with the chunk it was read from. Mentions and relations go with
their chunk (``ON DELETE CASCADE``), so re-ingesting or deleting a document drops its graph.
``knowledge_documents.attributes`` holds a table row's key columns (CSV/XLSX rows are one chunk each).

The three tables have ``tenant_id`` and get the tool role's row-level security policy of
``0012_tool_server_rls`` (the MCP tool server walks the graph as ``switchboard_tools``).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0016_knowledge_graph"
down_revision: str | None = "0015_guardrails_feedback_cost"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLE = "switchboard_tools"
POLICY = "tool_server_tenant_isolation"
_TENANT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"
TABLES = ("kg_entities", "kg_mentions", "kg_relations")
RELATIONS = (
    "belongs_to_family",
    "compatible_with",
    "incompatible_with",
    "rated_for",
    "equivalent_of",
    "replaces",
    "made_of",
)
KINDS = ("product", "family", "material", "fluid", "standard", "range")


def upgrade() -> None:
    op.add_column(
        "knowledge_documents",
        sa.Column("attributes", postgresql.JSONB(), server_default=sa.text("'{}'::jsonb"), nullable=False),
    )
    op.create_table(
        "kg_entities",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("norm_name", sa.String(length=255), nullable=False),
        sa.Column("attributes", postgresql.JSONB(), server_default=sa.text("'{}'::jsonb"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint(
            "kind IN (" + ", ".join(f"'{k}'" for k in KINDS) + ")", name="ck_kg_entities_kind"
        ),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_kg_entities_tenant_id"), "kg_entities", ["tenant_id"], unique=False)
    op.create_index(
        "uq_kg_entities_tenant_kind_name", "kg_entities", ["tenant_id", "kind", "norm_name"], unique=True
    )
    op.create_index("ix_kg_entities_tenant_name", "kg_entities", ["tenant_id", "norm_name"], unique=False)
    op.create_table(
        "kg_mentions",
        sa.Column("entity_id", sa.BigInteger(), nullable=False),
        sa.Column("chunk_id", sa.BigInteger(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("source_id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(["chunk_id"], ["knowledge_documents.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["entity_id"], ["kg_entities.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["source_id"], ["knowledge_sources.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("entity_id", "chunk_id"),
    )
    op.create_index(op.f("ix_kg_mentions_tenant_id"), "kg_mentions", ["tenant_id"], unique=False)
    op.create_index("ix_kg_mentions_chunk", "kg_mentions", ["chunk_id"], unique=False)
    op.create_index(op.f("ix_kg_mentions_source_id"), "kg_mentions", ["source_id"], unique=False)
    op.create_table(
        "kg_relations",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("subject_id", sa.BigInteger(), nullable=False),
        sa.Column("relation", sa.String(length=32), nullable=False),
        sa.Column("object_id", sa.BigInteger(), nullable=False),
        sa.Column("chunk_id", sa.BigInteger(), nullable=False),
        sa.Column("source_id", sa.Uuid(), nullable=False),
        sa.CheckConstraint(
            "relation IN (" + ", ".join(f"'{r}'" for r in RELATIONS) + ")", name="ck_kg_relations_relation"
        ),
        sa.ForeignKeyConstraint(["chunk_id"], ["knowledge_documents.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["object_id"], ["kg_entities.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["source_id"], ["knowledge_sources.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["subject_id"], ["kg_entities.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_kg_relations_tenant_id"), "kg_relations", ["tenant_id"], unique=False)
    op.create_index("ix_kg_relations_subject", "kg_relations", ["subject_id"], unique=False)
    op.create_index("ix_kg_relations_object", "kg_relations", ["object_id"], unique=False)
    op.create_index("ix_kg_relations_chunk", "kg_relations", ["chunk_id"], unique=False)
    op.create_index(op.f("ix_kg_relations_source_id"), "kg_relations", ["source_id"], unique=False)
    for table in TABLES:
        op.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON "{table}" TO {ROLE}')
        op.execute(f'ALTER TABLE "{table}" ENABLE ROW LEVEL SECURITY')
        op.execute(
            f'CREATE POLICY {POLICY} ON "{table}" '
            f"USING (current_user <> '{ROLE}' OR tenant_id = {_TENANT}) "
            f"WITH CHECK (current_user <> '{ROLE}' OR tenant_id = {_TENANT})"
        )
    op.execute(f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {ROLE}")


def downgrade() -> None:
    for table in reversed(TABLES):
        op.execute(f'DROP POLICY IF EXISTS {POLICY} ON "{table}"')
        op.drop_table(table)
    op.drop_column("knowledge_documents", "attributes")
