"""Per-account provider API root: ``channel_accounts.api_base_url``.

Revision ID: 0018_account_api_base
Revises: 0012_tool_server_rls
Create Date: 2026-12-01 15:40:00

Before, ``WHATSAPP_GRAPH_BASE_URL`` chose the Graph API for every number of the process, so
connecting one real number turned the sandbox off for the demo tenant. Now each account names its
own: ``NULL`` (the real API, or the process default), ``sandbox`` (this deployment's sandbox), or a
URL. Existing accounts with no stored access token were only usable against the sandbox (a real number
always has a token), so they are marked ``sandbox``; accounts with a token keep ``NULL``.
Downgrade drops the column.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018_account_api_base"
down_revision: str | None = "0017_leads_events"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("channel_accounts", sa.Column("api_base_url", sa.String(length=500), nullable=True))
    op.execute(
        "UPDATE channel_accounts SET api_base_url = 'sandbox' "
        "WHERE channel IN ('whatsapp', 'instagram') AND credentials_encrypted IS NULL"
    )


def downgrade() -> None:
    op.drop_column("channel_accounts", "api_base_url")
