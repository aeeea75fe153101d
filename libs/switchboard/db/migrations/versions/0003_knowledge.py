"""Knowledge base: one document per (tenant, filename); uploaded bytes kept for the ingestion job.

Revision ID: 0003_knowledge
Revises: 0002_turns
Create Date: 2026-11-30 10:40:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_knowledge"
down_revision: str | None = "0002_turns"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Re-uploading a file with the same name replaces the document: one row per (tenant, filename).
    op.create_index(
        "uq_knowledge_sources_tenant_filename", "knowledge_sources", ["tenant_id", "filename"], unique=True
    )
    op.create_table(
        "knowledge_source_files",
        sa.Column("source_id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(["source_id"], ["knowledge_sources.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("source_id"),
    )
    op.create_index(
        op.f("ix_knowledge_source_files_tenant_id"), "knowledge_source_files", ["tenant_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_knowledge_source_files_tenant_id"), table_name="knowledge_source_files")
    op.drop_table("knowledge_source_files")
    op.drop_index("uq_knowledge_sources_tenant_filename", table_name="knowledge_sources")
