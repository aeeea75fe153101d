"""Every console route and every admin API route, walked with every role and with another tenant's user.

Routes are found in the apps themselves (new pages and API routes are walked without editing this
file); each tenant route must carry an access check (``page_access`` / ``platform_access`` /
``tenant_access``) whose ``roles`` say who may pass. Expected answers:

* nobody logged in: a page GET redirects to ``/login`` (303), anything else (the API) 401;
* a user of another tenant: 404, like an unknown tenant;
* a role the route does not allow: 403;
* an allowed role: past the check (not 401/403, and not the tenant's 404; the route itself may still
  answer 404/409/422 for the made-up ids and empty bodies of the walk).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, iter_route_contexts
from switchboard.db.models import Role
from switchboard.users import create_api_token

from services.orchestrator.main import create_app as create_orchestrator
from tests.utils.console import log_in, new_user
from tests.utils.handoff import make_customer_conversation

PUBLIC = {
    "/login",
    "/logout",
    "/",
    "/healthz",
    "/metrics",
    "/docs",
    "/openapi.json",
    "/language",
    "/invite/{token}",
    "/favicon.ico",
    "/csat/{conversation_id}/{rating}",
}
"""Console paths with no tenant check of their own (``/`` and ``/logout`` still need a login; an
invitation link is its own credential, tests/console/test_people.py; so is a signed rating link,
tests/channels/gmail/test_csat.py; the icon is the browser's, for every page, the login page included)."""
PUBLIC_API = "/api/"
"""The public API takes tenant API keys, not users: tests/public_api walks its routes with every scope."""
STREAMING = {"/t/{slug}/events"}
"""Answers that never end while allowed (server-sent events): only the refusals are walked."""


@dataclass(frozen=True)
class Walked:
    method: str
    path: str
    roles: frozenset[Role]


def _roles_of(dependant: Dependant) -> frozenset[Role] | None:
    for sub in dependant.dependencies:
        roles = getattr(sub.call, "roles", None)
        if roles is not None:
            return frozenset(roles)
        found = _roles_of(sub)
        if found is not None:
            return found
    return None


def _walk(app: Any, prefix: str) -> Iterator[Walked]:
    for ctx in iter_route_contexts(app.router.routes):
        route = ctx.route
        if not isinstance(route, APIRoute) or not ctx.path.startswith(prefix) or ctx.path in PUBLIC:
            continue
        if ctx.path.startswith(PUBLIC_API):
            continue
        roles = _roles_of(route.dependant)
        assert roles is not None, f"{ctx.path} has no access check (page_access / tenant_access)"
        for method in sorted(ctx.methods or ()):
            if method != "HEAD":
                yield Walked(method, ctx.path, roles)


def _fill(path: str, slug: str, conversation_id: uuid.UUID) -> str:
    out = path.replace("{slug}", slug).replace("{conversation_id}", str(conversation_id))
    while "{" in out:
        start, end = out.index("{"), out.index("}")
        name = out[start + 1 : end]
        out = out[:start] + (str(uuid.uuid4()) if name.endswith("id") else "x") + out[end + 1 :]
    return out


@dataclass
class World:
    tenant: Any
    other: Any
    conversation_id: uuid.UUID
    users: dict[str, Any]


@pytest.fixture
async def world(sessions, make_tenant) -> World:  # type: ignore[no-untyped-def]
    tenant, other = await make_tenant("Mine"), await make_tenant("Theirs")
    _, conversation = await make_customer_conversation(sessions, tenant)
    users = {
        "agent": await new_user(sessions, role=Role.agent, tenant_id=tenant.id),
        "tenant_admin": await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id),
        "platform_admin": await new_user(sessions, role=Role.platform_admin, tenant_id=None),
        "other_tenant_admin": await new_user(sessions, role=Role.tenant_admin, tenant_id=other.id),
    }
    return World(tenant, other, conversation.id, users)


def _expect_allowed(response: httpx.Response, what: str) -> None:
    assert response.status_code not in (401, 403), f"{what}: {response.status_code} {response.text[:200]}"
    if response.status_code == 404:
        # not the unknown-tenant 404 ("tenant 'x' not found", HTML-escaped on pages); a page's 404 also
        # names the viewer (e-mail tenant_admin-...@), so the word alone is no sign
        assert not re.search(r"tenant (&#39;|&#x27;|')", response.text), f"{what}: {response.text[:200]}"


