"""The outbox's ``holding`` purpose: the short message a customer gets when the answer is late.

Revision ID: 0026_outbox_holding
Revises: 0025_tenant_hnsw_indexes
Create Date: 2026-12-07 16:30:00

One holding message per inbound message at most: ``uq_outbox_inbound_purpose_part`` (inbound message,
purpose, part) keeps a second one out, however often the inbound job runs. Downgrade deletes the
holding rows first (the old check refuses them).
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0026_outbox_holding"
down_revision: str | None = "0025_tenant_hnsw_indexes"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD = "purpose IN ('reply', 'notice', 'relay', 'human_reply')"
_NEW = "purpose IN ('reply', 'notice', 'relay', 'human_reply', 'holding')"


def upgrade() -> None:
    op.drop_constraint("ck_outbox_purpose", "outbox", type_="check")
    op.create_check_constraint("ck_outbox_purpose", "outbox", _NEW)


def downgrade() -> None:
    op.execute("DELETE FROM outbox WHERE purpose = 'holding'")
    op.drop_constraint("ck_outbox_purpose", "outbox", type_="check")
    op.create_check_constraint("ck_outbox_purpose", "outbox", _OLD)
