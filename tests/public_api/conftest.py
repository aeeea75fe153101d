"""The console service in-process (it serves ``/api/v1``) and tenant API keys for it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import Any

import httpx
import pytest
from switchboard.db.models import Tenant
from switchboard.users import API_SCOPES, create_tenant_key

from services.console.main import create_app


@pytest.fixture
async def api_app(make_settings: Callable[..., Any]) -> AsyncIterator[Any]:
    app = create_app(make_settings())
    async with app.router.lifespan_context(app):
        yield app


@pytest.fixture
def api(api_app: Any) -> Callable[..., httpx.AsyncClient]:
    """``async with api(key) as client``: a client of the console service sending ``key`` as its bearer."""

    def make(key: str | None = None) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.AsyncClient(
            transport=httpx.ASGITransport(app=api_app), base_url="http://console.test", headers=headers
        )

    return make


MakeKey = Callable[..., Awaitable[str]]


@pytest.fixture
def make_key(sessions: Any) -> MakeKey:
    """``await make_key(tenant, scopes=[...], expires_at=None)``: a new key (all scopes by default)."""

    async def make(
        tenant: Tenant, scopes: list[str] | None = None, expires_at: datetime | None = None
    ) -> str:
        async with sessions() as session, session.begin():
            token, _ = await create_tenant_key(
                session, tenant_id=tenant.id, scopes=list(API_SCOPES) if scopes is None else scopes,
                name="test", expires_at=expires_at,
            )  # fmt: skip
        return token

    return make
