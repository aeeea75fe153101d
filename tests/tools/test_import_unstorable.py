"""CSV import: a value the row model reads but the database cannot store is a rejected row naming the
field (NUL or unpaired surrogate escapes in JSON columns, integers past the column, dates whose UTC
time leaves the calendar), never a 500; nothing is imported."""

from __future__ import annotations

import httpx
import pytest
from switchboard.db.models import Role
from switchboard.users import create_api_token

from services.orchestrator.main import create_app
from tests.utils.console import new_user


@pytest.fixture
async def api(settings, sessions, make_tenant):
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with sessions() as session, session.begin():
        token = await create_api_token(session, user=admin, name="import")
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "text/csv"}
        async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=headers) as client:
            yield client, tenant


CASES = [
    (
        "products",
        'sku,name,price,attributes\nA1,Pump,10,"{""a"": ""x\\u0000y""}"\n',
        "attributes: contains a NUL",
    ),
    ("products", 'sku,name,price,attributes\nA2,Pump,10,"{""a\\ud800"": 1}"\n', "attributes: contains a NUL"),
    ("products", 'sku,name,price,attributes\nA3,Pump,10,"{""a"": NaN}"\n', "attributes: holds a number that"),
    (
        "products",
        "sku,name,price,stock\nA4,Pump,10,99999999999\n",
        "stock: Input should be less than or equal",
    ),
    (
        "stores",
        'name,address,city,lat,lon,opening_hours\nS,Main st,Town,1,1,"{""mon"": ""9\\u0000""}"\n',
        "opening_hours: contains a NUL",
    ),
    ("slots", "starts_at\n9999-12-31T23:00:00-14:00\n", "starts_at: is out of range"),
    (
        "orders",
        "order_number,customer,status,total,placed_at\nO1,a@example.com,paid,1,0001-01-01T00:00:00+14:00\n",
        "placed_at: is out of range",
    ),
]


@pytest.mark.parametrize(("kind", "body", "reason"), CASES)
async def test_a_value_the_database_cannot_store_is_a_rejected_row(api, kind, body, reason):
    client, tenant = api
    response = await client.post(f"/v1/admin/tenants/{tenant.slug}/data/{kind}", content=body.encode())
    assert response.status_code == 422, response.text
    report = response.json()
    assert report["imported"] == 0 and report["committed"] is False
    [rejected] = report["rejected"]
    assert rejected["line"] == 2
    assert any(r.startswith(reason) for r in rejected["reasons"]), rejected
