"""Tenant API keys on the public API: refused without one, with a revoked or expired one (at once), or
without the route's scope; rate-limited with 429 and Retry-After; every error a problem with its code."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import timedelta

import pytest
from sqlmodel import select
from switchboard.db.models import TenantApiKey, utcnow
from switchboard.public_api import RATE_WINDOW_S
from switchboard.users import API_KEY_PREFIX, list_credentials, revoke_credential
from switchboard.users.accounts import sha256_hex

from tests.utils.agent import make_conversation

PROBLEM = "application/problem+json"


def assert_problem(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body = response.json()
    assert body["status"] == status
    assert body["code"] == code
    assert body["type"] == f"urn:switchboard:problem:{code}"
    assert body["title"] and body["detail"]
    return body


async def test_a_key_reads_its_tenants_conversations_only(make_tenant, sessions, api, make_key) -> None:
    shop, other = await make_tenant("Key Shop"), await make_tenant("Other Shop")
    mine = await make_conversation(sessions, shop)
    await make_conversation(sessions, other)
    key = await make_key(shop, scopes=["conversations:read"])
    async with api(key) as client:
        response = await client.get("/api/v1/conversations")
    assert response.status_code == 200, response.text
    body = response.json()
    assert [item["id"] for item in body["items"]] == [str(mine.conversation.id)]
    assert body["next_cursor"] is None
    assert body["items"][0]["customer_id"] == str(mine.customer.id)


async def test_the_key_is_stored_hashed_with_its_prefix(make_tenant, sessions, make_key) -> None:
    shop = await make_tenant("Hash Shop")
    key = await make_key(shop, scopes=["leads:read"])
    assert key.startswith(API_KEY_PREFIX) and len(key) > 40
    async with sessions() as session:
        row = (await session.exec(select(TenantApiKey).where(TenantApiKey.tenant_id == shop.id))).one()
    assert row.token_hash == sha256_hex(key) and key not in row.token_hash
    assert row.prefix == key[:12]
    assert row.scopes == ["leads:read"]


@pytest.mark.parametrize("header", [None, "Bearer nothing", "Bearer sbk_unknown", "Basic abc"])
async def test_no_valid_key_is_401_unauthorized(api, api_app, header) -> None:
    async with api() as client:
        response = await client.get(
            "/api/v1/conversations", headers={"Authorization": header} if header else {}
        )
    assert_problem(response, 401, "unauthorized")
    assert response.headers["www-authenticate"] == "Bearer"


async def test_a_revoked_key_is_refused_at_once(make_tenant, sessions, api, make_key) -> None:
    shop = await make_tenant("Revoke Shop")
    key = await make_key(shop, scopes=["conversations:read"])
    async with api(key) as client:
        assert (await client.get("/api/v1/conversations")).status_code == 200
        async with sessions() as session:
            [credential] = [c for c in await list_credentials(session, tenant_id=shop.id) if c.kind == "key"]
            assert credential.last_used_at is not None and credential.active
            assert await revoke_credential(session, tenant_id=shop.id, credential_id=credential.id) == "key"
            await session.commit()
        assert_problem(await client.get("/api/v1/conversations"), 401, "unauthorized")


async def test_an_expired_key_is_refused(make_tenant, sessions, api, make_key) -> None:
    shop = await make_tenant("Expiry Shop")
    key = await make_key(shop, scopes=["conversations:read"], expires_at=utcnow() + timedelta(hours=1))
    async with api(key) as client:
        assert (await client.get("/api/v1/conversations")).status_code == 200
        async with sessions() as session, session.begin():
            row = (await session.exec(select(TenantApiKey).where(TenantApiKey.tenant_id == shop.id))).one()
            row.expires_at = utcnow() - timedelta(seconds=1)
            session.add(row)
        assert_problem(await client.get("/api/v1/conversations"), 401, "unauthorized")


async def test_a_key_without_the_scope_is_403_insufficient_scope(make_tenant, api, make_key) -> None:
    shop = await make_tenant("Scope Shop")
    key = await make_key(shop, scopes=["leads:read"])
    async with api(key) as client:
        body = assert_problem(await client.get("/api/v1/conversations"), 403, "insufficient_scope")
    assert "conversations:read" in body["detail"]


async def test_past_the_rate_limit_429_with_retry_after(make_settings, make_tenant, make_key) -> None:
    import httpx

    from services.console.main import create_app

    app = create_app(make_settings(api_key_requests_per_minute=3))
    shop = await make_tenant("Busy Shop")
    key, other_key = (
        await make_key(shop, scopes=["conversations:read"]),
        await make_key(shop, scopes=["conversations:read"]),
    )
    if time.time() % RATE_WINDOW_S > RATE_WINDOW_S - 3:  # not across the end of a window
        await asyncio.sleep(RATE_WINDOW_S - time.time() % RATE_WINDOW_S + 0.05)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://t", headers={"Authorization": f"Bearer {key}"}
        ) as client:
            statuses = [(await client.get("/api/v1/conversations")).status_code for _ in range(3)]
            refused = await client.get("/api/v1/conversations")
            # the limit is per key: another key of the same tenant still gets through
            other = await client.get(
                "/api/v1/conversations", headers={"Authorization": f"Bearer {other_key}"}
            )
    assert statuses == [200, 200, 200]
    body = assert_problem(refused, 429, "rate_limited")
    assert 1 <= int(refused.headers["retry-after"]) <= RATE_WINDOW_S
    assert "3 requests a minute" in body["detail"]
    assert other.status_code == 200


async def test_errors_under_api_are_problems(make_tenant, api, make_key) -> None:
    shop = await make_tenant("Problem Shop")
    key = await make_key(shop)
    async with api(key) as client:
        invalid = assert_problem(await client.get("/api/v1/conversations?limit=0"), 422, "invalid_request")
        assert invalid["errors"][0]["field"] == "limit"
        assert_problem(await client.get("/api/v1/conversations?cursor=bm9wZQ"), 400, "invalid_cursor")
        assert_problem(await client.get("/api/v1/no-such-thing"), 404, "not_found")
        assert_problem(await client.delete("/api/v1/conversations"), 405, "method_not_allowed")
        # outside /api/ the service keeps its own error shape
        outside = await client.get("/v1/admin/tenants/nope/conversations")
    assert outside.headers["content-type"].startswith("application/json")


async def test_user_tokens_are_listed_and_revocable_with_the_keys(make_tenant, sessions) -> None:
    from switchboard.db.models import Role
    from switchboard.users import create_api_token, user_for_api_token

    from tests.utils.console import new_user

    shop = await make_tenant("Token Shop")
    user = await new_user(sessions, role=Role.tenant_admin, tenant_id=shop.id)
    async with sessions() as session:
        token = await create_api_token(session, user=user, name="laptop")
        await session.commit()
        [listed] = await list_credentials(session, tenant_id=shop.id)
        assert (listed.kind, listed.name, listed.created_by, listed.scopes) == (
            "user_token",
            "laptop",
            user.email,
            ["role:tenant_admin"],
        )
        other = await make_tenant("Not Yours")
        with pytest.raises(LookupError):
            await revoke_credential(session, tenant_id=other.id, credential_id=listed.id)
        with pytest.raises(LookupError):
            await revoke_credential(session, tenant_id=shop.id, credential_id=uuid.uuid4())
        assert await revoke_credential(session, tenant_id=shop.id, credential_id=listed.id) == "user_token"
        await session.commit()
        assert await user_for_api_token(session, token) is None
