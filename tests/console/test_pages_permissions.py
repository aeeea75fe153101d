"""Every route of the console-pages routers, walked with every role, another tenant's admin and nobody.

Routes are enumerated from the routers themselves, so a route added later is walked too.
"""

from __future__ import annotations

import uuid

import pytest
from fastapi.routing import APIRoute
from switchboard.analytics.routes import analytics_admin_router
from switchboard.console.analytics_pages import analytics_pages_router
from switchboard.console.channel_pages import channel_pages_router
from switchboard.console.knowledge_pages import knowledge_pages_router
from switchboard.console.operations_pages import operations_pages_router
from switchboard.console.platform_pages import platform_pages_router
from switchboard.console.settings_pages import settings_pages_router
from switchboard.db.models import Role
from switchboard.knowledge.routes import knowledge_admin_router
from switchboard.tenant_config.routes import settings_admin_router

from tests.utils.console import log_in, new_user

TENANT_ROUTERS = (
    settings_pages_router,
    knowledge_pages_router,
    analytics_pages_router,
    operations_pages_router,
    channel_pages_router,
    settings_admin_router,
    analytics_admin_router,
    knowledge_admin_router,
)
"""Every one of these is for tenant and platform admins only."""


def _routes(routers) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    found = []
    for router in routers:
        for route in router.routes:
            if isinstance(route, APIRoute):
                for method in sorted(route.methods):
                    found.append((method, route.path))
    return found


def _fill(path: str, slug: str) -> str:
    filled = path.replace("{slug}", slug)
    for name in ("document_id", "message_id", "deployment_id", "tool_name", "action"):
        filled = filled.replace("{" + name + "}", str(uuid.uuid4()) if name.endswith("_id") else "x")
    return filled


TENANT_ROUTES = _routes(TENANT_ROUTERS)
PLATFORM_ROUTES = _routes([platform_pages_router])


def test_the_walk_covers_the_pages():
    paths = {path for _, path in TENANT_ROUTES}
    assert {"/t/{slug}/settings", "/t/{slug}/knowledge", "/t/{slug}/analytics", "/t/{slug}/tools"} <= paths
    assert "/v1/admin/tenants/{slug}/settings" in paths and len(TENANT_ROUTES) > 25


@pytest.fixture
async def cast(sessions, make_tenant):  # type: ignore[no-untyped-def]
    tenant, other = await make_tenant(), await make_tenant()
    return {
        "tenant": tenant,
        Role.agent: await new_user(sessions, role=Role.agent, tenant_id=tenant.id),
        Role.tenant_admin: await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id),
        Role.platform_admin: await new_user(sessions, role=Role.platform_admin, tenant_id=None),
        "outsider": await new_user(sessions, role=Role.tenant_admin, tenant_id=other.id),
    }


async def test_nobody_logged_in_gets_a_login_redirect_or_401(console_client, cast):
    slug = cast["tenant"].slug
    async with console_client() as client:
        for method, path in TENANT_ROUTES + PLATFORM_ROUTES:
            response = await client.request(method, _fill(path, slug))
            expected = {401} if path.startswith("/v1/") or method != "GET" else {303}
            assert response.status_code in expected, (method, path, response.status_code)


async def test_an_agent_is_refused_every_admin_route(console_client, cast):
    slug = cast["tenant"].slug
    async with console_client() as client:
        me = await log_in(client, cast[Role.agent])
        for method, path in TENANT_ROUTES + PLATFORM_ROUTES:
            response = await client.request(method, _fill(path, slug), headers={"X-CSRF-Token": me.csrf})
            assert response.status_code == 403, (method, path, response.status_code)


async def test_another_tenants_admin_sees_no_such_tenant(console_client, cast):
    slug = cast["tenant"].slug
    async with console_client() as client:
        me = await log_in(client, cast["outsider"])
        for method, path in TENANT_ROUTES:
            response = await client.request(method, _fill(path, slug), headers={"X-CSRF-Token": me.csrf})
            assert response.status_code == 404, (method, path, response.status_code)
        for method, path in PLATFORM_ROUTES:
            assert (await client.request(method, _fill(path, slug))).status_code == 403, (method, path)


async def test_admins_open_every_page_and_unsafe_requests_need_the_csrf_token(console_client, cast):
    slug = cast["tenant"].slug
    for role in (Role.tenant_admin, Role.platform_admin):
        async with console_client() as client:
            await log_in(client, cast[role])
            for method, path in TENANT_ROUTES:
                if (
                    method == "GET"
                    and "{" not in path.replace("{slug}", "")
                    and not path.endswith(
                        ("/try", "/search", "/graph", "/callback")
                    )  # need a query (422 without)
                ):
                    response = await client.get(_fill(path, slug))
                    assert response.status_code == 200, (role, path, response.status_code)
                elif method != "GET":
                    response = await client.request(method, _fill(path, slug))  # no CSRF token
                    assert response.status_code == 403, (role, method, path, response.status_code)
            # Google's redirect without ?code=&state= (a bookmarked or replayed callback): the channels page,
            # saying why
            response = await client.get(f"/t/{slug}/channels/gmail/callback")
            assert response.status_code == 303, response.status_code
            assert response.headers["location"].startswith(f"/t/{slug}/channels?flash=")
            shown = await client.get(response.headers["location"])
            assert shown.status_code == 200 and "Gmail: the answer from Google carried no state" in shown.text
