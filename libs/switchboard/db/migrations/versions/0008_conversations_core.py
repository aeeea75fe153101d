"""Conversations core: customer identities, conversation lifecycle events, the human-mode owner check.

* ``customer_identities``: every way a customer is reached (``wa_id``, ``bsuid``, ``igsid``, ``email``),
  backfilled from ``customers.phone``, ``external_user_id``, ``profile.whatsapp_bsuid`` (active) and
  ``profile.previous_phones`` (retired). Where two customers claim the same value, the oldest keeps it
  active and the others get it retired.
* ``conversation_events``: one row per lifecycle transition.
* ``conversations.is_agent_console`` and ``ck_conversations_human_has_owner``: a conversation in human
  mode has an assigned agent, a place in the queue, or is a human agent's own console. Existing rows
  are fixed first: agent consoles are marked, and other human-mode conversations nobody handles (a
  reply from the WhatsApp Business app used to leave them so) join the queue.

Revision ID: 0008_conversations_core
Revises: 0007_handoff
Create Date: 2026-12-01 09:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0008_conversations_core"
down_revision: str | None = "0007_handoff"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

AGENT_CONSOLE_REASON = "human agent console: messages from this number are handled by the handoff"
"""``switchboard.handoff.relay.AGENT_CONSOLE_REASON`` as of this revision (migrations do not import app code)."""

_BACKFILL_IDENTITIES = """
WITH candidates AS (
    SELECT c.tenant_id, c.id AS customer_id, c.channel, 'wa_id' AS kind, c.phone AS value,
           false AS retired, c.created_at
    FROM customers c
    WHERE c.channel = 'whatsapp' AND coalesce(c.phone, '') <> ''
    UNION ALL
    SELECT c.tenant_id, c.id, c.channel,
           CASE c.channel
               WHEN 'instagram' THEN 'igsid'
               WHEN 'gmail' THEN 'email'
               ELSE CASE WHEN c.external_user_id ~ '^[0-9]+$' THEN 'wa_id' ELSE 'bsuid' END
           END,
           CASE WHEN c.channel = 'gmail' THEN lower(c.external_user_id) ELSE c.external_user_id END,
           c.channel = 'whatsapp'
               AND jsonb_typeof(c.profile -> 'previous_phones') = 'array'
               AND c.profile -> 'previous_phones' @> jsonb_build_array(c.external_user_id)
               AND c.external_user_id IS DISTINCT FROM c.phone,
           c.created_at
    FROM customers c
    UNION ALL
    SELECT c.tenant_id, c.id, c.channel, 'bsuid', c.profile ->> 'whatsapp_bsuid', false, c.created_at
    FROM customers c
    WHERE c.channel = 'whatsapp' AND coalesce(c.profile ->> 'whatsapp_bsuid', '') <> ''
    UNION ALL
    SELECT c.tenant_id, c.id, c.channel, 'wa_id', previous.value, true, c.created_at
    FROM customers c
    CROSS JOIN LATERAL jsonb_array_elements_text(
        CASE WHEN jsonb_typeof(c.profile -> 'previous_phones') = 'array'
             THEN c.profile -> 'previous_phones' ELSE '[]'::jsonb END
    ) AS previous(value)
    WHERE c.channel = 'whatsapp' AND previous.value <> '' AND previous.value IS DISTINCT FROM c.phone
),
per_customer AS (
    SELECT tenant_id, customer_id, channel, kind, value, bool_and(retired) AS retired, min(created_at) AS created_at
    FROM candidates
    GROUP BY tenant_id, customer_id, channel, kind, value
),
ranked AS (
    SELECT *, row_number() OVER (
        PARTITION BY tenant_id, channel, kind, value, retired ORDER BY created_at, customer_id
    ) AS claim
    FROM per_customer
)
INSERT INTO customer_identities
    (id, tenant_id, customer_id, channel, kind, value, created_at, last_seen_at, retired_at)
SELECT gen_random_uuid(), tenant_id, customer_id, channel, kind, value, now(), now(),
       CASE WHEN retired OR claim > 1 THEN now() END
