"""Row-level security for the tool server's role (migration 0012_tool_server_rls).

The services' own user owns the tables and bypasses RLS (the rest of the suite is unaffected); the
tool server switches each call to ``switchboard_tools`` with ``app.tenant_id`` set, and then Postgres
shows only that tenant's rows, or none when no tenant is set.
"""

from __future__ import annotations

import uuid

import pytest
from pydantic import BaseModel
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from switchboard.db.models import McpTenantTool
from switchboard.db.rls import TOOLS_ROLE, enter_tenant_role
from switchboard.seed import seed_demo_business
from switchboard.tools.capability import sign_capability
from switchboard.tools.contracts import ToolContract, ToolPolicy
from switchboard.tools.server import ToolServer


async def _two_shops(sessions, make_tenant):  # type: ignore[no-untyped-def]
    shops = [await make_tenant("A"), await make_tenant("B")]
    for tenant in shops:
        async with sessions() as session, session.begin():
            await seed_demo_business(session, tenant.id)
    return shops


async def test_every_tenant_table_has_row_level_security_for_the_tool_role(sessions):
    async with sessions() as session:
        rows = (
            await session.exec(
                text(
                    "SELECT c.relname, c.relrowsecurity, EXISTS (SELECT FROM pg_policy p WHERE p.polrelid = c.oid) "
                    "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = current_schema() AND c.relkind = 'r' AND (c.relname = 'tenants' OR EXISTS "
                    "(SELECT FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped))"
                )
            )
        ).all()
    assert len(rows) > 10
    assert [name for name, secured, has_policy in rows if not (secured and has_policy)] == []


async def test_without_a_tenant_set_the_tool_role_reads_no_rows(sessions, make_tenant):
    await _two_shops(sessions, make_tenant)
    async with sessions() as session, session.begin():
        owner_count = (await session.exec(text("SELECT count(*) FROM products"))).scalar_one()
        await session.exec(text(f"SET LOCAL ROLE {TOOLS_ROLE}"))
        assert (await session.exec(text("SELECT current_user"))).scalar_one() == TOOLS_ROLE
        for table in (
            "products",
            "orders",
            "tenants",
            "customers",
            "mcp_tenant_tools",
            "knowledge_documents",
        ):
            assert (await session.exec(text(f"SELECT count(*) FROM {table}"))).scalar_one() == 0, table
    assert owner_count >= 2  # the owner (the services' own user) still sees every tenant


async def test_with_a_tenant_set_the_tool_role_sees_and_writes_that_tenant_only(sessions, make_tenant):
    a, b = await _two_shops(sessions, make_tenant)
    async with sessions() as session, session.begin():
        expected = (
            await session.exec(text("SELECT count(*) FROM products WHERE tenant_id = :t"), params={"t": a.id})
        ).scalar_one()
        await enter_tenant_role(session, a.id)
        seen = (await session.exec(text("SELECT DISTINCT tenant_id FROM products"))).scalars().all()
        assert seen == [a.id]
        assert (await session.exec(text("SELECT count(*) FROM products"))).scalar_one() == expected
        assert (await session.exec(text("SELECT count(*) FROM tenants"))).scalar_one() == 1
    with pytest.raises(DBAPIError, match="row-level security"):
        async with sessions() as session, session.begin():
            await enter_tenant_role(session, a.id)
            await session.exec(
                text(
                    "INSERT INTO mcp_tenant_tools (id, tenant_id, tool_name, enabled, custom_config, created_at, updated_at) "
                    "VALUES (:id, :t, 'x', true, '{}', now(), now())"
                ),
                params={"id": uuid.uuid4(), "t": b.id},
            )
    async with sessions() as session:  # the role and tenant ended with the transaction
        assert (await session.exec(text("SELECT current_user"))).scalar_one() != TOOLS_ROLE


class _Nothing(BaseModel):
    pass


class _Count(BaseModel):
    products: int
    tenants: int


async def _count_everything(ctx, args):  # type: ignore[no-untyped-def]
    """A handler that forgets the tenant filter (the bug RLS is there for)."""
    products = (await ctx.session.exec(text("SELECT count(*) FROM products"))).scalar_one()
    tenants = (await ctx.session.exec(text("SELECT count(*) FROM tenants"))).scalar_one()
    return _Count(products=products, tenants=tenants)


async def test_a_tool_that_forgets_the_tenant_filter_still_sees_its_tenant_only(
    sessions, settings, make_tenant
):
    a, _ = await _two_shops(sessions, make_tenant)
    contract = ToolContract(
        name="count_everything",
        version="0.1",
        description="Counts rows.",
        input_model=_Nothing,
        result_model=_Count,
        policy=ToolPolicy(kind="read"),
        handler=_count_everything,
    )
    server = ToolServer([contract])
    server.sessions, server.settings = sessions, settings
    async with sessions() as session, session.begin():
        session.add(McpTenantTool(tenant_id=a.id, tool_name="count_everything", enabled=True))
        own = (
            await session.exec(text("SELECT count(*) FROM products WHERE tenant_id = :t"), params={"t": a.id})
        ).scalar_one()
    capability = sign_capability(
        settings.secret("tool_capability_key"),
        tenant_id=a.id,
        customer_id=None,
        conversation_id=None,
        trace_id="t",
        tools=["count_everything"],
    )
    result = await server.run(
        contract, {}, {"tenant_id": str(a.id), "trace_id": "t", "capability": capability}
    )
    assert (result.products, result.tenants) == (own, 1)
