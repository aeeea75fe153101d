"""Pending actions reach a person: ``notified_at`` and the ``expired`` status.

Revision ID: 0011_pending_action_routing
Revises: 0010_gmail
Create Date: 2026-12-01 12:30:00

``notified_at``: when the approval notice was written for an agent (``NULL``: nobody was told yet;
the approvals sweep retries). ``expired``: nobody decided within the tenant's
``handoff.approval_timeout_s``; the customer was told. Downgrade turns ``expired`` rows into
``rejected`` (the old statuses) and drops the column.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011_pending_action_routing"
down_revision: str | None = "0010_gmail"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_NEW = "status IN ('pending', 'approved', 'rejected', 'expired')"
_OLD = "status IN ('pending', 'approved', 'rejected')"


def upgrade() -> None:
    op.add_column("pending_actions", sa.Column("notified_at", sa.DateTime(timezone=True), nullable=True))
    op.drop_constraint("ck_pending_actions_status", "pending_actions", type_="check")
    op.create_check_constraint("ck_pending_actions_status", "pending_actions", _NEW)
    op.create_index(
        "ix_pending_actions_pending", "pending_actions", ["created_at"], postgresql_where=sa.text("status = 'pending'")
    )


def downgrade() -> None:
    op.drop_index("ix_pending_actions_pending", table_name="pending_actions")
    op.execute("UPDATE pending_actions SET status = 'rejected' WHERE status = 'expired'")
    op.drop_constraint("ck_pending_actions_status", "pending_actions", type_="check")
    op.create_check_constraint("ck_pending_actions_status", "pending_actions", _OLD)
    op.drop_column("pending_actions", "notified_at")