FROM ranked
"""


def upgrade() -> None:
    op.create_table(
        "customer_identities",
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("customer_id", sa.Uuid(), nullable=False),
        sa.Column("channel", sa.String(length=16), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("value", sqlmodel.sql.sqltypes.AutoString(length=320), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("retired_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "channel IN ('whatsapp', 'instagram', 'gmail')", name="ck_customer_identities_channel"
        ),
        sa.CheckConstraint("kind IN ('wa_id', 'bsuid', 'igsid', 'email')", name="ck_customer_identities_kind"),
        sa.CheckConstraint("value <> ''", name="ck_customer_identities_value_not_empty"),
        sa.ForeignKeyConstraint(["customer_id"], ["customers.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_customer_identities_tenant_id"), "customer_identities", ["tenant_id"])
    op.create_index(op.f("ix_customer_identities_customer_id"), "customer_identities", ["customer_id"])
    op.create_index(
        "uq_customer_identities_active",
        "customer_identities",
        ["tenant_id", "channel", "kind", "value"],
        unique=True,
        postgresql_where=sa.text("retired_at IS NULL"),
    )
    op.execute(_BACKFILL_IDENTITIES)

    op.create_table(
        "conversation_events",
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("conversation_id", sa.Uuid(), nullable=False),
        sa.Column("from_status", sa.String(length=16), nullable=True),
        sa.Column("to_status", sa.String(length=16), nullable=False),
        sa.Column("agent_id", sa.Uuid(), nullable=True),
        sa.Column("actor_type", sa.String(length=16), nullable=False),
        sa.Column("actor_id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("trace_id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint(
            "from_status IS NULL OR from_status IN ('ai', 'human', 'closed')",
            name="ck_conversation_events_from_status",
        ),
        sa.CheckConstraint("to_status IN ('ai', 'human', 'closed')", name="ck_conversation_events_to_status"),
        sa.CheckConstraint(
            "actor_type IN ('customer', 'ai', 'agent', 'business_app', 'system', 'api')",
            name="ck_conversation_events_actor_type",
        ),
        sa.ForeignKeyConstraint(["conversation_id"], ["conversations.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["agent_id"], ["human_agents.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_conversation_events_tenant_id"), "conversation_events", ["tenant_id"])
    op.create_index(
        "ix_conversation_events_conversation_created", "conversation_events", ["conversation_id", "created_at"]
    )

    op.add_column(
        "conversations",
        sa.Column("is_agent_console", sa.Boolean(), server_default=sa.text("false"), nullable=False),
    )
    op.execute(
        sa.text(
            "UPDATE conversations SET is_agent_console = true "
            "WHERE status = 'human' AND assigned_agent_id IS NULL AND escalation_reason = :reason"
        ).bindparams(reason=AGENT_CONSOLE_REASON)
    )
    op.execute(
        "UPDATE conversations SET queued_at = updated_at "
        "WHERE status = 'human' AND assigned_agent_id IS NULL AND queued_at IS NULL AND NOT is_agent_console"
    )
    op.create_check_constraint(
        "ck_conversations_human_has_owner",
        "conversations",
        "status <> 'human' OR assigned_agent_id IS NOT NULL OR queued_at IS NOT NULL OR is_agent_console",
    )


def downgrade() -> None:
    op.drop_constraint("ck_conversations_human_has_owner", "conversations", type_="check")
    op.drop_column("conversations", "is_agent_console")
    op.drop_index("ix_conversation_events_conversation_created", table_name="conversation_events")
    op.drop_index(op.f("ix_conversation_events_tenant_id"), table_name="conversation_events")
    op.drop_table("conversation_events")
    op.drop_index("uq_customer_identities_active", table_name="customer_identities")
    op.drop_index(op.f("ix_customer_identities_customer_id"), table_name="customer_identities")
    op.drop_index(op.f("ix_customer_identities_tenant_id"), table_name="customer_identities")
    op.drop_table("customer_identities")
