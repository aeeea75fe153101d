"""Channel core outbox: purpose, sending account, correlation id, back-off and the ``sending`` state.

Revision ID: 0009_channel_core
Revises: 0008_conversations_core
Create Date: 2026-12-01 10:00:00

Existing rows are backfilled so the one delivery loop can send them:

* ``purpose``: handoff rows (``payload.handoff = true``) become ``relay`` (a customer's message
  relayed to their agent: ``payload.proxy`` set and audience ``agent``), ``human_reply`` (an agent's
  reply relayed to the customer: ``payload.proxy.sender = 'human_agent'``) or ``notice``; every other
  row is a ``reply``. Handoff rows lose the ``+100`` offset of ``part_index`` that kept them apart from
  replies under the old ``(inbound_message_id, part_index)`` key.
* ``correlation_id``: ``'sb:' || <id without dashes>``, what the outbox writer uses for new rows.
* ``channel_account_id``: the conversation's account (both old senders sent from it).

Downgrade restores the old unique key and status check: ``sending`` rows go back to ``pending``,
``played`` becomes ``read``, non-reply rows get ``payload.handoff = true`` and ``part_index`` 100+
again (renumbered per inbound message, so two purposes never collide under the old key).
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0009_channel_core"
down_revision: str | None = "0008_conversations_core"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_NEW_STATUS = "status IN ('pending', 'sending', 'sent', 'delivered', 'read', 'played', 'failed')"
_OLD_STATUS = "status IN ('pending', 'sent', 'delivered', 'read', 'failed')"


def upgrade() -> None:
    op.add_column(
        "outbox",
        sa.Column("purpose", sa.String(length=16), server_default="reply", nullable=False),
    )
    op.add_column(
        "outbox",
        sa.Column(
            "channel_account_id",
            sa.Uuid(),
            sa.ForeignKey("channel_accounts.id", name="outbox_channel_account_id_fkey", ondelete="SET NULL"),
            nullable=True,
        ),
    )
    op.add_column("outbox", sa.Column("correlation_id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True))
    op.add_column("outbox", sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("outbox", sa.Column("sending_at", sa.DateTime(timezone=True), nullable=True))

    op.drop_constraint("uq_outbox_inbound_part", "outbox", type_="unique")
    op.execute(
        """
        UPDATE outbox SET purpose = CASE
            WHEN payload->'proxy' IS NOT NULL AND payload->>'audience' = 'agent' THEN 'relay'
            WHEN payload->'proxy'->>'sender' = 'human_agent' THEN 'human_reply'
            ELSE 'notice'
        END,
        part_index = CASE WHEN part_index >= 100 THEN part_index - 100 ELSE part_index END
        WHERE payload->>'handoff' = 'true'
        """
    )
    op.execute("UPDATE outbox SET correlation_id = 'sb:' || replace(id::text, '-', '')")
    op.execute(
        """
        UPDATE outbox AS o SET channel_account_id = c.channel_account_id
        FROM conversations AS c
        WHERE c.id = o.conversation_id AND o.channel_account_id IS NULL
        """
    )
    op.alter_column("outbox", "purpose", server_default=None)

    op.create_unique_constraint(
        "uq_outbox_inbound_purpose_part", "outbox", ["inbound_message_id", "purpose", "part_index"]
    )
    op.drop_constraint("ck_outbox_status", "outbox", type_="check")
    op.create_check_constraint("ck_outbox_status", "outbox", _NEW_STATUS)
    op.create_check_constraint(
        "ck_outbox_purpose", "outbox", "purpose IN ('reply', 'notice', 'relay', 'human_reply')"
    )
    op.create_index("ix_outbox_correlation", "outbox", ["correlation_id"], unique=False)
    op.create_index(
        "ix_outbox_due",
        "outbox",
        ["next_attempt_at"],
        unique=False,
        postgresql_where=sa.text("status IN ('pending', 'sending')"),
    )


def downgrade() -> None:
    op.drop_index("ix_outbox_due", table_name="outbox", postgresql_where=sa.text("status IN ('pending', 'sending')"))
    op.drop_index("ix_outbox_correlation", table_name="outbox")
    op.drop_constraint("ck_outbox_purpose", "outbox", type_="check")
    op.drop_constraint("ck_outbox_status", "outbox", type_="check")
    op.drop_constraint("uq_outbox_inbound_purpose_part", "outbox", type_="unique")
    op.execute("UPDATE outbox SET status = 'pending' WHERE status = 'sending'")
    op.execute("UPDATE outbox SET status = 'read' WHERE status = 'played'")
    op.execute(
        """
        UPDATE outbox AS o SET
            payload = o.payload || '{"handoff": true}'::jsonb,
            part_index = CASE WHEN o.inbound_message_id IS NULL THEN o.part_index ELSE n.rank + 100 END
        FROM (
            SELECT id, row_number() OVER (
                PARTITION BY inbound_message_id ORDER BY created_at, purpose, part_index
            ) - 1 AS rank
            FROM outbox WHERE purpose <> 'reply'
        ) AS n
        WHERE n.id = o.id
        """
    )
    op.create_check_constraint("ck_outbox_status", "outbox", _OLD_STATUS)
    op.create_unique_constraint("uq_outbox_inbound_part", "outbox", ["inbound_message_id", "part_index"])
    op.drop_column("outbox", "sending_at")
    op.drop_column("outbox", "next_attempt_at")
    op.drop_column("outbox", "correlation_id")
    op.drop_column("outbox", "channel_account_id")
    op.drop_column("outbox", "purpose")
