"""The console service in-process (it serves ``/api/v1``) and tenant API keys for it."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
import pytest
from switchboard.db.models import Message, MessageDirection, MessageRole, Role, Tenant
from switchboard.users import API_SCOPES, create_tenant_key

from services.console.main import create_app
from tests.utils.agent import make_conversation
from tests.utils.console import new_user


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


@dataclass
class World:
    """One tenant with a row of every resource the public API names by id, and a key of each scope."""

    tenant: Tenant
    ids: dict[str, str]
    """Path parameter → an id of this tenant: conversation_id, customer_id, document_id, message_id, endpoint_id."""
    user_id: uuid.UUID
    """A tenant admin (a conversation can be assigned to them)."""


@pytest.fixture
async def world(
    make_tenant: Any, sessions: Any, make_key: MakeKey, api: Any, stops_at_the_queue: None
) -> World:
    """(Uploads and reindexing queue ingestion jobs no worker runs here: the test discards them.)"""
    tenant = await make_tenant("World Shop")
    handle = await make_conversation(sessions, tenant)
    user = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with sessions() as session, session.begin():
        message = Message(
            tenant_id=tenant.id, conversation_id=handle.conversation.id, channel="whatsapp",
            direction=MessageDirection.outbound.value, role=MessageRole.assistant.value, text="We open at 9.",
        )  # fmt: skip
        session.add(message)
    setup = await make_key(tenant, scopes=["knowledge:write", "webhooks:manage"])
    async with api(setup) as client:
        uploaded = await client.post(
            "/api/v1/knowledge/documents",
            files={"file": ("hours.txt", b"We open at 9 and close at 18.", "text/plain")},
        )
        assert uploaded.status_code == 202, uploaded.text
        endpoint = await client.post("/api/v1/webhooks", json={"url": "http://127.0.0.1:9/hook"})
        assert endpoint.status_code == 201, endpoint.text
    ids = {
        "conversation_id": str(handle.conversation.id),
        "customer_id": str(handle.customer.id),
        "document_id": uploaded.json()["document"]["id"],
        "message_id": str(message.id),
        "endpoint_id": endpoint.json()["id"],
    }
    return World(tenant=tenant, ids=ids, user_id=user.id)


def request_body(operation_id: str, world: World) -> dict[str, Any]:
    """What each operation is called with (``json=``, ``files=`` or ``params=``) in the route walks."""
    return {
        "assignConversation": {"json": {"to": f"user:{world.user_id}"}},
        "updateCustomer": {"json": {"attributes": {"tier": "gold"}}},
        "uploadDocument": {"files": {"file": ("faq.txt", b"Returns within 30 days.", "text/plain")}},
        "searchKnowledge": {"params": {"q": "open"}},
        "sendFeedback": {"json": {"rating": "up"}},
        "createWebhookEndpoint": {"json": {"url": "http://127.0.0.1:9/other"}},
    }.get(operation_id, {})


def fill(path: str, ids: dict[str, str]) -> str:
    for name, value in ids.items():
        path = path.replace("{" + name + "}", value)
    assert "{" not in path, f"no id for {path}"
    return path


@pytest.fixture
async def world_key(make_tenant: Any, make_key: MakeKey) -> str:
    """A key with every scope, of a tenant of its own."""
    return await make_key(await make_tenant("Key Only Shop"))
