"""A webhook endpoint's description is bounded text the database can store: a NUL, an unpaired
surrogate or more than 500 characters is a 422 naming it, and nothing is registered."""

from __future__ import annotations

import httpx
import pytest
from sqlmodel import select
from switchboard.db.models import Role, WebhookEndpoint
from switchboard.users import create_api_token

from services.orchestrator.main import create_app
from tests.utils.console import new_user


@pytest.mark.parametrize("description", ["a\\u0000b", "\\ud800", "d" * 501])
async def test_a_bad_description_is_refused_by_name(settings, sessions, make_tenant, description):
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with sessions() as session, session.begin():
        token = await create_api_token(session, user=admin, name="webhooks")
    app = create_app(settings)
    body = '{"url": "https://hooks.example.com/h", "description": "' + description + '"}'
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=headers) as api:
            response = await api.post(f"/v1/admin/tenants/{tenant.slug}/webhooks", content=body.encode())
    assert response.status_code == 422, response.text
    assert "description" in response.text
    async with sessions() as session:
        rows = (
            await session.exec(select(WebhookEndpoint).where(WebhookEndpoint.tenant_id == tenant.id))
        ).all()
    assert rows == []
