"""The tenant-scoped query helper cannot return or write another tenant's rows."""

import uuid

import pytest
from switchboard.db import TenantScope
from switchboard.db.models import Customer, Organization
from switchboard.errors import CrossTenantAccess


async def _customer(sessions, tenant, external_user_id):
    async with sessions() as session, session.begin():
        customer = Customer(tenant_id=tenant.id, channel="whatsapp", external_user_id=external_user_id)
        session.add(customer)
    return customer


async def test_select_and_get_only_see_own_tenant(sessions, make_tenant):
    tenant_a, tenant_b = await make_tenant("A"), await make_tenant("B")
    a1 = await _customer(sessions, tenant_a, "15550100001")
    b1 = await _customer(sessions, tenant_b, "15550100001")  # same external id, other tenant

    async with sessions() as session:
        scope_a = TenantScope(session, tenant_a.id)
        rows = await scope_a.all(Customer)
        assert [row.id for row in rows] == [a1.id]
        assert await scope_a.get(Customer, b1.id) is None
        assert (await scope_a.get(Customer, a1.id)).id == a1.id
        assert (await scope_a.first(Customer, Customer.external_user_id == "15550100001")).id == a1.id
        scope_b = TenantScope(session, tenant_b.id)
        assert [
            row.id for row in await scope_b.all(Customer, Customer.external_user_id == "15550100001")
        ] == [b1.id]


async def test_add_fills_tenant_and_refuses_another_tenants_row(sessions, make_tenant):
    tenant_a, tenant_b = await make_tenant(), await make_tenant()
    async with sessions() as session, session.begin():
        scope = TenantScope(session, tenant_a.id)
        row = scope.add(Customer(channel="whatsapp", external_user_id="x1"))
        assert row.tenant_id == tenant_a.id
        with pytest.raises(CrossTenantAccess) as excinfo:
            scope.add(Customer(tenant_id=tenant_b.id, channel="whatsapp", external_user_id="x2"))
        assert excinfo.value.table == "customers"


async def test_rejects_tables_that_are_not_tenant_owned_and_non_uuid_ids(session):
    scope = TenantScope(session, uuid.uuid4())
    with pytest.raises(TypeError, match=r"^Organization is not a tenant-owned table$"):
        scope.select(Organization)
    with pytest.raises(TypeError, match=r"^tenant_id must be a UUID, got str$"):
        TenantScope(session, "not-a-uuid")  # type: ignore[arg-type]
