"""Row-level security for the tool server's database role.

Revision ID: 0012_tool_server_rls
Revises: 0011_pending_action_routing
Create Date: 2026-12-01 12:40:00

Defence in depth under the tool server's own checks (docs/decisions/row-level-security.md): the MCP tool server runs each tool
call as the role ``switchboard_tools`` (``SET LOCAL ROLE``) with ``app.tenant_id`` set to the call's
tenant (:func:`switchboard.db.rls.enter_tenant_role`). Every table with a ``tenant_id`` column, and
``tenants`` (by ``id``), gets row-level security with one policy: rows are visible and writable to
``switchboard_tools`` only when their tenant is ``app.tenant_id``; without it set, no rows. Other
roles are not restricted by the policy (``current_user <> 'switchboard_tools'``), and the tables'
owner (the services' own user) and superusers bypass RLS anyway (RLS is enabled, not forced), so
nothing else changes.

The role is created if missing (``NOLOGIN``; roles are cluster-wide, so it may exist already) and
granted to the migrating user when that user is not a superuser (``SET ROLE`` needs membership).
A table created by a later migration that has ``tenant_id`` must call the same steps
(``tests/db/test_rls.py`` fails for a tenant table without them).
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0012_tool_server_rls"
down_revision: str | None = "0011_pending_action_routing"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLE = "switchboard_tools"
POLICY = "tool_server_tenant_isolation"
_TENANT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"

_TENANT_TABLES = """
SELECT c.table_name FROM information_schema.columns c
JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
WHERE c.table_schema = current_schema() AND c.column_name = 'tenant_id' AND t.table_type = 'BASE TABLE'
ORDER BY c.table_name
"""


def _tables() -> list[str]:
    return [row[0] for row in op.get_bind().exec_driver_sql(_TENANT_TABLES)]


def upgrade() -> None:
    op.execute(
        f"""
        DO $$
        BEGIN
            IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{ROLE}') THEN
                CREATE ROLE {ROLE} NOLOGIN;
            END IF;
            IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
                EXECUTE format('GRANT {ROLE} TO %I', current_user);
            END IF;
        END
        $$;
        """
    )
    op.execute(f"GRANT USAGE ON SCHEMA public TO {ROLE}")
    op.execute(f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {ROLE}")
    for table, column in [*((name, "tenant_id") for name in _tables()), ("tenants", "id")]:
        op.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON "{table}" TO {ROLE}')
        op.execute(f'ALTER TABLE "{table}" ENABLE ROW LEVEL SECURITY')
        op.execute(
            f'CREATE POLICY {POLICY} ON "{table}" '
            f"USING (current_user <> '{ROLE}' OR {column} = {_TENANT}) "
            f"WITH CHECK (current_user <> '{ROLE}' OR {column} = {_TENANT})"
        )


def downgrade() -> None:
    for table in [*_tables(), "tenants"]:
        op.execute(f'DROP POLICY IF EXISTS {POLICY} ON "{table}"')
        op.execute(f'ALTER TABLE "{table}" DISABLE ROW LEVEL SECURITY')
        op.execute(f'REVOKE ALL ON "{table}" FROM {ROLE}')
    op.execute(f"REVOKE USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public FROM {ROLE}")
    op.execute(f"REVOKE USAGE ON SCHEMA public FROM {ROLE}")
    # the role stays: it is cluster-wide and other databases may use it
