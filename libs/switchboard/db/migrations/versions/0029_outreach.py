"""WhatsApp message templates per number, and the signature scheme of event webhook endpoints.

Revision ID: 0029_outreach
Revises: 0027_model_failures
Create Date: 2026-12-07 18:30:00

* ``whatsapp_templates``: one row per template (name, language) of a WhatsApp number's business
  account as the Graph API last listed it: status, category, parameter format, components. Replaced
  as a whole at each refresh. Row-level security as in 0012.
* ``webhook_endpoints.signature_scheme``: ``switchboard`` (the default, as before) or ``standard``
  (Standard Webhooks headers).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0029_outreach"
down_revision: str | None = "0028_tenant_api_keys"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLE = "switchboard_tools"
POLICY = "tool_server_tenant_isolation"
_TENANT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"


def upgrade() -> None:
    op.create_table(
        "whatsapp_templates",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("tenant_id", sa.Uuid(), sa.ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False),
        sa.Column(
            "channel_account_id",
            sa.Uuid(),
            sa.ForeignKey("channel_accounts.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("waba_id", sa.String(64), nullable=False),
        sa.Column("name", sa.String(512), nullable=False),
        sa.Column("language", sa.String(16), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("category", sa.String(32), nullable=False, server_default=""),
        sa.Column("parameter_format", sa.String(16), nullable=False, server_default="POSITIONAL"),
        sa.Column("components", JSONB(), nullable=False, server_default=sa.text("'[]'::jsonb")),
        sa.Column("external_id", sa.Text(), nullable=False, server_default=""),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.text("now()")
        ),
        sa.UniqueConstraint(
            "channel_account_id", "name", "language", name="uq_whatsapp_templates_account_name_lang"
        ),
    )
    op.create_index("ix_whatsapp_templates_tenant_id", "whatsapp_templates", ["tenant_id"])
    op.create_index("ix_whatsapp_templates_channel_account_id", "whatsapp_templates", ["channel_account_id"])
    op.execute('ALTER TABLE "whatsapp_templates" ENABLE ROW LEVEL SECURITY')
    op.execute(
        f'CREATE POLICY {POLICY} ON "whatsapp_templates" '
        f"USING (current_user <> '{ROLE}' OR tenant_id = {_TENANT}) "
        f"WITH CHECK (current_user <> '{ROLE}' OR tenant_id = {_TENANT})"
    )
    op.add_column(
        "webhook_endpoints",
        sa.Column("signature_scheme", sa.String(16), nullable=False, server_default="switchboard"),
    )
    op.create_check_constraint(
        "ck_webhook_endpoints_signature_scheme",
        "webhook_endpoints",
        "signature_scheme IN ('switchboard', 'standard')",
    )


def downgrade() -> None:
    op.drop_constraint("ck_webhook_endpoints_signature_scheme", "webhook_endpoints", type_="check")
    op.drop_column("webhook_endpoints", "signature_scheme")
    op.drop_table("whatsapp_templates")
