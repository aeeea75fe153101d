"""When the model fails: the outbox's ``holding`` purpose and the index of rows waiting for the model.

``holding`` is the short message a customer gets when the answer is late. ``ix_messages_waiting_model``
(partial: ``inbound_state = 'waiting_model'``) lets the resume job find the questions that wait for a
provider to answer again without reading the other messages.

Revision ID: 0027_model_failures
Revises: 0026_console_invites
Create Date: 2026-12-07 16:30:00

One holding message per inbound message at most: ``uq_outbox_inbound_purpose_part`` (inbound message,
purpose, part) keeps a second one out, however often the inbound job runs. Downgrade deletes the
holding rows first (the old check refuses them).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0027_model_failures"
down_revision: str | None = "0026_console_invites"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD = "purpose IN ('reply', 'notice', 'relay', 'human_reply')"
_NEW = "purpose IN ('reply', 'notice', 'relay', 'human_reply', 'holding')"


def upgrade() -> None:
    op.drop_constraint("ck_outbox_purpose", "outbox", type_="check")
    op.create_check_constraint("ck_outbox_purpose", "outbox", _NEW)
    op.create_index(
        "ix_messages_waiting_model", "messages", ["tenant_id", "created_at"], unique=False,
        postgresql_where=sa.text("inbound_state = 'waiting_model'"),
    )


def downgrade() -> None:
    op.drop_index(
        "ix_messages_waiting_model", table_name="messages", postgresql_where=sa.text("inbound_state = 'waiting_model'")
    )
    op.execute("UPDATE messages SET inbound_state = 'dead' WHERE inbound_state = 'waiting_model'")
    op.execute("DELETE FROM outbox WHERE purpose = 'holding'")
    op.drop_constraint("ck_outbox_purpose", "outbox", type_="check")
    op.create_check_constraint("ck_outbox_purpose", "outbox", _OLD)
