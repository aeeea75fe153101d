"""Shared route dependencies: every admin router finds the tenant the same way and 404s the same way."""

from __future__ import annotations

import httpx
import pytest

from services.orchestrator.main import create_app as create_orchestrator

ADMIN_LISTS = ("agents", "tools", "knowledge/documents")


@pytest.fixture
async def admin(settings):
    app = create_orchestrator(settings)
    async with app.router.lifespan_context(app):
        headers = {"Authorization": f"Bearer {settings.secret('admin_token')}"}
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test", headers=headers) as client:
            yield client


async def test_an_unknown_tenant_is_one_404_shape_on_every_admin_router(admin):
    for resource in ADMIN_LISTS:
        response = await admin.get(f"/v1/admin/tenants/no-such-shop/{resource}")
        assert (response.status_code, response.json()) == (404, {"detail": "tenant 'no-such-shop' not found"})


async def test_a_tenant_is_found_by_slug_or_id(admin, make_tenant):
    tenant = await make_tenant()
    for key in (tenant.slug, str(tenant.id)):
        for resource in ADMIN_LISTS:
            response = await admin.get(f"/v1/admin/tenants/{key}/{resource}")
            assert response.status_code == 200, (resource, response.text)


async def test_admin_routes_still_need_the_admin_token(admin, make_tenant):
    tenant = await make_tenant()
    for resource in ADMIN_LISTS:
        response = await admin.get(
            f"/v1/admin/tenants/{tenant.slug}/{resource}", headers={"Authorization": "x"}
        )
        assert response.status_code == 401


def test_openapi_documents_the_tenant_path_parameter_and_its_404(settings):
    spec = create_orchestrator(settings).openapi()
    admin_paths = {path: ops for path, ops in spec["paths"].items() if path.startswith("/v1/admin/tenants/")}
    assert admin_paths and all(path.startswith("/v1/admin/tenants/{slug}/") for path in admin_paths)
    for ops in admin_paths.values():
        for op in ops.values():
            assert "404" in op["responses"]
            assert any(p["name"] == "slug" and p["in"] == "path" for p in op["parameters"])