async def test_every_console_route_checks_login_role_and_tenant(
    console_app, console_client, world, stops_at_the_queue
):
    routes = list(_walk(console_app, "/"))
    assert {r.path for r in routes} >= {"/t/{slug}/inbox", "/t/{slug}/conversations/{conversation_id}/reply"}
    clients: dict[str, Any] = {}
    async with console_client() as anonymous:
        for name, user in world.users.items():
            client = console_client()
            clients[name] = (client, await log_in(client, user))
        try:
            for route in routes:
                path = _fill(route.path, world.tenant.slug, world.conversation_id)
                what = f"{route.method} {route.path}"
                answer = await anonymous.request(route.method, path)
                page = route.method == "GET" and not route.path.startswith("/v1/")
                assert answer.status_code == (303 if page else 401), f"anonymous {what}"
                if page:
                    assert answer.headers["location"].startswith("/login?next=")
                for name, (client, me) in clients.items():
                    role = Role(me.user.role)
                    data = {"csrf_token": me.csrf} if route.method != "GET" else None
                    csrf = {"X-CSRF-Token": me.csrf}  # the API takes the session's token as a header
                    if name == "other_tenant_admin" and "{slug}" in route.path:
                        answer = await client.request(route.method, path, data=data, headers=csrf)
                        assert answer.status_code == 404, f"{name} {what}: {answer.status_code}"
                    elif role not in route.roles:
                        answer = await client.request(route.method, path, data=data, headers=csrf)
                        assert answer.status_code == 403, f"{name} {what}: {answer.status_code}"
                    elif route.path not in STREAMING:
                        _expect_allowed(
                            await client.request(route.method, path, data=data, headers=csrf),
                            f"{name} {what}",
                        )
        finally:
            for client, _ in clients.values():
                await client.aclose()


@pytest.fixture
async def orchestrator_app(console_settings) -> AsyncIterator[Any]:  # type: ignore[no-untyped-def]
    app = create_orchestrator(console_settings)
    async with app.router.lifespan_context(app):
        yield app


@pytest.mark.usefixtures("stops_at_the_queue")  # an allowed close asks the delivery of what it wrote
async def test_every_admin_api_route_checks_token_role_and_tenant(
    orchestrator_app, console_settings, sessions, world
):
    routes = list(_walk(orchestrator_app, "/v1/admin/tenants/{slug}"))
    assert len(routes) > 20
    tokens: dict[str, str] = {}
    for name, user in world.users.items():
        async with sessions() as session, session.begin():
            tokens[name] = await create_api_token(session, user=user, name="walk")
    tokens["admin_token"] = console_settings.secret("admin_token")
    transport = httpx.ASGITransport(app=orchestrator_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://orchestrator.test") as client:
        for route in routes:
            path = _fill(route.path, world.tenant.slug, world.conversation_id)
            what = f"{route.method} {route.path}"
            for bearer in (None, "wrong-token", "sbu_not-a-real-token"):
                headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
                answer = await client.request(route.method, path, headers=headers)
                assert answer.status_code == 401, f"{bearer} {what}: {answer.status_code}"
            for name, token in tokens.items():
                headers = {"Authorization": f"Bearer {token}"}
                answer = await client.request(route.method, path, headers=headers)
                if name == "admin_token":
                    _expect_allowed(answer, f"{name} {what}")
                elif name == "other_tenant_admin":
                    assert answer.status_code == 404 and "tenant" in answer.text, f"{name} {what}"
                elif Role(world.users[name].role) not in route.roles:
                    assert answer.status_code == 403, f"{name} {what}: {answer.status_code}"
                else:
                    _expect_allowed(answer, f"{name} {what}")


async def test_the_admin_api_accepts_a_console_session_with_its_csrf_header(console_client, world):
    agent = world.users["agent"]
    async with console_client() as client:
        me = await log_in(client, agent)
        base = f"/v1/admin/tenants/{world.tenant.slug}/conversations"
        listed = await client.get(base, headers={"Accept": "application/json"})
        assert listed.status_code == 200 and [c["id"] for c in listed.json()] == [str(world.conversation_id)]
        refused = await client.post(f"{base}/{world.conversation_id}/takeover")
        assert refused.status_code == 403 and "X-CSRF-Token" in refused.json()["detail"]
        taken = await client.post(
            f"{base}/{world.conversation_id}/takeover", headers={"X-CSRF-Token": me.csrf}
        )
        assert taken.status_code == 200, taken.text
        assert taken.json()["conversation"]["mode"] == "human"
        assert taken.json()["conversation"]["assigned_to"] == agent.email
        other = await client.get(f"/v1/admin/tenants/{world.other.slug}/conversations")
        assert other.status_code == 404
